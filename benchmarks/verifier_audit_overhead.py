"""What the provenance audit costs per correctness draw (CPU): the p36 TIRx example's run() called as the
worker calls it on an audited draw (the inputs reported, the provenance mode pushed, the result reported to
the vault), in a process that opened the worker's vaults and gates exactly as the worker does (DESIGN §5,
the bypass test as coverage). Audited draws are never timed, so this is the price of verifying, not of a
score.

    python benchmarks/verifier_audit_overhead.py --rounds 7 --calls 20
    PYTHONPATH=/path/to/another/checkout python benchmarks/verifier_audit_overhead.py   # side by side

CPU time of the calling thread per call: the least and the median of ``--rounds`` rounds, with and without
the audit (``audit=False``: the timed calls' path) in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
ROWS, HIDDEN = 64, 128


def measure(rounds: int, calls: int) -> dict[str, float | str]:
    import torch

    from mkbsim.verifier import _worker
    from mkbsim.verifier._channel import Channel
    from mkbsim.verifier._control import ControlPage
    from mkbsim.verifier._worker import Worker

    torch.set_num_threads(1)
    control = ControlPage()
    positions = sorted(random.Random(0).sample(range(ROWS * HIDDEN), 512))
    setup = {
        "role": "candidate", "path": str(FILE), "dsl": "tirx", "device": "cpu", "sync": "stream",
        "off_limits": [], "inplace": [], "sample_positions": [positions], "output_numels": [ROWS * HIDDEN],
    }  # fmt: skip
    pair = socket.socketpair()  # the guards only note the channel's socket: no message goes through it here
    worker = Worker(Channel(pair[0]), setup, os.dup(control.take_fd()))
    worker.open_vaults()
    run = worker.import_file().run
    hooks = worker.audit_hooks
    x, weight = torch.randn(ROWS, HIDDEN).to(torch.bfloat16), torch.randn(HIDDEN).to(torch.bfloat16)
    found: dict[str, list[float]] = {"audited": [], "timed_path": []}
    for _ in range(rounds):
        for kind in found:
            audit = kind == "audited"
            t0 = time.thread_time_ns()
            for _ in range(calls):
                control.begin_call(suppress=False, audit=audit)
                if audit:
                    hooks["_report_inputs"]([x, weight], ())
                    _worker._push_mode(hooks["_mode"])
                try:
                    out = run(x, weight)
                finally:
                    if audit:
                        _worker._pop_mode(None)
                if audit:
                    hooks["_report_result"]([out])
                hooks["_report_end"]()
            found[kind].append((time.thread_time_ns() - t0) / calls / 1e6)
    result: dict[str, float | str] = {"tree": str(Path(_worker.__file__).resolve().parents[2])}
    for kind, values in found.items():
        result[f"{kind}_cpu_ms_min"] = round(min(values), 4)
        result[f"{kind}_cpu_ms_median"] = round(statistics.median(values), 4)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    print(json.dumps(measure(args.rounds, args.calls)))


if __name__ == "__main__":
    main()
