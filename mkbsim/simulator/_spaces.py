"""Design spaces of catalogue problems, derived once per process (loading the catalogue imports torch)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from mkbsim.errors import UserError
from mkbsim.simulator._design import DesignSpace, derive_design_space
from mkbsim.simulator._device import load_device

if TYPE_CHECKING:
    from mkbsim.catalog import Catalog


@cache
def _catalog() -> Catalog:
    import torch

    from mkbsim.catalog import load_catalog

    torch.set_num_threads(1)  # cost models are arithmetic; extra threads only contend on small machines
    catalog = load_catalog()
    if catalog.errors:
        raise UserError(f"the problem catalogue has broken modules: {catalog.errors[0]}")
    return catalog


@cache
def all_design_spaces(device: str = "h200") -> dict[str, DesignSpace]:
    """Every catalogue problem's design space on ``device``, by problem id, in catalogue order."""
    profile = load_device(device)
    return {p.id: derive_design_space(p, profile) for p in _catalog()}


def select_problems(spec: str | None) -> list[str]:
    """Problem ids for a selection spec (ids, names, families, ranges, globs; None = all)."""
    try:
        return [p.id for p in _catalog().select(spec)]
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
