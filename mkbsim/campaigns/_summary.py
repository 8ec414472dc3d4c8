"""What a run of a campaign did: the statuses of its attempts' latest tries, what ran and what was kept, why
attempts failed on infrastructure, and the counts ``CampaignFinished`` records."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mkbsim.campaigns._attempt import AttemptOutcome

_REASON_CHARS = 160  # a reason longer than this is grouped by its beginning


@dataclass
class CampaignSummary:
    campaign_id: str
    attempts: int  # in the plan
    statuses: Counter[str] = field(default_factory=Counter)  # latest try of every attempt that has one
    passed: int = 0
    passed_by_arm: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    ran: int = 0  # attempts run to their end by this run
    kept: int = 0  # attempts finished by earlier runs
    events: int = 0  # events this run appended
    append_s: float = 0.0  # seconds the store spent appending them (in the writer)
    append_cpu_s: float = 0.0  # the writer's CPU seconds for them (what contention for cores leaves out)
    interrupted: int = 0  # attempts this run stopped (in flight when a signal arrived)
    stopped_by: str | None = None  # the signal's name
    stopped_by_cost_cap: bool = False
    already_finished: bool = False  # every attempt had finished in earlier runs
    infra_reasons: Counter[str] = field(default_factory=Counter)  # this run's infra_error attempts, by reason
    extra: dict[str, Any] = field(default_factory=dict)  # the execution's own counts (costs, network)
    extra_lines: list[str] = field(default_factory=list)

    def add(self, arm: str, outcome: AttemptOutcome, *, kept: bool) -> None:
        self.statuses[outcome.status] += 1
        self.passed += outcome.passed
        self.passed_by_arm[arm] += outcome.passed
        self.skipped += outcome.skipped
        self.kept += kept
        self.ran += not kept and outcome.status != "interrupted"
        self.interrupted += not kept and outcome.status == "interrupted"
        if outcome.status == "infra_error":
            self.infra_reasons[_first_line(outcome.reason or "no reason recorded")] += 1

    @property
    def all_infra_error(self) -> bool:
        """No attempt measured anything: every one that ended this run ended on infrastructure."""
        return bool(self.statuses["infra_error"]) and not self.statuses["finished"] and self.stopped_by is None

    def counts(self) -> dict[str, Any]:
        """What ``CampaignFinished`` records."""
        return {
            "planned": self.attempts, "attempts": dict(self.statuses), "passed": self.passed,
            "passed_by_arm": dict(self.passed_by_arm), "skipped": self.skipped, "kept": self.kept,
            "stopped_by_cost_cap": self.stopped_by_cost_cap, "infra_errors": dict(self.infra_reasons), **self.extra,
        }  # fmt: skip

    def lines(self) -> list[str]:
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items())) or "none"
        out = [
            f"campaign {self.campaign_id} ({self.attempts:,} attempts planned): attempts {statuses} "
            f"({self.passed:,} passed, {self.skipped:,} skipped, {self.kept:,} kept from earlier runs)",
            *self.extra_lines,
        ]
        if self.stopped_by_cost_cap:
            out.append(f"stopped: the cost cap of ${self.extra.get('cost_cap_usd')} was reached; "
                       "run again with a higher cap")  # fmt: skip
        if self.infra_reasons:
            out.append("attempts that ended in infra_error (they run again when the campaign is run again):")
            out += [f"  {n:,} × {reason}" for reason, n in self.infra_reasons.most_common()]
        return out


def _first_line(reason: str) -> str:
    line = reason.strip().splitlines()[0] if reason.strip() else reason
    return line if len(line) <= _REASON_CHARS else line[: _REASON_CHARS - 1] + "…"
