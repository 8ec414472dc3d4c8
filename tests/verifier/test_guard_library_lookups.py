"""A library's search for a shared library through ``ctypes.util.find_library`` (which probes ldconfig, gcc, ld
and objdump as processes) is declined, not blamed on the submission: cuda.pathfinder searches for libdl that way
inside a TIRx build for cuda, and on the H200 those probes made every TIRx file fail ``forbidden_api``
(2026-12-02). The submission's own call of find_library, or one it hands a library, stays refused and recorded.
One guarded process, as tests/verifier/test_guard_imports.py runs one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SUBMISSION = """
import torch.utils._pytree as pytree
from cuda.pathfinder._dynamic_libs import load_dl_linux


def library_looks_up_libdl():
    return load_dl_linux._load_libdl() is not None  # calls ctypes.util.find_library("dl") itself


def looks_up_libdl_itself():
    return load_dl_linux.ctypes.util.find_library("dl")


def hands_the_lookup_to_a_library():
    return pytree.tree_map(load_dl_linux.ctypes.util.find_library, ["dl"])
"""

GUARDED = """
import importlib.util, os, sys
import torch
from mkbsim.verifier._attribution import attribution_config
from mkbsim.verifier._control import ControlPage, map_control
from mkbsim.verifier._guards import Guards
from mkbsim.verifier._vault import Registry
from mkbsim.verifier._worker import HARNESS_DIR

path = sys.argv[1]
control = ControlPage()
config = attribution_config(HARNESS_DIR, path, [])
guards = Guards(Registry(), config, "cutedsl", map_control(os.dup(control.take_fd())))
guards.install()
guards.install_audit_hook()
spec = importlib.util.spec_from_file_location("submission", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
for name in ("library_looks_up_libdl", "looks_up_libdl_itself", "hands_the_lookup_to_a_library"):
    before = len(control.guard_records()[0])
    try:
        getattr(module, name)()
    except OSError as exc:
        print(name, "raised", exc)
    print(name, "blamed" if len(control.guard_records()[0]) > before else "not blamed")
"""


def test_a_librarys_lookup_is_declined_and_the_submissions_is_refused(tmp_path: Path) -> None:
    submission = tmp_path / "submission.py"
    submission.write_text(textwrap.dedent(SUBMISSION))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", GUARDED, str(submission)], cwd=root, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "library_looks_up_libdl not blamed" in lines, done.stdout + done.stderr[-2000:]
    assert "looks_up_libdl_itself blamed" in lines, done.stdout
    assert "hands_the_lookup_to_a_library blamed" in lines, done.stdout
