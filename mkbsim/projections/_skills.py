"""The `skills` projection: where the skill texts and labels are, without reading the events (DESIGN §3, §7).

- ``skills``: one row per written skill (SkillWritten), by attempt, with the text's size;
- ``skill_reads``: one row per skill an attempt read (SkillRead), by attempt, with its source and filter;
- ``labels``: one row per label (LabelAssigned), by labeler and subject.

The texts and labels themselves stay in the events: a view finds them here and reads them by position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from mkbsim.projections._engine import Projection, ProjectionTx, Row
from mkbsim.projections._tables import LABELS, SKILL_READS, SKILLS


class SkillsProjection(Projection):
    name = SKILLS
    version = 2
    handles = frozenset({"SkillWritten", "SkillRead", "LabelAssigned"})
    tables: ClassVar[dict[str, str]] = {
        SKILLS: "position INTEGER PRIMARY KEY, attempt_id TEXT NOT NULL, chars INTEGER NOT NULL, sha256 TEXT NOT NULL",
        SKILL_READS: "position INTEGER PRIMARY KEY, attempt_id TEXT NOT NULL, source_attempt_id TEXT NOT NULL,"
        " filter TEXT",
        LABELS: "position INTEGER PRIMARY KEY, labeler TEXT NOT NULL, subject TEXT NOT NULL, subject_id TEXT NOT NULL",
    }
    indexes: ClassVar[dict[str, tuple[str, str]]] = {
        "by_attempt": (SKILLS, "attempt_id, position"),
        "by_reader": (SKILL_READS, "attempt_id, position"),
        "by_labeler": (LABELS, "labeler, subject, subject_id"),
    }

    def apply(self, tx: ProjectionTx, rows: Sequence[Row]) -> None:
        written, read, labels = [], [], []
        for position, type_, _, p, _ in rows:
            if type_ == "SkillWritten":
                written.append((position, p["attempt_id"], len(p["text"]), p["sha256"]))
            elif type_ == "SkillRead":
                read.append((position, p["attempt_id"], p["source_attempt_id"], p.get("filter")))
            else:
                labels.append((position, p["labeler"], p["subject"], p["subject_id"]))
        tx.conn.executemany(f"INSERT INTO {tx.t[SKILLS]} VALUES (?, ?, ?, ?)", written)
        tx.conn.executemany(f"INSERT INTO {tx.t[SKILL_READS]} VALUES (?, ?, ?, ?)", read)
        tx.conn.executemany(f"INSERT INTO {tx.t[LABELS]} VALUES (?, ?, ?, ?)", labels)
