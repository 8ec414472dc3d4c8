"""The `skills` projection: one row per written skill (SkillWritten), found by attempt without reading
the events, with the text's size. The text itself stays in the event (DESIGN §3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from mkbsim.projections._engine import Projection, ProjectionTx, Row
from mkbsim.projections._tables import SKILLS


class SkillsProjection(Projection):
    name = SKILLS
    version = 1
    handles = frozenset({"SkillWritten"})
    tables: ClassVar[dict[str, str]] = {
        SKILLS: "position INTEGER PRIMARY KEY, attempt_id TEXT NOT NULL, chars INTEGER NOT NULL, sha256 TEXT NOT NULL",
    }
    indexes: ClassVar[dict[str, tuple[str, str]]] = {"by_attempt": (SKILLS, "attempt_id, position")}

    def apply(self, tx: ProjectionTx, rows: Sequence[Row]) -> None:
        tx.conn.executemany(
            f"INSERT INTO {tx.t[SKILLS]} VALUES (?, ?, ?, ?)",
            [(position, p["attempt_id"], len(p["text"]), p["sha256"]) for position, _, _, p, _ in rows],
        )
