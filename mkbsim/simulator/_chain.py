"""Multi-hop skill chains: A → B → A → … where each hop's attempt reads the previous hop's skill.

Per (profile, problem, replicate) the chain campaign runs both plain solos (the baselines every hop is
compared with), then one chain per starting DSL: hop 0 is the solo in the starting DSL, hop k ≥ 1 an
attempt in the other DSL than hop k-1 that reads hop k-1's skill verbatim under the neutral header.
Hop attempts carry ``chain_id`` and ``hop`` (so pairing keeps each hop's comparison apart) and name
their source; a hop whose source left no skill is skipped, and so are the hops after it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from mkbsim.catalog import SKILL_HEADER
from mkbsim.events import CampaignFinished, CampaignStarted, EventStore, NewEvent, campaign_stream
from mkbsim.simulator._attempt import AttemptResult, AttemptSpec, simulate_attempt
from mkbsim.simulator._campaign import CampaignConfig, CampaignExists, CampaignSummary, attempt_seed
from mkbsim.simulator._design import DesignSpace
from mkbsim.simulator._profiles import AgentProfile
from mkbsim.simulator._rng import seed_of
from mkbsim.simulator._spaces import all_design_spaces

OTHER_DSL = {"cutedsl": "tirx", "tirx": "cutedsl"}
BATCH_EVENTS = 5000


@dataclass(frozen=True)
class ChainConfig:
    base: CampaignConfig  # profiles, problems, replicates, seed and device
    hops: int

    def as_dict(self) -> dict[str, Any]:
        return {**self.base.as_dict(), "kind": "simulated_chain", "hops": self.hops}

    @property
    def campaign_id(self) -> str:
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return "chain-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def chain_attempt_id(campaign_id: str, model: str, problem: str, start: str, hop: int, replicate: int) -> str:
    return hashlib.sha256(f"{campaign_id}|{model}|{problem}|{start}|{hop}|{replicate}".encode()).hexdigest()[:24]


def run_chains(store: EventStore, config: ChainConfig) -> CampaignSummary:
    """Simulate every chain of ``config`` and append its events to ``store``."""
    if config.hops < 1:
        raise ValueError("a chain needs at least one hop")
    cid = config.campaign_id
    stream = campaign_stream(cid)
    if store.stream_version(stream):
        finished = any(ev.type == "CampaignFinished" for ev in store.read(stream_id=stream))
        raise CampaignExists(cid, finished)
    results = [r for slot in _slots(config, cid) for r in slot]
    ids = sorted(spec.attempt_id for spec, _ in results)
    events = [NewEvent.of(stream, CampaignStarted(
        campaign_id=cid, config=config.as_dict(),
        plan_fingerprint=hashlib.sha256("\n".join(ids).encode()).hexdigest(), code_version=_code_version(),
    ))]  # fmt: skip
    for _, result in results:
        events.extend(result.events)
    counts = {
        "attempts": len(results),
        "skipped": sum(r.skipped for _, r in results),
        "passed_by_hop": _passed_by_hop(results, config.hops),
    }
    events.append(NewEvent.of(stream, CampaignFinished(campaign_id=cid, counts=counts)))
    for start in range(0, len(events), BATCH_EVENTS):
        store.append(events[start : start + BATCH_EVENTS])
    return CampaignSummary(cid, len(results), len(events), counts)


def _slots(config: ChainConfig, cid: str) -> list[list[tuple[AttemptSpec, AttemptResult]]]:
    base = config.base
    out = []
    for profile in base.profiles:
        for problem in base.problems:
            space = all_design_spaces(base.device)[problem]
            for replicate in range(base.replicates):
                place = _Place(cid, base.seed, profile, space, replicate)
                solos = {dsl: place.solo(dsl) for dsl in OTHER_DSL}
                slot = [(s, simulate_attempt(s)) for s in solos.values()]
                for start, first in zip(OTHER_DSL, list(slot), strict=True):
                    previous = first  # hop 0 is the plain solo: the baseline of the other chain's hops as well
                    for hop in range(1, config.hops + 1):
                        s = place.hop(start, hop, previous, solos)
                        previous = (s, simulate_attempt(s))
                        slot.append(previous)
                out.append(slot)
    return out


@dataclass(frozen=True)
class _Place:
    cid: str
    seed: int
    profile: AgentProfile
    space: DesignSpace
    replicate: int

    def solo(self, dsl: str) -> AttemptSpec:
        arm = f"solo_{dsl}"
        name, problem = self.profile.name, self.space.problem
        return AttemptSpec(
            attempt_id=chain_attempt_id(self.cid, name, problem, arm, 0, self.replicate), campaign_id=self.cid,
            profile=self.profile, space=self.space, dsl=dsl, arm=arm, replicate=self.replicate,
            seed=attempt_seed(self.seed, name, problem, arm, self.replicate),
        )  # fmt: skip

    def hop(
        self, start: str, hop: int, previous: tuple[AttemptSpec, AttemptResult], solos: dict[str, AttemptSpec]
    ) -> AttemptSpec:
        source_spec, source = previous
        target = OTHER_DSL[source_spec.dsl]
        name, problem = self.profile.name, self.space.problem
        return AttemptSpec(
            attempt_id=chain_attempt_id(self.cid, name, problem, start, hop, self.replicate), campaign_id=self.cid,
            profile=self.profile, space=self.space, dsl=target, arm=f"{source_spec.dsl}2{target}_skill",
            replicate=self.replicate,
            seed=seed_of("mkbsim.simulator.chain", self.seed, name, problem, start, hop, self.replicate),
            skill=SKILL_HEADER + source.skill if source.skill else None, source_attempt_id=source_spec.attempt_id,
            source_labels=source.skill_labels, baseline_attempt_id=solos[target].attempt_id,
            chain_id=f"{self.cid}:{name}:{problem}:{self.replicate}:{start}", hop=hop,
        )  # fmt: skip


def _passed_by_hop(results: list[tuple[AttemptSpec, AttemptResult]], hops: int) -> list[int]:
    passed = [0] * (hops + 1)
    for spec, result in results:
        passed[spec.hop or 0] += result.passed
    return passed


def _code_version() -> str:
    from mkbsim import __version__

    return f"mkbsim {__version__}"
