"""Every solution is a single, self-contained file (DESIGN §5: the verifier's worker sees no file beside it).

Solutions that share kernel code get it copied in by `python -m problems._bundle` (its drift test is
`test_bundles.py`); these tests fail when any solution imports a module beside it or touches `sys.path`,
and (slow) when a bundled solution does not import and build its kernels for sm_90a under the verifier's
runtime guards (they once refused `@dataclass`, whose methods the standard library generates with `exec`);
an ordinary run builds one file of each plan × DSL there, MKBSIM_ALL_SOLUTIONS=1 all (`solution_sample`).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from solution_sample import sampled

from problems import _bundle

ROOT = _bundle.ROOT
SOLUTIONS = sorted(ROOT.glob("problems/*/solutions/[0-9]*_*.py"))
# the attention solutions expose `_compiled()` (CuTe DSL) / `_shape_key` + `_build` (TIRx) to build without a GPU
ATTENTION_BUNDLED = [p for p in _bundle.solutions() if p.parent.parent.name == "attention"]


def imports_beside(path: Path) -> list[str]:
    """What ``path`` imports from its own folder, and any `sys.path` it touches."""
    found = []
    folders = (path.parent,)
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." if node.level else node.module or ""]
        elif isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
            found.append(f"line {node.lineno}: sys.path")
        for name in names:
            top = name.split(".")[0]
            if name == "." or any((f / f"{top}.py").exists() or (f / top).is_dir() for f in folders):
                found.append(f"line {node.lineno}: import of {name} beside the file")
    return sorted(found, key=lambda f: int(f.split(":")[0].split()[1]))


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_imports_nothing_beside_it(path: Path) -> None:
    assert imports_beside(path) == []


def test_the_one_file_check_flags_an_import_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text("SCALE = 2\n")
    planted = tmp_path / "01_plan_tirx.py"
    planted.write_text("import sys\nsys.path.insert(0, '.')\nfrom lib import used\n")
    assert imports_beside(planted) == ["line 2: sys.path", "line 3: import of lib beside the file"]


# A fork server, as the verifier's zygote is one: it imports torch and both DSLs once (most of a check's time
# on a loaded 2-core machine), then forks a fresh child a file that installs the guards, imports the file and
# builds its kernels, its output going to the log named in the request. It answers each request with the
# child's exit code.
GUARDED_COMPILER = """
import importlib.util, json, os, sys, traceback
os.environ["CUTE_DSL_ARCH"] = "sm_90a"  # no GPU to query here
import torch, tvm, cutlass.cute  # preloaded, as the verifier's zygote does
from mkbsim.catalog import load_problem, problems_root
from mkbsim.verifier._attribution import attribution_config
from mkbsim.verifier._control import ControlPage, map_control
from mkbsim.verifier._guards import Guards
from mkbsim.verifier._vault import Registry
from mkbsim.verifier._worker import HARNESS_DIR


def compile_guarded(path, dsl):
    (problem_path,) = problems_root().glob(f"*/{os.path.basename(path)[:2]}_*.py")
    problem = load_problem(problem_path)
    inputs = problem.make_inputs(problem.smoke, seed=0)
    control = ControlPage()  # the guards report their refusals to the verifier's control page
    guards = Guards(Registry(), attribution_config(HARNESS_DIR, path, []), dsl, map_control(os.dup(control.take_fd())))
    guards.install()
    guards.install_audit_hook()
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    built = module._compiled() if dsl == "cutedsl" else module._build(*module._shape_key(*inputs))
    violations = control.guard_records()[0]
    assert built is not None and not violations, violations
    print("clean")


for request in sys.stdin:
    path, dsl, log = json.loads(request)
    pid = os.fork()
    if pid == 0:
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(out, 2)
        code = 1
        try:
            compile_guarded(path, dsl)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class GuardedCompiler:
    """Client of one GUARDED_COMPILER process."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", GUARDED_COMPILER], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip

    def compile(self, path: Path, dsl: str, log: Path) -> tuple[int, str]:
        """(exit code, output) of a forked child that imports ``path`` under the guards and builds its kernels."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([str(path), dsl, str(log)]) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"the guarded compiler died (exit {self.process.wait()})"
        return int(answer), log.read_text()


@pytest.fixture(scope="module")
def guarded() -> Iterator[GuardedCompiler]:
    pytest.importorskip("cutlass")
    pytest.importorskip("tvm")
    compiler = GuardedCompiler()
    yield compiler
    assert compiler.process.stdin is not None
    compiler.process.stdin.close()
    compiler.process.wait(timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("path", sampled(ATTENTION_BUNDLED))
def test_bundled_solution_imports_and_compiles_under_the_verifier_guards(
    path: Path, guarded: GuardedCompiler, tmp_path: Path
) -> None:
    code, output = guarded.compile(path, path.stem.rsplit("_", 1)[1], tmp_path / "log")
    assert code == 0 and output.strip().endswith("clean"), output[-3000:]


@pytest.mark.slow
def test_the_guarded_import_accepts_a_dataclass_and_refuses_the_files_own_exec(
    guarded: GuardedCompiler, tmp_path: Path
) -> None:
    planted = tmp_path / "04_fused_tirx.py"
    planted.write_text("from dataclasses import dataclass\n\n\n@dataclass\nclass Tiling:\n    d: int\n\n\n"
                       "exec('x = 1')\n")  # fmt: skip
    code, output = guarded.compile(planted, "tirx", tmp_path / "log")
    # the dataclass (line 4) went through; the file's own exec (line 9) is what raised
    assert code != 0 and "line 9" in output, output
    assert "exec() is forbidden (dynamic code execution is forbidden)" in output, output
