"""Verifier slots on a multi-GPU machine: throughput of one slot against one per GPU, for local slot
processes (``VerifierSlots``) and Ray verifier actors (``RayVerifiers``), in one run.

    python3 benchmarks/gpu_slots.py [--requests 12] [--out DIR]

Each configuration starts its slots (each a warm verifier session: the zygote's DSL imports), waits until
every slot has verified once (so start-up is reported apart), then verifies ``--requests`` real solution
kernels submitted from as many threads at once. Reports start-up, the timed wall, verifications per
minute, and which GPU measured each one (``env.gpu_uuid``). Writes ``gpu_slots.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mkbsim.agents import RayVerifiers, ScoringSlots, VerifierSlots, limit_scoring
from mkbsim.agents._scoring import ScorerFactory
from mkbsim.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1] / "problems"
KERNELS = [
    ("mlp_norm/solutions/36_fused_cutedsl.py", "p36", "cutedsl"),
    ("mlp_norm/solutions/36_fused_tirx.py", "p36", "tirx"),
    ("mlp_norm/solutions/28_fused_cutedsl.py", "p28", "cutedsl"),
    ("kv_cache/solutions/21_fused_tirx.py", "p21", "tirx"),
]


def _verify_all(factory: ScorerFactory, indices: list[int], tag: str) -> list[dict[str, Any]]:
    catalog = load_catalog()

    def one(index: int) -> dict[str, Any]:
        file, problem, dsl = KERNELS[index % len(KERNELS)]
        verdict = factory(catalog.get(problem), dsl).score(ROOT / file, attempt_id=f"{tag}-{index}", submission="final")
        payload = verdict.payload
        return {"file": file, "passed": verdict.passed, "gpu": payload["env"].get("gpu_uuid"),
                "runtime_ms": payload["runtime_ms"], "total_s": payload["details"]["overhead"]["total_s"],
                "failure": payload["failure"]}  # fmt: skip

    with ThreadPoolExecutor(max(1, len(indices))) as pool:
        return list(pool.map(one, indices))


def _measure(kind: str, slots: int, requests: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    if kind == "local":
        owner: Any = VerifierSlots("cuda", "paper", slots)
        factory: ScorerFactory = limit_scoring(owner, ScoringSlots(slots))
    else:
        owner = factory = RayVerifiers("cuda", "paper", slots)
    try:
        _verify_all(factory, list(range(slots)), f"{kind}{slots}-warm")  # every slot started and used once
        startup = time.perf_counter() - t0
        t1 = time.perf_counter()
        rows = _verify_all(factory, list(range(requests)), f"{kind}{slots}")
        wall = time.perf_counter() - t1
    finally:
        owner.close()
    return {"executor": kind, "slots": slots, "startup_s": startup, "wall_s": wall, "requests": requests,
            "per_minute": 60 * requests / wall, "passed": sum(r["passed"] for r in rows),
            "gpus_used": sorted({str(r["gpu"]) for r in rows}), "rows": rows}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=12)
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    import ray
    import torch

    gpus = torch.cuda.device_count()
    if gpus < 1:
        raise SystemExit("gpu_slots.py: no CUDA GPU here")
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, configure_logging=False)
    results = []
    for kind in ("local", "ray"):
        for slots in sorted({1, gpus}):
            result = _measure(kind, slots, args.requests)
            results.append(result)
            print(f"{kind:5} slots={slots}: start-up {result['startup_s']:.1f} s · {args.requests} verifications in "
                  f"{result['wall_s']:.1f} s ({result['per_minute']:.1f}/min) · passed {result['passed']} · "
                  f"GPUs used {len(result['gpus_used'])}", flush=True)  # fmt: skip
    ray.shutdown()
    header = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(), "gpus": gpus,
              "device": torch.cuda.get_device_name(0) if gpus else None, "python": platform.python_version(),
              "torch": torch.__version__, "ray": ray.__version__}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_slots.json").write_text(json.dumps({"machine": header, "results": results}, indent=1))
    print(json.dumps(header))


if __name__ == "__main__":
    main()
