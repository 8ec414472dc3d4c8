"""`mkbsim verify FILE --problem ID --dsl cutedsl|tirx`: one submission through the verifier."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mkbsim.cli._common import terminal_safe
from mkbsim.errors import UserError

_DSLS = ("cutedsl", "tirx")
_BACKENDS = ("cpu", "cuda")
_WORKLOADS = ("smoke", "production")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "verify",
        help="verify a kernel submission against a problem's reference",
        description=(
            "Run a submission (a Python file defining run(*inputs)) through the verifier, in a sandbox: "
            "five float64-anchored correctness draws, the bypass test (the share of the outputs the DSL "
            "kernels produce), forbidden-API checks, then 10 warmup and 50 timed calls against the eager "
            "reference, bounded by the verifier's own clock and the speed of light. Exit 0 on pass, 1 on fail. "
            "MKBSIM_VERIFIER_SANDBOX=0 runs without the sandbox."
        ),
    )
    p.add_argument("file", type=Path, help="the submission file")
    p.add_argument("--problem", required=True, help="problem id (p36) or full name")
    p.add_argument("--dsl", required=True, help="the submission's DSL: cutedsl or tirx")
    p.add_argument("--backend", help="cpu or cuda (default: cuda if a GPU is visible, else cpu)")
    p.add_argument("--protocol", default="paper", help="paper (default) or hardened")
    p.add_argument(
        "--require-full-plan",
        action="store_true",
        help="fail a partial plan (eager code making the problem's products) as partial_plan; "
        "the study's protocols accept it (off by default)",
    )
    p.add_argument("--workload", help="smoke or production (default: production on cuda, smoke on cpu)")
    p.add_argument("--json", action="store_true", help="print the VerifierResult event payload as JSON")
    p.set_defaults(handler=_handle)


def _choice(value: str | None, allowed: tuple[str, ...], what: str) -> None:
    if value is not None and value not in allowed:
        raise UserError(f"unknown {what} {value!r}; use one of: {', '.join(allowed)}")


def _handle(args: argparse.Namespace) -> int:
    from mkbsim.verifier import PROTOCOLS, resolve_protocol

    if not args.file.is_file():
        raise UserError(f"no such file: {args.file}")
    _choice(args.dsl, _DSLS, "DSL")
    _choice(args.backend, _BACKENDS, "backend")
    _choice(args.protocol, tuple(PROTOCOLS), "protocol")
    _choice(args.workload, _WORKLOADS, "workload")

    from mkbsim.catalog import load_catalog

    try:
        problem = load_catalog().get(args.problem)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None

    from mkbsim.verifier import VerifierSession, default_backend

    backend = args.backend or default_backend()
    if args.dsl == "cutedsl" and backend != "cuda":
        raise UserError("CuTe DSL kernels run only on the cuda backend (no NVIDIA GPU is visible here)")
    try:
        session = VerifierSession(backend)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    protocol = resolve_protocol(args.protocol, require_full_plan=args.require_full_plan)
    with session:
        report = session.verify(args.file, problem, args.dsl, protocol=protocol, workload=args.workload)
    if args.json:
        json.dump(report.to_payload(None, "final"), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        # the feedback may quote the submission's own text (its exception's message): printed, never acted on
        sys.stdout.write(terminal_safe("\n".join(report.verdict_lines())) + "\n")
    return 0 if report.passed else 1
