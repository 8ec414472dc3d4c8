"""What emptying the sandbox's /tmp and /dev/shm between workers costs a worker's spawn (DESIGN §4, §5).

Spawns and closes workers of one sandboxed zygote (preload: torch), with the wipe on and with it off, and prints
the median ``Zygote.spawn`` time of each (the first spawn, which follows no finished worker, left out). The
workers import nothing, so they leave nothing: this is the cost an honest worker pays. Run from the repository
root: ``.venv/bin/python benchmarks/verifier_tmp_wipe.py``.
"""

from __future__ import annotations

import statistics
import time
from unittest import mock

from mkbsim.verifier import _sandboxing
from mkbsim.verifier._process import Zygote

SPAWNS = 8


def main() -> None:
    for label, name in (("wipe on", _sandboxing.OWN_TMP_ENV), ("wipe off", "MKBSIM_BENCHMARK_UNUSED")):
        with mock.patch.object(_sandboxing, "OWN_TMP_ENV", name):  # the zygote is told under another name: off
            zygote = Zygote(["torch"], 1, "cpu", sandbox=True)
        try:
            times = []
            for _ in range(SPAWNS):
                t0 = time.perf_counter()
                worker = zygote.spawn()
                times.append((time.perf_counter() - t0) * 1e3)
                worker.close()
            print(f"{label}: spawn median {statistics.median(times[1:]):.1f} ms {[round(t, 1) for t in times[1:]]}")
        finally:
            zygote.close()


if __name__ == "__main__":
    main()
