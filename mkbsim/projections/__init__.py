"""Projections: read models rebuilt and live-updated from the event store."""

from mkbsim.projections._attempts import AttemptsProjection
from mkbsim.projections._comparisons import ComparisonsProjection
from mkbsim.projections._engine import (
    Projection,
    ProjectionEngine,
    ProjectionStatus,
    ProjectionTx,
    Row,
)


def default_projections() -> list[Projection]:
    """Every projection mkbsim ships, in dependency order."""
    return [AttemptsProjection(), ComparisonsProjection()]


__all__ = [
    "AttemptsProjection",
    "ComparisonsProjection",
    "Projection",
    "ProjectionEngine",
    "ProjectionStatus",
    "ProjectionTx",
    "Row",
    "default_projections",
]
