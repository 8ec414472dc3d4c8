"""README figures about the default campaign cannot go stale: benchmarks/readme_figures.py generates them from a
run, and this test runs the default campaign (in memory) and compares."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "readme_figures.py"


@pytest.fixture(scope="module")
def figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_figures", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def default_run(figures: ModuleType) -> tuple[str, object]:
    config = figures.default_config()
    return config.campaign_id, figures.default_records(config)


def test_the_readme_figures_are_what_a_run_of_the_default_campaign_gives(
    figures: ModuleType, default_run: tuple[str, object]
) -> None:
    assert not figures.stale(*default_run), "run: .venv/bin/python benchmarks/readme_figures.py"


def test_a_figure_edited_by_hand_is_caught(figures: ModuleType, default_run: tuple[str, object], tmp_path: Path
                                           ) -> None:  # fmt: skip
    campaign_id, rec = default_run
    readme = tmp_path / "README.md"
    current = figures.README.read_text()
    readme.write_text(current)
    assert not figures.stale(campaign_id, rec, readme)
    readme.write_text(current.replace(campaign_id, "sim-4c3ae4a51ab2037b", 1))  # the id the README once had
    assert figures.stale(campaign_id, rec, readme)
