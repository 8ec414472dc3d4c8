"""The read model (DESIGN §3): every report and screen gets its rows from ``Lab(path)``.

``Lab`` owns the projection engine and brings the projections current once when it opens (without
writing to a read-only store: see ``mkbsim.lab._lab``); its query groups return typed rows. Another
thread reads through ``lab.reader()``.
"""

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
