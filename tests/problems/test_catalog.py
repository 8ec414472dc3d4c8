"""The catalogue loader, selection, variants and the checker itself (on deliberately broken modules)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mkbsim.catalog import (
    SKILL_HEADER,
    ProblemLoadError,
    check_problem,
    load_catalog,
    load_problem,
    problems_root,
    render_task,
)

EXAMPLE = problems_root() / "mlp_norm" / "36_rmsnorm_h128_qwen3_30b_bf16.py"


def _variant(tmp_path: Path, replace: tuple[str, str] | None = None, name: str | None = None) -> Path:
    family = tmp_path / "mlp_norm"
    family.mkdir(exist_ok=True)
    target = family / (name or EXAMPLE.name)
    text = EXAMPLE.read_text()
    if replace:
        assert replace[0] in text
        text = text.replace(*replace)
    target.write_text(text)
    return target


def test_lookup_by_id_number_and_name() -> None:
    catalog = load_catalog()
    p = catalog.get("p36")
    assert catalog.get("36") is p and catalog.get("rmsnorm_h128_qwen3_30b_bf16") is p
    with pytest.raises(KeyError, match="unknown problem"):
        catalog.get("p99")


def test_select_by_family_range_and_glob() -> None:
    catalog = load_catalog()
    assert all(p.family == "mlp_norm" for p in catalog.select("mlp_norm"))
    assert [p.id for p in catalog.select("p28,p36")] == ["p28", "p36"]
    assert {p.id for p in catalog.select("p28-p36")} >= {"p28", "p36"}
    assert [p.id for p in catalog.select("rmsnorm_h128*")] == ["p36"]
    with pytest.raises(KeyError):
        catalog.select("nothing_like_this*")


def test_a_broken_module_is_reported_and_the_rest_loads(tmp_path: Path) -> None:
    _variant(tmp_path)
    _variant(tmp_path, ("def cost(", "def not_cost("), name="37_broken_bf16.py")
    _variant(tmp_path, ("import torch\n", "import torch\nraise RuntimeError('boom')\n"), name="38_crash_bf16.py")
    catalog = load_catalog(tmp_path)
    assert [p.id for p in catalog] == ["p36"]
    messages = sorted(str(e) for e in catalog.errors)
    assert "37_broken_bf16.py: ID 'p36' does not match" in messages[0] or "missing cost" in messages[0]
    assert "import failed: RuntimeError: boom" in messages[1]


def test_missing_field_is_named(tmp_path: Path) -> None:
    path = _variant(tmp_path, ('NOTES = ""\n', ""))
    with pytest.raises(ProblemLoadError, match="missing NOTES"):
        load_problem(path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (("x = upcast(hidden_states)", "x = hidden_states.float()"), "lowers precision"),
        (("x = upcast(hidden_states)", "x = upcast(hidden_states); hidden_states.mul_(2)"), "mutated input"),
        (
            ("gen = generator(seed, device)", "gen = generator(seed + __import__('time').perf_counter_ns(), device)"),
            "not deterministic",
        ),
        (("gen = generator(seed, device)", "gen = generator(0, device)"), "same inputs for different seeds"),
        (("moved = 2 *", "moved = 20 *"), "cost.bytes"),
        (('SMOKE = {"batch_size": 64', 'SMOKE = {"batch_size": 0'), None),
    ],
)
def test_checker_catches_contract_violations(tmp_path: Path, edit: tuple[str, str], message: str | None) -> None:
    path = _variant(tmp_path, edit)
    if message is None:
        with pytest.raises(ProblemLoadError, match="non-positive"):
            load_problem(path)
        return
    result = check_problem(load_problem(path))
    assert not result.ok
    assert any(message in f for f in result.failures), result.failures


def test_variants_differ_only_in_the_dsl() -> None:
    p = load_catalog().get("p28")
    cute, tirx = render_task(p, "cutedsl"), render_task(p, "tirx")
    assert "CuTe DSL" in cute and "TIRx" not in cute
    assert "TIRx" in tirx and "CuTe DSL" not in tirx
    neutral = [line for line in cute.splitlines() if not any(w in line for w in ("CuTe", "cutlass", "cutedsl"))]
    assert all(line in tirx.splitlines() for line in neutral)
    assert "40 minutes" in cute and "10 counted submissions" in cute
    with_skill = render_task(p, "tirx", skill="Fusing the add into the norm paid off.")
    assert with_skill.endswith(SKILL_HEADER + "Fusing the add into the norm paid off.")


def test_copying_a_problem_module_keeps_it_loadable(tmp_path: Path) -> None:
    family = tmp_path / "mlp_norm"
    family.mkdir()
    shutil.copy(EXAMPLE, family / EXAMPLE.name)
    assert load_problem(family / EXAMPLE.name).id == "p36"


def test_full_catalogue_matches_the_study() -> None:
    catalog = load_catalog()
    assert not catalog.errors, [str(e) for e in catalog.errors]
    assert [p.id for p in catalog] == [f"p{i:02d}" for i in range(1, 75)]
    counts = {f: sum(p.family == f for p in catalog) for f in ("attention", "kv_cache", "linear_attention")}
    counts |= {f: sum(p.family == f for p in catalog) for f in ("mlp_norm", "moe", "quantization")}
    assert counts == {
        "attention": 18, "kv_cache": 8, "linear_attention": 13, "mlp_norm": 17, "moe": 8, "quantization": 10,
    }  # fmt: skip
    catalogue_md = Path(__file__).resolve().parents[2].parent / "shared" / "catalog.md"
    if catalogue_md.exists():  # the study's names, ids and families, verbatim
        rows = [
            line.split("|")[1:5]
            for line in catalogue_md.read_text().splitlines()
            if line.startswith("|") and line[1:3].isdigit()
        ]
        assert {(f"p{r[0]}", r[1], r[2]) for r in rows} == {(p.id, p.name, p.family) for p in catalog}
        assert {p.id: p.source for p in catalog} == {f"p{r[0]}": r[3] for r in rows}
