"""Solutions that bundle shared kernel modules (problems/_bundle.py) stay verifiable single files.

- Every bundle is current: regenerating it from the source modules changes nothing (edit a shared
  module, forget `python -m problems._bundle`, and this fails).
- No solution file imports `problems` or trips another static rule of `mkbsim verify` (DESIGN §5).
- A bundled namespace carries every top-level name of its module, bound to the bundled definition.
- The bundler refuses a module whose token renaming would be unsafe.
- Slow: each bundled TIRx full plan gets through `mkbsim verify` on CPU as far as a GPU-less machine allows
  (an ordinary run: one plan of each family; MKBSIM_ALL_SOLUTIONS=1: every plan; `solution_sample`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from solution_sample import sampled

from mkbsim.verifier import VerifierSession
from mkbsim.verifier._static import scan_source
from problems import _bundle

SOLUTIONS = sorted(Path(_bundle.ROOT, "problems").glob("*/solutions/[0-9]*_*.py"))
BUNDLED = _bundle.solutions()


def test_some_solutions_bundle_shared_modules() -> None:
    assert len(BUNDLED) >= 14


@pytest.mark.slow
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundle_is_current(path: Path) -> None:
    text = path.read_text()
    assert _bundle.render(text) == text, f"stale bundle: run python -m problems._bundle ({path.name})"


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_passes_the_static_rules(path: Path) -> None:
    dsl = "cutedsl" if path.stem.endswith("cutedsl") else "tirx"
    report = scan_source(path.read_text(), dsl, path.name)
    assert report.syntax_error is None
    assert not report.findings, [f.text() for f in report.findings]


def test_bundled_namespace_mirrors_the_module() -> None:
    path = next(p for p in BUNDLED if p.name.startswith("53_") and p.stem.endswith("tirx"))
    namespace: dict[str, object] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # the solution file under test
    import problems._wgmma_tirx as module

    bundled = namespace["W"]
    for name in ("mainloop", "raster", "act_quant", "THREADS", "DESC_SW128"):
        assert hasattr(bundled, name) and hasattr(module, name)
    assert bundled.DESC_SW128 == module.DESC_SW128  # type: ignore[attr-defined]
    assert bundled.raster.__name__ == "_W_raster"  # type: ignore[attr-defined]


def test_bundler_refuses_a_top_level_name_used_as_a_keyword(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = tmp_path / "helper.py"
    helper.write_text("SIZE = 4\n\n\ndef f(size=1):\n    return size\n\n\nX = f(SIZE=2)\n")
    monkeypatch.setattr(_bundle, "ROOT", tmp_path)
    with pytest.raises(_bundle.BundleError, match="keyword"):
        _bundle.module_code("helper.py", "H", {})


def test_a_bundled_module_uses_names_imported_from_one_bundled_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`from problems.x.mod import name` in a bundled module reads mod's bundled definition `_A_name`."""
    (tmp_path / "base.py").write_text("SCALE = 3\n\n\ndef twice(x):\n    return 2 * x\n")
    (tmp_path / "user.py").write_text(
        "from problems.fam.base import SCALE, twice\n\n\ndef scaled(x):\n    return twice(x) * SCALE\n"
    )
    monkeypatch.setattr(_bundle, "ROOT", tmp_path)
    base, _ = _bundle.module_code("base.py", "B", {})
    user, _ = _bundle.module_code("user.py", "U", {"base": "B"})
    assert "return _B_twice(x) * _B_SCALE" in user
    namespace: dict[str, object] = {"SimpleNamespace": __import__("types").SimpleNamespace}
    exec(compile(base + "\n" + user, "bundle", "exec"), namespace)  # the bundle under test
    assert namespace["U"].scaled(5) == 30  # type: ignore[attr-defined]
    with pytest.raises(_bundle.BundleError, match="bundle that module before it"):
        _bundle.module_code("user.py", "U", {})


def test_bundler_refuses_a_top_level_name_that_is_also_a_class_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`obj.build` keeps its name while the token renaming would rename the method's `def build`."""
    helper = tmp_path / "helper.py"
    helper.write_text("def build():\n    return 1\n\n\nclass Kernel:\n    def build(self):\n        return build()\n")
    monkeypatch.setattr(_bundle, "ROOT", tmp_path)
    with pytest.raises(_bundle.BundleError, match="'build' is also a member of Kernel"):
        _bundle.module_code("helper.py", "H", {})


TIRX_FULL_PLANS = [p for p in BUNDLED if p.stem.endswith("_fused_tirx")]


@pytest.fixture(scope="module")
def cpu_verifier() -> Iterator[VerifierSession]:
    """The session `mkbsim verify --backend cpu` opens (default limits), warm once for every plan: a fresh
    interpreter and zygote a plan cost most of each check's time and none of what it catches."""
    with VerifierSession("cpu") as session:
        yield session


@pytest.mark.slow
@pytest.mark.parametrize("path", sampled(TIRX_FULL_PLANS))
def test_tirx_solution_gets_through_the_verifier_up_to_the_gpu(path: Path, cpu_verifier: VerifierSession) -> None:
    """The verifier on cpu (as `mkbsim verify --backend cpu --workload smoke`) imports the file under the
    runtime guards, builds its kernels for sm_90a and calls run(): the only failure left on a machine without
    a GPU is the device check of the first CUDA kernel (a forbidden API, a wrong shape key or an import error
    would show instead)."""
    number = path.name.split("_")[0]
    verdict = cpu_verifier.verify(path, f"p{number}", "tirx", protocol="paper", workload="smoke")
    assert verdict.failure == "exception", verdict.to_payload(None, "final")
    assert "expected cuda" in verdict.feedback, verdict.feedback
