"""How far an honest kernel's fp8 output lies from the float64 anchor, in the element's own steps and against the
output's largest value: the evidence behind the verifier's allowance for one-byte float outputs (`_compare.py`).

    python3 benchmarks/fp8_output_errors.py FILE [FILE ...] --problem p56 --workload smoke --draws 20 [--device cuda]

For each solution file and each of ``--draws`` fresh inputs: the solution's output, the problem's own reference
(``native``) and the anchor (the reference on float64-promoted inputs), compared as the verifier compares them. Prints
one row per file: the worst |out - anchor| in steps of the anchor element (``eps · 2^floor(log2|anchor_i|)``); the
worst |out - anchor| / max|anchor| (a one-step flip of a large element: up to 1/16 of it); the same over the elements
off by more than 3 of their steps (what the verifier's ``FP8_SUM_PRECISION`` term covers); how many elements the
verifier's rule rejects, over all draws, and in how many draws. The reference's own row is the floor every honest
kernel can reach: its float32 sums differ from the anchor's only by summation order.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
from pathlib import Path
from typing import Any

import torch

from mkbsim.catalog import load_catalog
from mkbsim.verifier._compare import anchor_outputs, build_refs, compare


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"fp8_errors_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _profile(out: torch.Tensor, anchor: torch.Tensor) -> tuple[float, float, float]:
    """(worst error in the anchor element's own steps, worst error / max|anchor|, the worst error of an element off by
    more than 3 of its steps / max|anchor|: what the allowance's third term, 2^-12 · max|anchor|, must cover)."""
    got, anc = out.to(torch.float64).reshape(-1), anchor.to(torch.float64).reshape(-1)
    info = torch.finfo(out.dtype)
    _, exponent = torch.frexp(anc.abs().clamp_min(info.smallest_normal))
    step = torch.ldexp(torch.full_like(anc, info.eps), exponent - 1)
    err = (got - anc).abs()
    largest = anc.abs().max().clamp_min(info.tiny)
    past = err[err > 3 * step]
    return (float((err / step).max()), float(err.max() / largest),
            float(past.max() / largest) if past.numel() else 0.0)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--problem", default="p56")
    ap.add_argument("--workload", choices=("smoke", "production"), default="smoke")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    problem = load_catalog().get(a.problem)
    workload = problem.smoke if a.workload == "smoke" else problem.workload
    labels = list(problem.outputs)
    dtypes = [getattr(torch, spec[1]) for spec in problem.outputs.values()]
    modules = {path: _load(path) for path in a.files}
    rows: dict[str, list[tuple[float, float, float, int]]] = {"reference": []} | {p.name: [] for p in a.files}
    for _ in range(a.draws):
        inputs = problem.make_inputs(workload, seed=random.getrandbits(63), device=a.device)
        anchor = anchor_outputs(problem.reference, inputs, len(labels), (), promote=True)
        native = [problem.reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])]
        refs = build_refs(labels, native, anchor, dtypes, 3.0)
        outs = {"reference": native[0]}
        for path, module in modules.items():
            outs[path.name] = module.run(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        for name, out in outs.items():
            rows[name].append((*_profile(out, anchor[0]), compare(out, refs[0]).mismatches))
    print(f"{problem.id} {a.workload} · {a.draws} draws · {a.device} "
          f"{torch.cuda.get_device_name() if a.device == 'cuda' else ''}")  # fmt: skip
    print("| output of | worst steps | worst / max|anchor| | worst past 3 steps / max|anchor| "
          "| elements over the rule (all draws) | draws failed |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, got in rows.items():
        print(f"| {name} | {max(r[0] for r in got):.2f} | {max(r[1] for r in got):.2e} | {max(r[2] for r in got):.2e} "
              f"| {sum(r[3] for r in got)} | {sum(r[3] > 0 for r in got)} |")  # fmt: skip


if __name__ == "__main__":
    main()
