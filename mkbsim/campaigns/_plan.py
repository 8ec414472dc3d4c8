"""The plan of a campaign (DESIGN §4): every attempt in the order they start, what each reads, and the
fingerprint a resume checks.

One definition for every kind of campaign. The transfer protocol plans, per model, problem and replicate,
both solos, then per direction the skill-conditioned attempt and the control arms the campaign asks for
(``controls``: ``aa``, ``placebo``, ``matched``). A filter re-run plans only treatments, whose sources and
baselines are another campaign's solos; a chain plans hops that each read the previous hop's skill. The
simulated and LLM campaigns differ only in how their ids are spelled and in the simulated agent's seeds.

The fingerprint hashes what decides the measurements — the problem definitions' source, the verifier
protocol's parameters, the normalized configuration — so a resume can refuse to mix results across a change
of any of them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mkbsim.campaigns._attempt import PlannedAttempt
from mkbsim.campaigns._controls import CONTROLS, donor_order
from mkbsim.errors import UserError
from mkbsim.metrics._rules import DIRECTIONS

if TYPE_CHECKING:
    from mkbsim.verifier import Protocol

SOLO = {"cutedsl": "solo_cutedsl", "tirx": "solo_tirx"}

#: Spells an attempt's id from (campaign id, model, problem, arm, replicate).
AttemptIds = Callable[[str, str, str, str, int], str]
#: The simulated agent's seed of an attempt from (model, problem, arm, replicate).
Seeds = Callable[[str, str, str, int], int]


@dataclass(frozen=True)
class Plan:
    """A campaign's attempts in plan order (ready attempts start in this order; each starts once the attempts it
    reads have finished), the configuration ``CampaignStarted`` records, and the fingerprint's parts."""

    campaign_id: str
    config: dict[str, Any]
    parts: dict[str, str]  # the fingerprint's components, to say which one changed
    attempts: tuple[PlannedAttempt, ...]

    @property
    def fingerprint(self) -> str:
        return sha256_json(self.parts)

    def count_by_arm(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for a in self.attempts:
            counts[a.arm] = counts.get(a.arm, 0) + 1
        return counts


def fingerprint_parts(problems: Sequence[str], protocol: str | Protocol, measured: Any) -> dict[str, str]:
    """The fingerprint's parts: the selected problems' definitions, the verifier protocol's parameters and
    ``measured``, the normalized configuration (what decides the measurements, not how many run at once)."""
    from mkbsim.catalog import load_catalog
    from mkbsim.verifier import resolve_protocol

    catalog = {p.id: p for p in load_catalog()}
    sources = hashlib.sha256()
    for pid in problems:
        sources.update(f"{pid}\n".encode() + catalog[pid].path.read_bytes())
    return {
        "problem_definitions": sources.hexdigest(),
        "verifier_protocol": resolve_protocol(protocol).hash,
        "config": sha256_json(measured),
    }


def transfer_attempts(
    campaign_id: str,
    models: Sequence[str],
    problems: Sequence[tuple[str, str]],
    *,
    replicates: int,
    directions: Sequence[str],
    controls: Sequence[str] = (),
    filter: str | None = None,
    ids: AttemptIds,
    seeds: Seeds,
    donor_seed: object,
) -> tuple[PlannedAttempt, ...]:
    """The transfer protocol's attempts over ``problems`` ((id, family) pairs), in plan order: per model,
    problem and replicate both solos (each is one direction's source and the other's baseline), then per
    direction its treatment and the asked-for control arms, each paired with the treatment's baseline."""
    unknown = sorted(set(controls) - set(CONTROLS))
    if unknown:
        raise UserError(f"unknown control arm {unknown[0]!r}; use {', '.join(CONTROLS)}")
    families: dict[str, list[str]] = {}
    for pid, family in problems:
        families.setdefault(family, []).append(pid)
    if "placebo" in controls:
        alone = [(f, ps[0]) for f, ps in families.items() if len(ps) < 2]
        if alone:
            family, pid = alone[0]
            raise UserError(f"controls: a placebo reads another problem's skill of the same family, but {pid} is "
                            f"the campaign's only {family} problem; add another or drop the placebo")  # fmt: skip
    out: list[PlannedAttempt] = []
    for model in models:
        for pid, family in problems:
            for rep in range(replicates):
                solo = {dsl: ids(campaign_id, model, pid, arm, rep) for dsl, arm in SOLO.items()}
                out += [PlannedAttempt(solo[dsl], model, pid, family, dsl, arm, rep, seeds(model, pid, arm, rep))
                        for dsl, arm in SOLO.items()]  # fmt: skip
                for direction in directions:
                    source, target = DIRECTIONS[direction]
                    reads: dict[str, dict[str, Any]] = {"skill": {"source": solo[source]}}
                    if "aa" in controls:
                        reads["aa"] = {}
                    if "placebo" in controls:
                        order = donor_order(donor_seed, model, pid, rep, direction, [q for q in families[family]
                                                                                     if q != pid])  # fmt: skip
                        donors = tuple((q, ids(campaign_id, model, q, SOLO[source], rep)) for q in order)
                        reads["placebo"] = {"source": solo[source], "donors": donors}
                    if "matched" in controls:
                        reads["matched"] = {"source": solo[source], "neutral_note": True}
                    for kind, read in reads.items():
                        arm = f"{direction}_{kind}"
                        out.append(PlannedAttempt(ids(campaign_id, model, pid, arm, rep), model, pid, family, target,
                                                  arm, rep, seeds(model, pid, arm, rep), baseline=solo[target],
                                                  filter=filter, **read))  # fmt: skip
    return tuple(out)


def sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
