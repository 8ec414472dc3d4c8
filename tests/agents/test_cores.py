"""Cores held across processes: attempts running at once on a machine get cores no other holds while
there are enough, share the rest, and a holder that dies frees its cores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mkbsim.agents._cores import NodeCores

CORES = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(CORES) < 2, reason="needs two cores")


@needs_two
def test_holders_at_once_get_different_cores_and_share_when_short(tmp_path: Path) -> None:
    cores = NodeCores(tmp_path)
    with cores.hold(1) as first, cores.hold(1) as second:
        assert first == (CORES[0],) and second == (CORES[1],)
        with cores.hold(len(CORES)) as rest:  # the free ones first, then the held ones shared
            assert rest == (*CORES[2:], *CORES[:2])
    with cores.hold(2) as again:  # released when the blocks ended
        assert again == tuple(CORES[:2])


@needs_two
def test_a_holder_killed_frees_its_cores(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom pathlib import Path\nfrom mkbsim.agents._cores import NodeCores\n"
         f"with NodeCores(Path({str(tmp_path)!r})).hold(1) as c:\n    print(c[0], flush=True)\n    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        taken = int(holder.stdout.readline())
        with NodeCores(tmp_path).hold(1) as mine:
            assert mine != (taken,)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        with NodeCores(tmp_path).hold(len(CORES)) as everything:
            assert everything == tuple(CORES)  # every core free again: none is listed as shared
    finally:
        holder.kill()
        holder.wait()


def test_a_folder_that_cannot_hold_locks_shares_every_core(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # the lock folder's place is taken by a file: no lock can be made there
    with NodeCores(blocked).hold(1) as first, NodeCores(blocked).hold(1) as second:
        assert first == second == (CORES[0],)  # nothing held: both share the first core
