"""What the verifier's check for processes a submission left running costs per answer (DESIGN §5, background
work): one ``strays`` request to the zygote, which lists the live worker's descendants and its own orphans
from /proc. Run: ``python benchmarks/stray_check.py [N]`` (prints the median and max round trip, and the sandbox)."""

from __future__ import annotations

import statistics
import sys
import time

from mkbsim.verifier import VerifierSession


def main(repeats: int) -> None:
    with VerifierSession("cpu") as session:
        zygote = session.zygote()
        worker = zygote.spawn()
        took = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            worker.strays()
            took.append((time.perf_counter() - t0) * 1e3)
        worker.close()
    print(f"strays round trip: median {statistics.median(took):.2f} ms, max {max(took):.2f} ms over {repeats} "
          f"(sandbox: {zygote.sandbox})")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
