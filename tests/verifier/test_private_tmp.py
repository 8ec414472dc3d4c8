"""No worker sees what an earlier worker of the same zygote left in the sandbox's /tmp or /dev/shm (DESIGN §4,
§5: no worker reads another's files), even files it made readable by all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mkbsim.sandbox import probe
from mkbsim.verifier._control import ControlPage
from mkbsim.verifier._process import WorkerHandle, Zygote

pytestmark = pytest.mark.skipif(not probe().ok, reason="bubblewrap cannot run here")

LEFT = [
    "/tmp/left_by_a",
    "/dev/shm/left_by_a",
    "/tmp/open_folder_by_a/inside",
    "/tmp/closed_folder_by_a",
    "/tmp/deep_by_a",
]
WRITER = """
import os
os.umask(0)
for path in ("/tmp/left_by_a", "/dev/shm/left_by_a"):
    with open(path, "w") as f:
        f.write("from A")
os.makedirs("/tmp/open_folder_by_a/inside", mode=0o777)
os.makedirs("/tmp/closed_folder_by_a/deeper")
os.chmod("/tmp/closed_folder_by_a", 0)
here = os.getcwd()
os.mkdir("/tmp/deep_by_a")
os.chdir("/tmp/deep_by_a")
for _ in range(1500):  # deeper than a recursive removal goes
    os.mkdir("d")
    os.chdir("d")
with open("file", "w") as f:
    f.write("from A")
os.chdir(here)
"""
READER = f"""
import json, os
with open("seen.json", "w") as f:
    json.dump([p for p in {LEFT!r} if os.path.lexists(p)], f)
"""


def _imported(zygote: Zygote, code: str) -> WorkerHandle:
    """A new worker that has imported ``code`` (as a reference worker: no guard between it and /tmp)."""
    worker = zygote.spawn()
    script = Path(worker.workdir) / "script.py"
    script.write_text(code + "\n\ndef reference(*inputs):\n    return inputs\n")
    zygote.box.hand_over(script, worker.uid)  # type: ignore[union-attr]
    control = ControlPage()
    setup = {"role": "reference", "path": str(script), "sys_path": [], "dsl": "tirx", "device": "cpu",
             "sync": "stream", "cache_flush": False, "memory_bytes": 2 << 30, "file_size_bytes": 1 << 20,
             "cpu_threads": 1, "off_limits": [], "workdir": worker.workdir, "inplace": [],
             "sample_positions": [], "output_numels": []}  # fmt: skip
    worker.chan.send(setup, [control.take_fd()])
    try:
        reply = worker.wait(120)
    finally:
        control.close()
    assert reply.get("ok"), reply
    return worker


def test_a_later_worker_sees_nothing_an_earlier_one_left_in_tmp() -> None:
    zygote = Zygote([], 1, "cpu", sandbox=True)
    try:
        writer = _imported(zygote, WRITER)
        writer.close()
        reader = _imported(zygote, READER)
        seen = json.loads((Path(reader.workdir) / "seen.json").read_text())
        reader.close()
        assert seen == []
        # what the zygote held in /tmp before any worker ran (the session's folder) is kept
        assert os.path.isdir(zygote.box.root)  # type: ignore[union-attr]
    finally:
        zygote.close()


def test_a_worker_still_sees_its_own_tmp_files() -> None:
    zygote = Zygote([], 1, "cpu", sandbox=True)
    try:
        worker = _imported(zygote, WRITER + READER)
        seen = json.loads((Path(worker.workdir) / "seen.json").read_text())
        worker.close()
        assert seen == LEFT  # the reader's check works: the test above can fail
    finally:
        zygote.close()
