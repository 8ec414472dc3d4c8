"""The projections' table names, defined here once; ``Tables`` gives their physical names in one schema."""

from __future__ import annotations

from dataclasses import dataclass

from mkbsim.events import CHECKPOINTS

ATTEMPTS = "attempts"
TRANSFER_ATTEMPTS = "transfer_attempts"
COMPARISONS = "comparisons"
CONTROL_COMPARISONS = "control_comparisons"  # control arms (DESIGN §4), paired like treatments
CAMPAIGNS = "campaigns"
SKILLS = "skills"
#: Every projection table, in the order exports list them.
PROJECTION_TABLES = (ATTEMPTS, TRANSFER_ATTEMPTS, COMPARISONS, CONTROL_COMPARISONS, CAMPAIGNS, SKILLS)


@dataclass(frozen=True, slots=True)
class Tables:
    """Schema-qualified names of the projection tables, for SQL in the read model (``mkbsim.lab``):
    ``main`` (the store file) or the schema of a scratch database computed beside a read-only store."""

    schema: str = "main"

    def physical(self, name: str) -> str:
        return f"{self.schema}.{name}"

    @property
    def attempts(self) -> str:
        return self.physical(ATTEMPTS)

    @property
    def transfer_attempts(self) -> str:
        return self.physical(TRANSFER_ATTEMPTS)

    @property
    def comparisons(self) -> str:
        return self.physical(COMPARISONS)

    @property
    def control_comparisons(self) -> str:
        return self.physical(CONTROL_COMPARISONS)

    @property
    def campaigns(self) -> str:
        return self.physical(CAMPAIGNS)

    @property
    def skills(self) -> str:
        return self.physical(SKILLS)

    @property
    def checkpoints(self) -> str:
        return self.physical(CHECKPOINTS)
