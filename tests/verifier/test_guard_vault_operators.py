"""A vault may run ordinary torch operators (DESIGN §5): where one's C code calls a guarded hook (torch imports
itself the first time an operator parses a Python scalar, calling ``__import__``), the hook's look at its caller
(the vault's frame) is the guards' own, not a reach into the vault blamed on the submission. One guarded process,
set up as the worker sets it up, whose vault runs ``clamp(t, min=<float>)`` and ``where(mask, 1, 0.0)`` at the
submission's request, as the provenance audit's vault runs operators inside an audited correctness draw."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SUBMISSION = """
def draw(audit):
    return audit("draw")  # an operator the submission ran, whose audit runs in the vault
"""

GUARDED = """
import importlib.util, os, sys
import torch, tvm
from mkbsim.verifier._attribution import attribution_config
from mkbsim.verifier._control import ControlPage, map_control
from mkbsim.verifier._guards import Guards
from mkbsim.verifier._vault import Registry
from mkbsim.verifier._worker import HARNESS_DIR


def operators_vault(clamp, where, gt, t):
    reply = None
    while True:
        request = yield reply
        try:
            clamp(t, min=1e-30)  # the first parse of a Python float in this process: torch imports itself
            where(gt(t, 0.5), 1, 0.0)
            reply = "ran"
        except BaseException as exc:
            reply = repr(exc)


path = sys.argv[1]
control = ControlPage()
registry = Registry()
guards = Guards(registry, attribution_config(HARNESS_DIR, path, []), "tirx", map_control(os.dup(control.take_fd())))
base = torch._C.TensorBase
audit = registry.open(operators_vault, base.clamp, torch._C._VariableFunctions.where, base.gt, torch.rand(4, 4))
guards.install()
guards.install_audit_hook()
spec = importlib.util.spec_from_file_location("submission", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("vault", module.draw(audit))
print("violations", control.guard_records()[0])
"""


def test_a_vault_operator_whose_c_code_imports_is_no_violation(tmp_path: Path) -> None:
    submission = tmp_path / "submission.py"
    submission.write_text(textwrap.dedent(SUBMISSION))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", GUARDED, str(submission)], cwd=root, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "vault ran" in lines, done.stdout
    assert "violations []" in lines, done.stdout
