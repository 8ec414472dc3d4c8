"""Solutions rendered from shared templates by `benchmarks/gen_solutions.py` are single, self-contained files.

DESIGN §5: a submission is one Python file, and the verifier's worker sees no file beside it. The
attention prefill/MLA solutions share templates (`problems/attention/solutions/_templates/`); these tests
fail when a generated file drifts from its templates, when any solution imports a module beside it, and
(slow) when a generated file does not import and compile for sm_90a under the verifier's runtime guards
(the guards refused `@dataclass`, whose methods are generated with dynamic code, on the H200).
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_solutions", ROOT / "benchmarks" / "gen_solutions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


GEN = _gen()
GENERATED = [GEN.target(e) for e in GEN.entries()]
SOLUTIONS = sorted(ROOT.glob("problems/*/solutions/*.py"))


def test_generated_files_match_their_templates() -> None:
    assert GENERATED, "no template entries found"
    assert GEN.stale() == [], "run: .venv/bin/python benchmarks/gen_solutions.py"


def _copy_tree(tmp_path: Path) -> Path:
    src = ROOT / "problems" / "attention" / "solutions"
    dst = tmp_path / "problems" / "attention" / "solutions"
    shutil.copytree(src / "_templates", dst / "_templates", ignore=shutil.ignore_patterns("__pycache__"))
    for path in GENERATED:
        shutil.copy(path, dst / path.name)
    return tmp_path


def test_the_check_names_a_hand_edited_file_and_an_orphan(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    assert GEN.stale(root) == []
    edited = root / "problems" / "attention" / "solutions" / "04_fused_tirx.py"
    edited.write_text(edited.read_text().replace("BN = 64", "BN = 32"))
    (root / "problems" / "attention" / "solutions" / "_templates" / "05_fused_tirx.py").unlink()
    assert GEN.stale(root) == [
        "problems/attention/solutions/04_fused_tirx.py differs from what "
        "problems/attention/solutions/_templates/04_fused_tirx.py renders",
        "problems/attention/solutions/05_fused_tirx.py is generated but its entry is gone",
    ]


def _templates(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "problems" / "fam" / "solutions" / "_templates"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


LIB = '''
    """A template module."""

    import math
    import os

    SCALE = 2


    def used(x):
        return helper(x) * SCALE


    def helper(x):
        return math.floor(x)


    def unused(x):
        return os.getcwd()
'''
ENTRY = '''
    """p01 entry."""

    from lib import used


    def run(x):
        return used(x)
'''


def test_rendering_inlines_what_the_entry_reaches_and_nothing_else(tmp_path: Path) -> None:
    folder = _templates(tmp_path, {"lib.py": LIB, "01_plan_tirx.py": ENTRY})
    text = GEN.render(folder / "01_plan_tirx.py", tmp_path)
    assert text.startswith('"""p01 entry."""\n\n' + GEN.GENERATED_MARK)
    assert "def used" in text and "def helper" in text and "SCALE = 2" in text
    assert "def unused" not in text and "import os" not in text and "from lib" not in text
    namespace: dict[str, object] = {}
    exec(compile(text, "rendered.py", "exec"), namespace)
    assert namespace["run"](3.7) == 6  # type: ignore[operator]


def test_rendering_refuses_a_name_bound_in_two_parts(tmp_path: Path) -> None:
    entry = ENTRY + "\n\n    SCALE = 3\n"
    folder = _templates(tmp_path, {"lib.py": LIB, "01_plan_tirx.py": entry})
    with pytest.raises(GEN.TemplateError, match=r"SCALE is bound both in lib\.py and in 01_plan_tirx\.py"):
        GEN.render(folder / "01_plan_tirx.py", tmp_path)


def test_rendering_refuses_a_template_imported_as_a_module(tmp_path: Path) -> None:
    entry = ENTRY.replace("from lib import used", "import lib").replace("used(x)", "lib.used(x)")
    folder = _templates(tmp_path, {"lib.py": LIB, "01_plan_tirx.py": entry})
    with pytest.raises(GEN.TemplateError, match="import names from a template module"):
        GEN.render(folder / "01_plan_tirx.py", tmp_path)


def imports_beside(path: Path) -> list[str]:
    """What ``path`` imports from its own folder (or its `_templates/`), and any `sys.path` it touches."""
    found = []
    folders = (path.parent, path.parent / GEN.TEMPLATES)
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


def test_the_one_file_check_flags_a_template_import(tmp_path: Path) -> None:
    folder = _templates(tmp_path, {"lib.py": LIB})
    planted = folder.parent / "01_plan_tirx.py"
    planted.write_text("import sys\nsys.path.insert(0, '.')\nfrom lib import used\n")
    assert imports_beside(planted) == ["line 2: sys.path", "line 3: import of lib beside the file"]


GUARDED_COMPILE = """
import importlib.util, os, sys
path, dsl = sys.argv[1], sys.argv[2]
os.environ["CUTE_DSL_ARCH"] = "sm_90a"  # no GPU to query here
import torch, tvm, cutlass.cute  # preloaded, as the verifier's zygote does
from mkbsim.catalog import load_problem, problems_root
from mkbsim.verifier._guards import Guard
from mkbsim.verifier._worker import HARNESS_DIR
(problem_path,) = problems_root().glob(f"*/{os.path.basename(path)[:2]}_*.py")
problem = load_problem(problem_path)
inputs = problem.make_inputs(problem.smoke, seed=0)
guard = Guard(path, dsl, HARNESS_DIR, [])
guard.install()
spec = importlib.util.spec_from_file_location("submission", path)
module = importlib.util.module_from_spec(spec)
sys.modules["submission"] = module
spec.loader.exec_module(module)
built = module._compiled() if dsl == "cutedsl" else module._build(*module._shape_key(*inputs))
assert built is not None and not guard.violations, guard.violations
print("clean")
"""


def _guarded_compile(path: Path, dsl: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("cutlass")
    pytest.importorskip("tvm")
    command = [sys.executable, "-c", GUARDED_COMPILE, str(path), dsl]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.stem)
def test_generated_solution_imports_and_compiles_under_the_verifier_guards(path: Path) -> None:
    done = _guarded_compile(path, path.stem.rsplit("_", 1)[1])
    assert done.returncode == 0 and done.stdout.strip().endswith("clean"), done.stderr[-3000:]


@pytest.mark.slow
def test_the_guarded_import_refuses_a_dataclass(tmp_path: Path) -> None:
    planted = tmp_path / "04_fused_tirx.py"
    planted.write_text("from dataclasses import dataclass\n\n\n@dataclass\nclass Tiling:\n    d: int\n")
    done = _guarded_compile(planted, "tirx")
    assert done.returncode != 0 and "dynamic code execution is forbidden" in done.stderr
