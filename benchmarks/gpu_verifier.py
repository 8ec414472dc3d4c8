"""On the GPU machine: the verifier's medians against `triton.testing.do_bench` on the same kernels.

    python3 benchmarks/gpu_verifier.py --json OUT.json

For each CUDA example (CuTe DSL and TIRx kernels for p28 and p36, production shapes) it runs the
verifier under the paper and the hardened protocol, then times the same `run` in this process with
`triton.testing.do_bench` (L2 flushed between repetitions, median) on one draw of inputs, and
prints the ratios with the GPU, driver and library versions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
from pathlib import Path
from typing import Any

import torch

from mkbsim.catalog import load_catalog
from mkbsim.verifier import VerifierSession

ROOT = Path(__file__).resolve().parents[1]
CUDA_EXAMPLES = ROOT / "examples" / "submissions" / "cuda"
EXAMPLES = [
    ("p36_rmsnorm_cutedsl.py", "p36", "cutedsl"),
    ("p28_fused_add_rmsnorm_cutedsl.py", "p28", "cutedsl"),
    ("p36_rmsnorm_tirx_cuda.py", "p36", "tirx"),
    ("p28_fused_add_rmsnorm_tirx_cuda.py", "p28", "tirx"),
]


def do_bench_ms(path: Path, problem_id: str) -> float:
    """The example's `run` timed by triton's do_bench on one production draw."""
    import triton.testing

    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    problem = load_catalog().get(problem_id)
    inputs = problem.make_inputs(problem.workload, seed=random.getrandbits(63), device="cuda")
    module.run(*inputs)  # compile outside the measurement
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(lambda: module.run(*inputs), warmup=25, rep=200, return_mode="median"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every report and figure here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with VerifierSession("cuda") as session:
        for file, problem, dsl in EXAMPLES:
            path = CUDA_EXAMPLES / file
            paper = session.verify(path, problem, dsl, protocol="paper", workload="production")
            hardened = session.verify(path, problem, dsl, protocol="hardened", workload="production")
            bench = do_bench_ms(path, problem)
            row = {
                "example": file,
                "problem": problem,
                "dsl": dsl,
                "passed": paper.passed and hardened.passed,
                "paper_ms": paper.runtime_ms,
                "hardened_ms": hardened.runtime_ms,
                "eager_paper_ms": paper.eager_ms,
                "speedup_paper": paper.speedup,
                "do_bench_ms": bench,
                "paper_over_do_bench": paper.runtime_ms / bench if paper.runtime_ms else None,
                "hardened_over_do_bench": hardened.runtime_ms / bench if hardened.runtime_ms else None,
                "sol_fraction_paper": paper.details.get("sol", {}).get("fraction"),
                "verify_wall_s": paper.details["overhead"]["total_s"],
                "failure": paper.failure or hardened.failure,
                "feedback": paper.feedback if not paper.passed else hardened.feedback,
            }
            rows.append(row)
            print(json.dumps(row))
        env = session.env()
    print(f"\n{env.get('device')} · driver {env.get('driver')} · CUDA {env.get('cuda_runtime')} · {env['versions']}")
    head = ["example", "paper_ms", "hardened_ms", "do_bench_ms", "paper_over_do_bench", "hardened_over_do_bench",
            "eager_paper_ms", "speedup_paper", "sol_fraction_paper"]  # fmt: skip
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(f"{r[h]:.4g}" if isinstance(r[h], float) else str(r[h]) for h in head) + " |")
    if args.json:
        args.json.write_text(json.dumps({"env": env, "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
