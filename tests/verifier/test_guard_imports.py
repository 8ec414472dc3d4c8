"""Whose import a library's frame runs (DESIGN §5, verifier README step 2): C code importing under a library's frame
(numpy's lazy submodules, as ``tvm.runtime.Tensor.numpy`` runs them; since that method is refused to the
submission's code, the harness's own call of it stands for a library's, with no frame of the submission below) is
the library's, while ``__import__`` handed to a library (``tree_map``) is the submission's; C code importing under a
vault's frame (torch imports itself the first time an operator parses a Python scalar: ``clamp(t, min=<float>)``,
``where(mask, 1, 0.0)``, as the provenance audit's vault runs them inside an audited correctness draw) calls the
import hook, whose look at its caller is the guards' own, not a reach into the vault. One guarded process: the
guards installed as the worker installs them, a vault opened as the worker opens its vaults, then a submission file
imported and its functions called."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SUBMISSION = """
import torch.utils._pytree as pytree


def vault_operators(audit):
    return audit("draw")  # an operator the submission ran, whose audit runs in the vault


def hands_import_to_a_library():
    return pytree.tree_map(__import__, ["ctypes"])
"""

GUARDED = """
import importlib.util, os, sys
import torch, tvm, tvm.runtime
from mkbsim.verifier._attribution import attribution_config
from mkbsim.verifier._control import ControlPage, map_control
from mkbsim.verifier._guards import Guards
from mkbsim.verifier._vault import Registry
from mkbsim.verifier._worker import HARNESS_DIR


def operators_vault(clamp, where, gt, t, failure, text):
    reply = None
    while True:
        request = yield reply
        try:
            clamp(t, min=1e-30)  # the first parse of a Python float in this process: torch imports itself
            where(gt(t, 0.5), 1, 0.0)
            reply = "ran"
        except failure as exc:
            reply = text(exc)


path = sys.argv[1]
control = ControlPage()
registry = Registry()
guards = Guards(registry, attribution_config(HARNESS_DIR, path, []), "tirx", map_control(os.dup(control.take_fd())))
base = torch._C.TensorBase
audit = registry.open(
    operators_vault, base.clamp, torch._C._VariableFunctions.where, base.gt, torch.rand(4, 4), BaseException, repr
)
guards.install()
guards.install_audit_hook()
spec = importlib.util.spec_from_file_location("submission", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("vault_operators", module.vault_operators(audit))
print("violations", control.guard_records()[0])


def library_imports_through_c_code():
    return tvm.runtime.empty((4,), "float32").numpy().shape  # numpy's C code imports numpy._core._internal


module.library_imports_through_c_code = library_imports_through_c_code
for name in ("library_imports_through_c_code", "hands_import_to_a_library"):
    try:
        getattr(module, name)()
        print(name, "ran")
    except ImportError:
        print(name, "refused")
print("violations", len(control.guard_records()[0]))
"""


def test_c_code_imports_under_a_library_or_a_vault_and_a_handed_import_is_refused(tmp_path: Path) -> None:
    submission = tmp_path / "submission.py"
    submission.write_text(textwrap.dedent(SUBMISSION))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", GUARDED, str(submission)], cwd=root, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "vault_operators ran" in lines, done.stdout
    assert "violations []" in lines, done.stdout  # the vault's operators raised nothing against the submission
    assert "library_imports_through_c_code ran" in lines, done.stdout + done.stderr[-2000:]
    assert "hands_import_to_a_library refused" in lines, done.stdout
    assert "violations 1" in lines, done.stdout
