"""The deterministic plan of a campaign: every attempt, in dependency order, and its fingerprint.

A skill-conditioned attempt waits for its source solo (whose skill it reads) and its baseline solo
(the target-DSL solo it is compared with). The fingerprint hashes what decides the measurements —
the problem definitions' source, the verifier protocol's parameters, the normalized configuration —
so a resume can refuse to mix results across a change of any of them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from mkbsim.campaigns._config import SimCampaign
from mkbsim.metrics._rules import DIRECTIONS
from mkbsim.simulator import attempt_id

SOLO = {"cutedsl": "solo_cutedsl", "tirx": "solo_tirx"}


@dataclass(frozen=True)
class PlannedAttempt:
    attempt_id: str
    model: str
    problem: str
    arm: str
    replicate: int
    source: str | None = None  # the solo whose skill a treatment reads
    baseline: str | None = None  # the target-DSL solo a treatment is compared with

    @property
    def depends_on(self) -> tuple[str, ...]:
        return tuple(a for a in (self.source, self.baseline) if a is not None)


@dataclass(frozen=True)
class Plan:
    campaign_id: str
    fingerprint: str
    parts: dict[str, str]  # the fingerprint's components, to say which one changed
    attempts: tuple[PlannedAttempt, ...]  # every attempt after the attempts it depends on

    def count_by_arm(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for a in self.attempts:
            counts[a.arm] = counts.get(a.arm, 0) + 1
        return counts


def fingerprint_parts(campaign: SimCampaign) -> dict[str, str]:
    from mkbsim.catalog import load_catalog
    from mkbsim.verifier import PROTOCOLS

    catalog = {p.id: p for p in load_catalog()}
    sources = hashlib.sha256()
    for pid in campaign.sim.problems:
        sources.update(f"{pid}\n".encode() + catalog[pid].path.read_bytes())
    return {
        "problem_definitions": sources.hexdigest(),
        "verifier_protocol": PROTOCOLS[campaign.protocol].hash,
        "config": _sha256(campaign.normalized()),
    }


def plan_campaign(campaign: SimCampaign, campaign_id: str | None = None) -> Plan:
    cid = campaign_id or campaign.campaign_id
    attempts: list[PlannedAttempt] = []
    for profile in campaign.sim.profiles:
        for problem in campaign.sim.problems:
            for rep in range(campaign.sim.replicates):
                solo = {dsl: attempt_id(cid, profile.name, problem, arm, rep) for dsl, arm in SOLO.items()}
                attempts += [PlannedAttempt(solo[dsl], profile.name, problem, arm, rep) for dsl, arm in SOLO.items()]
                for direction in campaign.directions:
                    source, target = DIRECTIONS[direction]
                    arm = f"{direction}_skill"
                    attempts.append(PlannedAttempt(attempt_id(cid, profile.name, problem, arm, rep), profile.name,
                                                   problem, arm, rep, solo[source], solo[target]))  # fmt: skip
    parts = fingerprint_parts(campaign)
    return Plan(cid, _sha256(parts), parts, tuple(attempts))


def _sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
