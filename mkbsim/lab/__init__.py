"""The read model (DESIGN §3): every report and screen gets its rows from ``Lab(path)``.

``Lab`` owns the projection engine and brings the projections current once when it opens (without
writing to a read-only store: see ``mkbsim.lab._lab``); its query groups return typed rows. Another
thread reads through ``lab.reader()``.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when first used (below): a command loads only the query groups it reads
    from mkbsim.lab._browse import (
        SORT_COLUMNS,
        Aggregates,
        ComparisonQuery,
        ComparisonRow,
        LiftBar,
        Summary,
    )
    from mkbsim.lab._chains import ChainLinks, ChainSummary, Hop
    from mkbsim.lab._lab import Freshness, Lab
    from mkbsim.lab._monitor import (
        ARM_ORDER,
        ArmProgress,
        CampaignInfo,
        CampaignPlan,
        CountGrid,
        Counts,
        FailedAttempt,
        InFlight,
        Throughput,
        arm_progress,
        plan_of,
    )
    from mkbsim.lab._reader import LabReader
    from mkbsim.lab._skills import Labels, Material, SkillRow, Treatment
    from mkbsim.lab._trajectories import STEP_TYPES, Trajectory, TrajectoryEvent
    from mkbsim.lab._transfer import HopRecord, ReportData, SkillComparison, VerdictRecord

__all__ = [
    "ARM_ORDER",
    "SORT_COLUMNS",
    "STEP_TYPES",
    "Aggregates",
    "ArmProgress",
    "CampaignInfo",
    "CampaignPlan",
    "ChainLinks",
    "ChainSummary",
    "ComparisonQuery",
    "ComparisonRow",
    "CountGrid",
    "Counts",
    "FailedAttempt",
    "Freshness",
    "Hop",
    "HopRecord",
    "InFlight",
    "Lab",
    "LabReader",
    "Labels",
    "LiftBar",
    "Material",
    "ReportData",
    "SkillComparison",
    "SkillRow",
    "Summary",
    "Throughput",
    "Trajectory",
    "TrajectoryEvent",
    "Treatment",
    "VerdictRecord",
    "arm_progress",
    "plan_of",
]


def __getattr__(name: str) -> object:
    """The names above, each imported from its module when first asked for (PEP 562)."""
    import importlib

    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULES[name]), name)


_MODULES = {
    "SORT_COLUMNS": "mkbsim.lab._browse",
    "Aggregates": "mkbsim.lab._browse",
    "ComparisonQuery": "mkbsim.lab._browse",
    "ComparisonRow": "mkbsim.lab._browse",
    "LiftBar": "mkbsim.lab._browse",
    "Summary": "mkbsim.lab._browse",
    "ChainLinks": "mkbsim.lab._chains",
    "ChainSummary": "mkbsim.lab._chains",
    "Hop": "mkbsim.lab._chains",
    "Freshness": "mkbsim.lab._lab",
    "Lab": "mkbsim.lab._lab",
    "ARM_ORDER": "mkbsim.lab._monitor",
    "ArmProgress": "mkbsim.lab._monitor",
    "CampaignInfo": "mkbsim.lab._monitor",
    "CampaignPlan": "mkbsim.lab._monitor",
    "CountGrid": "mkbsim.lab._monitor",
    "Counts": "mkbsim.lab._monitor",
    "FailedAttempt": "mkbsim.lab._monitor",
    "InFlight": "mkbsim.lab._monitor",
    "Throughput": "mkbsim.lab._monitor",
    "arm_progress": "mkbsim.lab._monitor",
    "plan_of": "mkbsim.lab._monitor",
    "LabReader": "mkbsim.lab._reader",
    "Labels": "mkbsim.lab._skills",
    "Material": "mkbsim.lab._skills",
    "SkillRow": "mkbsim.lab._skills",
    "Treatment": "mkbsim.lab._skills",
    "STEP_TYPES": "mkbsim.lab._trajectories",
    "Trajectory": "mkbsim.lab._trajectories",
    "TrajectoryEvent": "mkbsim.lab._trajectories",
    "HopRecord": "mkbsim.lab._transfer",
    "ReportData": "mkbsim.lab._transfer",
    "SkillComparison": "mkbsim.lab._transfer",
    "VerdictRecord": "mkbsim.lab._transfer",
}
