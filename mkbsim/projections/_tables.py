"""The projections' table names, defined here once; ``Tables`` gives their physical names in one schema."""

from __future__ import annotations

from dataclasses import dataclass, fields

from mkbsim.events import CHECKPOINTS

ATTEMPTS = "attempts"
TRANSFER_ATTEMPTS = "transfer_attempts"
COMPARISONS = "comparisons"
CAMPAIGNS = "campaigns"
SKILLS = "skills"


@dataclass(frozen=True, slots=True)
class Tables:
    """Schema-qualified names of the projection tables, for SQL in the read model (``mkbsim.lab``)."""

    attempts: str
    transfer_attempts: str
    comparisons: str
    campaigns: str
    skills: str
    checkpoints: str

    @classmethod
    def of(cls, schema: str = "main") -> Tables:
        names = (ATTEMPTS, TRANSFER_ATTEMPTS, COMPARISONS, CAMPAIGNS, SKILLS, CHECKPOINTS)
        assert tuple(f.name for f in fields(cls)) == (*names[:-1], "checkpoints")
        return cls(*(f"{schema}.{name}" for name in names))
