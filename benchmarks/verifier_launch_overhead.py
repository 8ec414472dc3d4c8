"""What the DSL gate costs per launch on a timed call (CPU): the p36 TIRx example's kernel launched in a
process that opened the worker's vaults and gates exactly as the worker does, against the same launches
in a process without them; and the gate vault's END of a call (DESIGN §5, "audits cannot be told apart").

    python benchmarks/verifier_launch_overhead.py            # all three rows (bare, guards: a scored call,
                                                             # evidence: an evidence call), JSON lines
    python benchmarks/verifier_launch_overhead.py --variant guards --rounds 7 --launches 500

Each variant runs in a fresh process (an audit hook cannot be removed). CPU time of the calling thread,
per launch, over ``--launches`` launches; the least and the median of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
#: no gates; the gates on a scored timed call (the count only); the gates on an evidence call (timed, signed)
VARIANTS = ("bare", "guards", "evidence")


def measure(variant: str, rounds: int, launches: int) -> dict[str, float | str | None]:
    import torch

    from mkbsim.verifier._control import ControlPage
    from mkbsim.verifier._worker import Worker

    torch.set_num_threads(1)
    control = ControlPage()
    setup = {
        "role": "candidate", "path": str(FILE), "dsl": "tirx", "device": "cpu", "sync": "stream",
        "off_limits": [], "inplace": [], "sample_positions": [], "output_numels": [],
    }  # fmt: skip
    worker = Worker(None, setup, os.dup(control.take_fd()))  # type: ignore[arg-type]
    if variant != "bare":
        worker.open_vaults()
    kernel = worker.import_file()._scale_rows
    x = torch.randn(64, 128).to(torch.bfloat16)
    inv, weight, out = torch.rand(64), torch.randn(128).to(torch.bfloat16), torch.empty(64, 128, dtype=torch.bfloat16)
    per_launch: list[float] = []
    end_us: float | None = None
    for _ in range(rounds):
        control.begin_call(suppress=False, audit=False, evidence=variant == "evidence")
        t0 = time.thread_time_ns()
        for _ in range(launches):
            kernel(x, inv, weight, out)
        per_launch.append((time.thread_time_ns() - t0) / launches / 1e3)
        report_end = getattr(worker, "report_end", None)  # absent before the gate timed launches
        if report_end is not None:
            t1 = time.thread_time_ns()
            report_end()
            end_us = (time.thread_time_ns() - t1) / 1e3
    return {
        "variant": variant,
        "launch_cpu_us_min": min(per_launch),
        "launch_cpu_us_median": statistics.median(per_launch),
        "end_of_call_cpu_us": end_us,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", choices=VARIANTS)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--launches", type=int, default=500)
    args = ap.parse_args()
    if args.variant:
        print(json.dumps(measure(args.variant, args.rounds, args.launches)))
        return
    for variant in VARIANTS:
        cmd = [sys.executable, __file__, "--variant", variant, "--rounds", str(args.rounds)]
        cmd += ["--launches", str(args.launches)]
        print(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
