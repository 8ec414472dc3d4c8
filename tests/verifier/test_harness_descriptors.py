"""The harness's descriptors (verifier README, "Guards" and "Known limits"): its channel to the verifier is refused to
every caller of a descriptor function, its memfds (the control page's, a block's arenas' until mapped) to the
submission's calls, while the harness's own code maps and reads them. One guarded process: the guards installed as
the worker installs them, with a channel and a memfd named as the harness names its own, then a submission's
functions called on them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SUBMISSION = """
import mmap
import os


def preads(fd):
    return os.pread(fd, 8, 0)


def maps(fd):
    return mmap.mmap(fd, 4096, prot=mmap.PROT_READ)[:8]


def dups(fd):
    return os.dup(fd)


def opens(fd):
    return open(fd, "rb", closefd=False).read(8)


def writes(fd):
    return os.write(fd, b"junk")
"""

GUARDED = """
import importlib.util, mmap, os, socket, sys
from mkbsim.verifier._attribution import attribution_config
from mkbsim.verifier._control import ControlPage, map_control
from mkbsim.verifier._guards import Guards
from mkbsim.verifier._vault import Registry
from mkbsim.verifier._worker import HARNESS_DIR

path = sys.argv[1]
control = ControlPage()
channel, _verifier = socket.socketpair()
arena = os.memfd_create("mkbsim-arena")
os.write(arena, bytes(4096))
config = attribution_config(HARNESS_DIR, path, [])
guards = Guards(Registry(), config, "tirx", map_control(os.dup(control.take_fd())), (channel.fileno(),))
guards.install()
guards.install_audit_hook()
spec = importlib.util.spec_from_file_location("submission", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
for name, fd in [(n, arena) for n in ("preads", "maps", "dups", "opens")] + [("writes", channel.fileno())]:
    try:
        getattr(module, name)(fd)
        print(name, "ran")
    except PermissionError:
        print(name, "refused")
print("harness maps", len(mmap.mmap(arena, 4096, prot=mmap.PROT_READ)), "reads", len(os.pread(arena, 8, 0)))
try:
    os.write(channel.fileno(), b"junk")
    print("harness writes ran")
except PermissionError:
    print("harness writes refused")
print("violations", len(control.guard_records()[0]))
"""


def test_the_harness_descriptors_are_refused_to_the_submission(tmp_path: Path) -> None:
    submission = tmp_path / "submission.py"
    submission.write_text(textwrap.dedent(SUBMISSION))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", GUARDED, str(submission)], cwd=root, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for name in ("preads", "maps", "dups", "opens", "writes"):
        assert f"{name} refused" in lines, done.stdout
    assert "harness maps 4096 reads 8" in lines, done.stdout  # its own memory, mapped by its own code
    assert "harness writes refused" in lines, done.stdout  # the channel: nobody's through these functions
    assert "violations 6" in lines, done.stdout
