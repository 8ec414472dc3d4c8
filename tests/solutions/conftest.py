"""The kernel emulations' second, production-like shapes run before a GPU session, not in every run.

Each emulation test runs on SMOKE in an ordinary run; its production-like shape (partial tiles at realistic sizes,
minutes of CPU each) runs with ``MKBSIM_ALL_SOLUTIONS=1``, like the per-file compile checks (README, "Tests")."""

from __future__ import annotations

import os

import pytest
from solution_sample import ALL_SOLUTIONS

PRODUCTION_LIKE_IDS = ("production-like", "production_like")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get(ALL_SOLUTIONS) == "1":
        return
    skip = pytest.mark.skip(reason=f"a production-like shape: {ALL_SOLUTIONS}=1 runs it (before a GPU session)")
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and any(part in callspec.id for part in PRODUCTION_LIKE_IDS):
            item.add_marker(skip)
