"""Skill reads: the written skills (SkillWritten events) of one campaign or all, paged by position."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tui.data.connection import has_tables


@dataclass(frozen=True)
class SkillRow:
    position: int
    attempt_id: str
    campaign_id: str | None
    model: str | None
    problem: str | None
    dsl: str | None
    arm: str | None
    passed: bool | None
    chars: int  # length of the text: a size the list can show without decoding it


def campaign_ids(conn: sqlite3.Connection) -> list[str]:
    if not has_tables(conn, "attempts"):
        return []
    return [r[0] for r in conn.execute("SELECT DISTINCT campaign_id FROM attempts ORDER BY campaign_id")]


def skill_positions(conn: sqlite3.Connection, campaign_id: str | None) -> list[int]:
    """Positions of the SkillWritten events, oldest first (through the type index, or per attempt stream)."""
    if campaign_id is None:
        return [r[0] for r in conn.execute("SELECT position FROM events WHERE type = 'SkillWritten' ORDER BY position")]
    if not has_tables(conn, "attempts"):
        return []
    return [
        r[0]
        for r in conn.execute(
            "SELECT e.position FROM attempts a JOIN events e ON e.stream_id = 'attempt-' || a.attempt_id"
            " WHERE a.campaign_id = ? AND e.type = 'SkillWritten' ORDER BY e.position",
            (campaign_id,),
        )
    ]


def fetch(conn: sqlite3.Connection, positions: Sequence[int]) -> list[SkillRow]:
    if not positions:
        return []
    marks = ",".join("?" * len(positions))
    raw = {
        position: (attempt_id, size)
        for position, attempt_id, size in conn.execute(
            "SELECT position, json_extract(payload, '$.attempt_id'), length(json_extract(payload, '$.text'))"
            f" FROM events WHERE position IN ({marks})",
            list(positions),
        )
    }
    attempts: dict[str, tuple[str, str, str, str, str, bool | None]] = {}
    if has_tables(conn, "attempts"):
        ids = sorted({a for a, _ in raw.values()})
        id_marks = ",".join("?" * len(ids))
        for attempt_id, campaign, model, problem, dsl, arm, passed in conn.execute(
            "SELECT attempt_id, campaign_id, model, problem, dsl, arm, passed FROM attempts"
            f" WHERE attempt_id IN ({id_marks})",
            ids,
        ):
            attempts[attempt_id] = (campaign, model, problem, dsl, arm, None if passed is None else bool(passed))
    out = []
    for position in positions:
        if position not in raw:
            continue
        attempt_id, size = raw[position]
        campaign, model, problem, dsl, arm, passed = attempts.get(attempt_id, (None,) * 6)
        out.append(SkillRow(position, attempt_id, campaign, model, problem, dsl, arm, passed, int(size or 0)))
    return out


def skill_text(conn: sqlite3.Connection, position: int) -> str:
    row = conn.execute(
        "SELECT json_extract(payload, '$.text') FROM events WHERE position = ? AND type = 'SkillWritten'", (position,)
    ).fetchone()
    return str(row[0]) if row and row[0] is not None else ""


def iter_skill_texts(conn: sqlite3.Connection, campaign_id: str | None, batch: int = 500) -> Iterator[str]:
    """Every skill text of a campaign (or all), read in batches by position (for a worker thread)."""
    positions = skill_positions(conn, campaign_id)
    for start in range(0, len(positions), batch):
        chunk = positions[start : start + batch]
        marks = ",".join("?" * len(chunk))
        for (payload,) in conn.execute(f"SELECT payload FROM events WHERE position IN ({marks})", chunk):
            yield str(json.loads(payload).get("text", ""))
