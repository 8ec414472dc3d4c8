"""`mkbsim events init|count|tail|check|rebuild`: the event store itself."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from mkbsim.cli._common import add_store_option, non_negative_int, open_store, terminal_safe
from mkbsim.errors import StoreReadOnly, UserError

if TYPE_CHECKING:
    from mkbsim.events import RecordedEvent


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("events", help="create, inspect, follow and check an event store")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = actions.add_parser("init", help="create an empty event store")
    add_store_option(p)
    p.set_defaults(handler=_init)

    p = actions.add_parser("count", help="number of events, optionally per type")
    add_store_option(p)
    p.add_argument("--by-type", action="store_true", help="one line per event type")
    p.set_defaults(handler=_count)

    p = actions.add_parser("tail", help="print the last events as JSON lines; --follow to keep going")
    add_store_option(p)
    p.add_argument("-n", "--lines", type=non_negative_int, default=20, help="how many recent events (default 20)")
    p.add_argument("--from", dest="from_position", type=non_negative_int, help="start after this position")
    p.add_argument("-f", "--follow", action="store_true", help="wait for new events (Ctrl-C to stop)")
    p.add_argument("--type", dest="types", action="append", metavar="TYPE", help="only this event type")
    p.add_argument("--stream", help="only this stream")
    p.add_argument("--poll", type=float, default=0.2, help="seconds between polls when following")
    p.add_argument("--idle-exit", type=float, metavar="S", help="stop following after S seconds with no event")
    p.set_defaults(handler=_tail)

    p = actions.add_parser("check", help="verify positions, stream versions, JSON and payload schemas")
    add_store_option(p)
    p.set_defaults(handler=_check)

    p = actions.add_parser("rebuild", help="rebuild projections from scratch (all, or those named)")
    add_store_option(p)
    p.add_argument("names", nargs="*", help="projection names (default: all)")
    p.set_defaults(handler=_rebuild)

    p = actions.add_parser("projections", help="each stored projection's checkpoint and lag; --catch-up to update")
    add_store_option(p)
    p.add_argument("--catch-up", action="store_true", help="apply pending events first")
    p.set_defaults(handler=_projections)


def _init(args: argparse.Namespace) -> int:
    if args.store.exists():
        raise UserError(f"{args.store}: already exists; refusing to touch it (choose another --store)")
    open_store(args.store, create=True).close()
    print(f"created empty event store {args.store}")
    return 0


def _count(args: argparse.Namespace) -> int:
    with open_store(args.store, readonly=True) as store:
        if args.by_type:
            for type_, n in store.type_counts().items():
                print(f"{n:>12,}  {type_}")
        print(f"{store.count():>12,}  events")
    return 0


def _tail(args: argparse.Namespace) -> int:
    with open_store(args.store, readonly=True) as store:
        head = store.last_position()  # first: everything up to it is committed, and following starts there
        filtered = bool(args.types or args.stream)
        start = max(0, head - args.lines) if args.from_position is None and not filtered else args.from_position or 0
        recent = list(store.read(start, head, stream_id=args.stream, types=args.types))
        if args.from_position is None and filtered:
            recent = recent[-args.lines :] if args.lines else []
        for ev in recent:
            _print_event(ev)
        if args.follow:
            for ev in store.tail(head, types=args.types, stream_id=args.stream, poll_interval=args.poll,
                                 idle_timeout=args.idle_exit):  # fmt: skip
                _print_event(ev)
    return 0


def _print_event(ev: RecordedEvent) -> None:
    sys.stdout.write(terminal_safe(json.dumps(ev._asdict(), ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def _check(args: argparse.Namespace) -> int:
    with open_store(args.store, readonly=True) as store:
        report = store.check()
        initialised = store.initialised
    extra = ""
    if report.unknown_types:
        extra = " (unknown types kept: " + ", ".join(f"{t}×{n}" for t, n in report.unknown_types.items()) + ")"
    if not initialised:
        extra = " (the file holds no event tables yet; nothing was written to it)"
    if report.ok:
        print(f"ok: {report.events:,} events in {report.streams:,} streams{extra}")
        return 0
    print(f"problem: {report.problem}")
    return 1


def _rebuild(args: argparse.Namespace) -> int:
    from mkbsim.lab import Lab

    with Lab(args.store, catch_up=False) as lab:
        known = [p.name for p in lab.projections]
        names = args.names or known
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UserError(f"unknown projection(s) {', '.join(unknown)}; known: {', '.join(known)}")
        if lab.readonly:
            raise StoreReadOnly(f"{args.store}: the store is read-only; a rebuild writes the projections into it")
        for name in names:
            n = lab.engine.rebuild(name)
            print(f"rebuilt {name}: {n:,} events applied")
    return 0


def _projections(args: argparse.Namespace) -> int:
    from mkbsim.lab import Lab

    with Lab(args.store, catch_up=args.catch_up) as lab:
        for s in lab.stored_status():
            at = "never built" if s.position is None else f"at {s.position:,}"
            version = f"v{s.stored_version or s.version}" + ("" if s.stored_version in (None, s.version) else
                                                             f" (this mkbsim: v{s.version})")  # fmt: skip
            print(f"{s.name:<24} {version}  {at}  (head {s.head:,}, lag {s.lag:,})")
        note = lab.freshness().note()
    if note is not None:
        print(note, file=sys.stderr)
    return 0
