"""Simulated campaign configurations: from a TOML file (``examples/simulated.toml``) or `mkbsim run` options.

LLM campaign files (``kind = "llm"``, the default) are read by ``mkbsim.agents.load_llm_campaign``;
``campaign_kind`` tells the two apart.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkbsim.campaigns._toml import Table, read_toml
from mkbsim.metrics._rules import DIRECTIONS
from mkbsim.simulator import CampaignConfig, get_profile, select_problems, shipped_profiles

KINDS = ("simulated", "llm")
PROTOCOLS = ("paper", "hardened")


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@dataclass(frozen=True)
class Limits:
    agents: int = field(default_factory=default_workers)  # attempts running at once


@dataclass(frozen=True)
class SimCampaign:
    """A simulated campaign: the simulator's configuration plus the campaign-level choices."""

    sim: CampaignConfig
    directions: tuple[str, ...] = tuple(DIRECTIONS)
    protocol: str = "paper"
    limits: Limits = field(default_factory=Limits)
    filter: str | None = None
    chain: int | None = None

    def normalized(self) -> dict[str, Any]:
        """What defines the campaign's measurements (the concurrency limits do not)."""
        extra = {k: v for k, v in (("directions", list(self.directions)), ("filter", self.filter),
                                   ("chain", self.chain)) if v not in (None, list(DIRECTIONS))}  # fmt: skip
        return {**self.sim.as_dict(), "protocol": self.protocol, **extra}

    @property
    def campaign_id(self) -> str:
        """The simulator's id for its plain campaign (so `mkbsim run` keeps its ids); other choices extend it."""
        extra = {k: v for k, v in self.normalized().items() if k not in self.sim.as_dict()}
        if extra == {"protocol": "paper"}:
            return self.sim.campaign_id
        text = json.dumps({"base": self.sim.campaign_id, **extra}, sort_keys=True)
        return "sim-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def campaign_kind(path: Path) -> str:
    raw = read_toml(path)
    top = raw.get("campaign")
    kind = top.get("kind", "llm") if isinstance(top, dict) else "llm"
    if kind not in KINDS:
        Table(path, "campaign", {}, ()).fail("kind", f"use {' or '.join(KINDS)}, got {kind!r}")
    return str(kind)


def load_simulated_campaign(path: str | os.PathLike[str]) -> SimCampaign:
    """Read and check a simulated campaign file."""
    file = Path(path)
    raw = read_toml(file)
    top = Table(file, "", raw, ("campaign", "agents", "verifier", "limits", "budget"))
    c = Table(file, "campaign", top.get("campaign", dict, required=True), (
        "kind", "problems", "directions", "replicates", "seed", "filter", "chain",
    ))  # fmt: skip
    if c.get("kind", str, required=True) != "simulated":
        c.fail("kind", 'a simulated campaign file has kind = "simulated"')
    problems = ",".join(c.strings("problems", ["all"]))
    try:
        problem_ids = tuple(select_problems(problems))
    except Exception as exc:  # UserError from the catalogue: name the key
        c.fail("problems", str(exc))
    directions = c.strings("directions", list(DIRECTIONS))
    bad = [d for d in directions if d not in DIRECTIONS]
    if bad:
        c.fail("directions", f"use {', '.join(DIRECTIONS)}; got {bad[0]!r}")
    seed = c.get("seed", int, 0)
    if seed < 0:
        c.fail("seed", f"must be >= 0, got {seed}")
    chain = c.get("chain", int)
    if chain is not None and chain < 2:
        c.fail("chain", f"a chain has at least 2 hops, got {chain}")

    a = Table(file, "agents", top.get("agents", dict, {}), ("profiles",))
    names = a.strings("profiles", list(shipped_profiles()))
    try:
        profiles = tuple(get_profile(n) for n in dict.fromkeys(names))
    except Exception as exc:
        a.fail("profiles", str(exc))

    v = Table(file, "verifier", top.get("verifier", dict, {}), ("backend", "protocol"))
    if v.get("backend", str, "analytic") != "analytic":
        v.fail("backend", 'simulated agents are scored by the analytic verifier (backend = "analytic")')
    protocol = v.get("protocol", str, "paper")
    if protocol not in PROTOCOLS:
        v.fail("protocol", f"use {' or '.join(PROTOCOLS)}, got {protocol!r}")

    lim = Table(file, "limits", top.get("limits", dict, {}), ("agents",))
    limits = Limits(lim.positive("agents", default_workers(), integer=True))

    b = Table(file, "budget", top.get("budget", dict, {}), ("minutes", "submissions"))
    for key, study in (("minutes", 40), ("submissions", 10)):
        if b.positive(key, study, integer=True) != study:
            b.fail(key, f"the simulator models the study's budget ({study}); got {b.data[key]}")

    sim = CampaignConfig(profiles, problem_ids, c.positive("replicates", 1, integer=True), seed)
    return SimCampaign(sim, tuple(directions), protocol, limits, c.get("filter", str), chain)
