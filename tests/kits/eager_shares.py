"""``benchmarks/eager_work_shares.py`` as a module: the study's solutions priced with their DSL compiles stubbed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def shares_module() -> Any:
    spec = importlib.util.spec_from_file_location("eager_work_shares", BENCH / "eager_work_shares.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
