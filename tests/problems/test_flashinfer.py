"""FlashInfer-Trace interop: export, validate, import round trip, and the shipped fixture definitions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mkbsim.catalog import check_problem, load_catalog, load_problem
from mkbsim.catalog._flashinfer import (
    FiFormatError,
    export_problem,
    interface_differences,
    load_definitions,
    parse_definition,
    problem_module_source,
)
from mkbsim.cli import main

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "flashinfer-trace"

OWN_DEFINITION = {
    "name": "scaled_silu_h256",
    "op_type": "rmsnorm",
    "description": "y = silu(x) * scale, fp32 math, bf16 out.",
    "axes": {"tokens": {"type": "var"}, "hidden": {"type": "const", "value": 256}},
    "inputs": {"x": {"shape": ["tokens", "hidden"], "dtype": "bfloat16"}, "scale": {"shape": None, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["tokens", "hidden"], "dtype": "bfloat16"}},
    "reference": (
        "import torch\n\ndef run(x, scale):\n    h = x.to(torch.float32)\n"
        "    return (h * torch.sigmoid(h) * scale).to(x.dtype)\n"
    ),
}


@pytest.mark.parametrize("problem_id", ["p28", "p36", "p21"])
def test_export_round_trips_through_json(problem_id: str) -> None:
    problem = load_catalog().get(problem_id)
    exported = export_problem(problem)
    again = parse_definition(json.loads(json.dumps(exported.to_dict())), "round-trip")
    assert again == exported
    assert interface_differences(again, problem) == []
    namespace: dict[str, object] = {}
    exec(compile(again.reference, "reference", "exec"), namespace)  # the exported reference really runs
    inputs = problem.make_inputs(problem.smoke, seed=1)
    out = namespace["run"](*inputs)  # type: ignore[operator]
    assert out is not None or problem.inplace


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.pop("reference"), "`reference` is required"),
        (lambda d: d["axes"]["hidden"].pop("value"), "axes.hidden.value must be an integer"),
        (lambda d: d["inputs"]["x"].update(dtype="float128"), "inputs.x.dtype 'float128'"),
        (lambda d: d["outputs"]["y"].update(shape=["tokens", "width"]), "undeclared axes ['width']"),
        (lambda d: d.update(reference="def walk(x):\n    return x\n"), "top-level function `run`"),
        (lambda d: d.update(reference="def run(x:\n"), "does not parse"),
    ],
)
def test_invalid_definitions_name_the_field(edit, message: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(json.dumps(OWN_DEFINITION))
    edit(data)
    with pytest.raises(FiFormatError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_definition(data, "mine.json")


def test_imported_module_loads_and_meets_the_contract(tmp_path: Path) -> None:
    defn = parse_definition(OWN_DEFINITION)
    source = problem_module_source(
        defn, number=80, workload={"tokens": 4096, "hidden": 256}, smoke={"tokens": 8, "hidden": 256}, origin="test"
    )
    target = tmp_path / "mlp_norm" / "80_scaled_silu_h256.py"
    target.parent.mkdir()
    target.write_text(source)
    problem = load_problem(target)
    assert (problem.id, problem.family, problem.source) == ("p80", "mlp_norm", "FI")
    result = check_problem(problem)
    assert result.ok, result.failures  # `.to(torch.float32)` became upcast(): the anchor stays float64


def test_index_inputs_are_not_imported_generically() -> None:
    data = json.loads(json.dumps(OWN_DEFINITION))
    data["inputs"]["ids"] = {"shape": ["tokens"], "dtype": "int32"}
    with pytest.raises(FiFormatError, match="hand-written make_inputs"):
        problem_module_source(parse_definition(data), number=81, workload={}, smoke={}, origin="test")


def test_cli_export_then_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p28.json"
    assert main(["problems", "export-fi", "p28", "--out", str(out)]) == 0
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(OWN_DEFINITION))
    capsys.readouterr()
    assert main(["problems", "import-fi", str(out)]) == 0
    assert "= p28 (interface matches)" in capsys.readouterr().out
    assert main(["problems", "import-fi", str(mine), "--out", str(tmp_path / "lib")]) == 0
    assert (tmp_path / "lib" / "mlp_norm" / "75_scaled_silu_h256.py").exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["problems", "import-fi", str(bad)]) == 2


@pytest.mark.skipif(not FIXTURES.exists(), reason="shared FlashInfer-Trace fixtures not present")
def test_all_shipped_definitions_import() -> None:
    definitions, errors = load_definitions(FIXTURES / "definitions")
    assert not errors and len(definitions) == 156
    catalog = load_catalog()
    by_prefix = {d.name: d for d in definitions}
    for pid, fi_name in [
        ("p28", "fused_add_rmsnorm_h4096"),
        ("p36", "rmsnorm_h128"),
        ("p01", "gqa_paged_decode_h32_kv8_d128_ps1"),
    ]:
        assert interface_differences(by_prefix[fi_name], catalog.get(pid)) == []
