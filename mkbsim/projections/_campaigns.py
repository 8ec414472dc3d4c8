"""The `campaigns` projection: one row per campaign announced by CampaignStarted, with its configuration
and when it started and finished (the monitor's campaign list, DESIGN §3)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from mkbsim.projections._engine import Projection, ProjectionTx, Row
from mkbsim.projections._tables import CAMPAIGNS


class CampaignsProjection(Projection):
    name = CAMPAIGNS
    version = 1
    handles = frozenset({"CampaignStarted", "CampaignFinished"})
    tables: ClassVar[dict[str, str]] = {
        CAMPAIGNS: """
            campaign_id TEXT PRIMARY KEY, kind TEXT NOT NULL, config TEXT NOT NULL,
            started_position INTEGER NOT NULL, started_at TEXT NOT NULL,
            finished_position INTEGER, finished_at TEXT
        """,
    }

    def apply(self, tx: ProjectionTx, rows: Sequence[Row]) -> None:
        table = tx.t[CAMPAIGNS]
        for position, type_, _, p, recorded_at in rows:  # a handful per campaign: no batching needed
            if type_ == "CampaignStarted":
                config = p.get("config") or {}
                tx.conn.execute(
                    f"INSERT INTO {table} (campaign_id, kind, config, started_position, started_at)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT(campaign_id) DO UPDATE SET kind = excluded.kind,"
                    " config = excluded.config, started_position = excluded.started_position,"
                    " started_at = excluded.started_at",
                    (p["campaign_id"], str(config.get("kind", "unknown")), json.dumps(config), position, recorded_at),
                )
            else:
                tx.conn.execute(
                    f"UPDATE {table} SET finished_position = ?, finished_at = ? WHERE campaign_id = ?",
                    (position, recorded_at, p["campaign_id"]),
                )
