"""`mkbsim problems list|show|check`: the 74-problem catalogue."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from mkbsim.errors import UserError

if TYPE_CHECKING:
    from mkbsim.catalog import Catalog, Problem


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("problems", help="list, show and check the problem catalogue")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = actions.add_parser("list", help="one row per problem: id, family, source, dtype, workload cost")
    p.add_argument("--problems", metavar="SPEC", help="ids, names, families, ranges (p01-p09) or globs")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.set_defaults(handler=_list)

    p = actions.add_parser("show", help="a problem's spec and the task text an agent sees")
    p.add_argument("problem", metavar="ID", help="id (p28, 28) or full name")
    p.add_argument("--dsl", choices=("cutedsl", "tirx"), default="tirx", help="variant to render (default tirx)")
    p.set_defaults(handler=_show)

    p = actions.add_parser("check", help="run every reference on SMOKE inputs on CPU against its float64 anchor")
    p.add_argument("--problems", metavar="SPEC", help="only these problems")
    p.set_defaults(handler=_check)

    p = actions.add_parser("export-fi", help="write a problem as a FlashInfer-Trace definition (JSON)")
    p.add_argument("problem", metavar="ID", help="id or name")
    p.add_argument("--out", type=Path, metavar="FILE", help="write here instead of stdout")
    p.set_defaults(handler=_export_fi)

    p = actions.add_parser(
        "import-fi", help="validate FlashInfer-Trace definitions, match them to the catalogue, write problem modules"
    )
    p.add_argument("path", type=Path, metavar="FILE|DIR", help="a definition JSON file or a directory of them")
    p.add_argument("--out", type=Path, metavar="DIR", help="write a problem module per importable definition here")
    p.add_argument(
        "--workloads", type=Path, metavar="DIR", help="FlashInfer-Trace workloads/ folder (production var axes)"
    )
    p.add_argument("--start-id", type=int, default=75, help="first problem number for written modules (default 75)")
    p.set_defaults(handler=_import_fi)


def _catalog() -> Catalog:
    import torch

    from mkbsim.catalog import load_catalog

    torch.set_num_threads(1)
    return load_catalog()


def _select(catalog: Catalog, spec: str | None) -> list[Problem]:
    try:
        return catalog.select(spec)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None


def _human(n: float, unit: str) -> str:
    for prefix in ("", "K", "M", "G", "T", "P"):
        if abs(n) < 1000:
            return f"{n:.3g} {prefix}{unit}"
        n /= 1000
    return f"{n:.3g} E{unit}"


def _list(args: argparse.Namespace) -> int:
    catalog = _catalog()
    rows = []
    for p in _select(catalog, args.problems):
        cost = p.cost()
        rows.append(
            {"id": p.id, "name": p.name, "family": p.family, "source": p.source, "dtype": p.dtype,
             "bytes": cost.bytes, "flops": cost.total_flops}
        )  # fmt: skip
    if args.format == "json":
        print(json.dumps({"problems": rows}, indent=2))
    elif args.format == "csv":
        import csv
        import sys

        writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]) if rows else ["id"])
        writer.writeheader()
        writer.writerows(rows)
    else:
        print(f"{'id':<4} {'family':<16} {'src':<4} {'dtype':<6} {'bytes':>9} {'FLOPs':>9}  name")
        for r in rows:
            print(
                f"{r['id']:<4} {r['family']:<16} {r['source']:<4} {r['dtype']:<6} "
                f"{_human(r['bytes'], 'B'):>9} {_human(r['flops'], ''):>9}  {r['name']}"
            )
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["family"]] = counts.get(r["family"], 0) + 1
        print(f"{len(rows)} problems: " + ", ".join(f"{f} {n}" for f, n in counts.items()))
    _report_errors(catalog)
    return 0


def _report_errors(catalog: Catalog) -> None:
    import sys

    for err in catalog.errors:
        sys.stderr.write(f"warning: skipped {err}\n")


def _show(args: argparse.Namespace) -> int:
    from mkbsim.catalog import render_task

    catalog = _catalog()
    try:
        p = catalog.get(args.problem)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    cost = p.cost()
    print(f"{p.id}  {p.name}  [{p.family}, {p.source}]  {p.path}")
    print(f"workload {p.workload}   smoke {p.smoke}")
    flops = ", ".join(f"{c} {_human(n, 'FLOP')}" for c, n in cost.flops.items()) or "none"
    print(f"cost at workload: {_human(cost.bytes, 'B')} moved; {flops}")
    print()
    print(render_task(p, args.dsl))
    return 0


def _check(args: argparse.Namespace) -> int:
    from mkbsim.catalog import check_problem

    catalog = _catalog()
    selected = _select(catalog, args.problems)
    failed = 0
    for p in selected:
        result = check_problem(p)
        status = "ok  " if result.ok else "FAIL"
        print(f"{status} {p.id} {p.name:<60} {result.anchor_seconds * 1000:7.1f} ms")
        for f in result.failures:
            print(f"       - {f}")
        failed += not result.ok
    for err in catalog.errors:
        print(f"FAIL {err}")
    failed += len(catalog.errors)
    passed = len(selected) - min(failed, len(selected))
    print(f"{passed}/{len(selected)} problems pass; {len(catalog.errors)} failed to load")
    return 1 if failed else 0


def _export_fi(args: argparse.Namespace) -> int:
    from mkbsim.catalog._flashinfer import export_problem

    catalog = _catalog()
    try:
        problem = catalog.get(args.problem)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    text = json.dumps(export_problem(problem).to_dict(), indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0


def _import_fi(args: argparse.Namespace) -> int:
    from mkbsim.catalog._flashinfer import (
        FiFormatError,
        family_of,
        generic_inputs_ok,
        interface_differences,
        load_definitions,
        next_free_number,
        problem_module_source,
        workload_axes,
    )

    if not args.path.exists():
        raise UserError(f"{args.path}: no such file or directory")
    definitions, errors = load_definitions(args.path)
    if args.path.is_file() and errors:
        raise UserError(str(errors[0]))
    catalog = _catalog()
    by_name = {p.name: p for p in catalog}
    matched = written = 0
    number = next_free_number(args.out, args.start_id) if args.out else args.start_id
    for defn in definitions:
        problem = by_name.get(defn.name) or next(
            (p for p in catalog if p.name.startswith(defn.name + "_")), None
        )
        if problem is not None:
            matched += 1
            diffs = interface_differences(defn, problem)
            note = "interface matches" if not diffs else "differs: " + "; ".join(diffs)
            print(f"{defn.name:<58} = {problem.id} ({note})")
            continue
        reason = generic_inputs_ok(defn)
        if reason or not args.out:
            print(f"{defn.name:<58}   {'not written: ' + reason if reason else 'importable'}")
            continue
        wl_file = args.workloads / defn.op_type / f"{defn.name}.jsonl" if args.workloads else None
        seen = workload_axes(defn, wl_file)
        workload = {a: x.value if x.value is not None else seen.get(a, 256) for a, x in defn.axes.items()}
        smoke = {a: (v if defn.axes[a].type == "const" else min(v, 8)) for a, v in workload.items()}
        family = family_of(defn)
        target = args.out / family / f"{number:02d}_{defn.name.lower()}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            source = problem_module_source(defn, number=number, workload=workload, smoke=smoke, origin=str(args.path))
        except FiFormatError as exc:
            print(f"{defn.name:<58}   not written: {exc}")
            continue
        target.write_text(source)
        print(f"{defn.name:<58} → {target}")
        number += 1
        written += 1
    for err in errors:
        print(f"INVALID {err}")
    print(
        f"{len(definitions)} valid definitions ({matched} match catalogue problems, {written} modules written); "
        f"{len(errors)} invalid"
    )
    return 1 if errors else 0
