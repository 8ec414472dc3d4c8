"""Projections: read models rebuilt and live-updated from the event store (DESIGN §3). Read them through
``mkbsim.lab``, which owns the engine and the queries."""

from mkbsim.projections._attempts import AttemptsProjection
from mkbsim.projections._campaigns import CampaignsProjection
from mkbsim.projections._comparisons import ComparisonsProjection
from mkbsim.projections._engine import (
    Projection,
    ProjectionEngine,
    ProjectionStatus,
    ProjectionTx,
    Row,
)
from mkbsim.projections._skills import SkillsProjection
from mkbsim.projections._tables import Tables


def default_projections() -> list[Projection]:
    """Every projection mkbsim ships, in dependency order."""
    return [AttemptsProjection(), ComparisonsProjection(), CampaignsProjection(), SkillsProjection()]


__all__ = [
    "AttemptsProjection",
    "CampaignsProjection",
    "ComparisonsProjection",
    "Projection",
    "ProjectionEngine",
    "ProjectionStatus",
    "ProjectionTx",
    "Row",
    "SkillsProjection",
    "Tables",
    "default_projections",
]
