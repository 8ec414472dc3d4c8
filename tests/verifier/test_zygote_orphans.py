"""Nothing a worker starts outlives it: the zygote is a child subreaper and kills the orphans it inherits
(a submission's detached process waited, in the workers' uid and namespaces, for the next reference)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from mkbsim.verifier import _zygote
    subreaper = sys.argv[1] == "1"
    if subreaper:
        assert _zygote._become_subreaper()
    # a new session whose parent exits at once: the sleeper is an orphan
    out = subprocess.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    sleeper = int(out.stdout)
    time.sleep(0.2)
    _zygote._kill_orphans(set())
    time.sleep(0.1)
    try:
        with open(f"/proc/{sleeper}/stat") as f:
            alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        alive = False
    if alive:
        os.kill(sleeper, 9)
    print("alive" if alive else "gone")
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")
@pytest.mark.parametrize(("subreaper", "expected"), [(True, "gone"), (False, "alive")], ids=["subreaper", "plain"])
def test_a_detached_process_dies_with_its_worker(subreaper: bool, expected: str) -> None:
    # without the subreaper the orphan goes to init and survives: the test can fail
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", SCRIPT, "1" if subreaper else "0"], capture_output=True, text=True,
                         env=env, timeout=60)  # fmt: skip
    assert out.stdout.strip() == expected, out.stderr
