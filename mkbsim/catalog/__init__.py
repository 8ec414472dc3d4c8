"""The problem catalogue: loading, selecting, checking and describing the 74 problems."""

from mkbsim.catalog._check import ProblemCheck, anchor_inputs, check_problem, outputs_of
from mkbsim.catalog._loader import (
    FAMILIES,
    Catalog,
    Problem,
    ProblemLoadError,
    load_catalog,
    load_problem,
    problems_root,
)
from mkbsim.catalog._variants import DSLS, SKILL_HEADER, Budget, render_task

__all__ = [
    "DSLS",
    "FAMILIES",
    "SKILL_HEADER",
    "Budget",
    "Catalog",
    "Problem",
    "ProblemCheck",
    "ProblemLoadError",
    "anchor_inputs",
    "check_problem",
    "load_catalog",
    "load_problem",
    "outputs_of",
    "problems_root",
    "render_task",
]
