"""What the DSL gate costs per launch on a timed call (CPU): the p36 TIRx example's kernel launched in a
process that opened the worker's vaults and gates exactly as the worker does, against the same launches
in a process without them; and what an audited event costs beside the guards' audit hook (``id()``, ``sys._getframe``).

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
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
#: no gates; the gates on a scored timed call (the count only); the gates on an evidence call (timed, signed)
VARIANTS = ("bare", "guards", "evidence")


def _per_call(fn: Callable[[], object], calls: int = 20000) -> float:
    """CPU µs of the calling thread per call of ``fn`` (after a warm-up)."""
    for _ in range(100):
        fn()
    t0 = time.thread_time_ns()
    for _ in range(calls):
        fn()
    return (time.thread_time_ns() - t0) / calls / 1e3


def _at_depth(depth: int, fn: Callable[[], float]) -> float:
    """``fn()`` called ``depth`` Python frames below this one."""
    return fn() if depth == 0 else _at_depth(depth - 1, fn)


def measure(variant: str, rounds: int, launches: int) -> dict[str, float | str | None]:
    import torch

    from mkbsim.verifier._channel import Channel
    from mkbsim.verifier._control import ControlPage
    from mkbsim.verifier._worker import Worker

    torch.set_num_threads(1)
    control = ControlPage()
    setup = {
        "role": "candidate", "path": str(FILE), "dsl": "tirx", "device": "cpu", "sync": "stream",
        "off_limits": [], "inplace": [], "sample_positions": [], "output_numels": [],
    }  # fmt: skip
    pair = socket.socketpair()  # the guards only note the channel's socket: no message goes through it here
    chan = Channel(pair[0])
    worker = Worker(chan, setup, os.dup(control.take_fd()))
    if variant != "bare":
        worker.open_vaults()
    kernel = worker.import_file()._scale_rows
    x = torch.randn(64, 128).to(torch.bfloat16)
    inv, weight, out = torch.rand(64), torch.randn(128).to(torch.bfloat16), torch.empty(64, 128, dtype=torch.bfloat16)
    per_launch: list[float] = []
    for _ in range(rounds):
        control.begin_call(suppress=False, audit=False, evidence=variant == "evidence")
        t0 = time.thread_time_ns()
        for _ in range(launches):
            kernel(x, inv, weight, out)
        per_launch.append((time.thread_time_ns() - t0) / launches / 1e3)
    return {
        "variant": variant,
        "id_cpu_us": _per_call(lambda: id(x)),  # an audited event the guards' hook turns away at once
        "getframe_cpu_us": _per_call(lambda: sys._getframe(0)),  # one the hook sends to the guards' vault
        # the vault walks the frame's callers for a vault's code: the cost grows with the stack's depth
        "getframe_depth30_cpu_us": _at_depth(30, lambda: _per_call(lambda: sys._getframe(0), 2000)),
        "launch_cpu_us_min": min(per_launch),
        "launch_cpu_us_median": statistics.median(per_launch),
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
