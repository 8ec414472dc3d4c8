"""Simulated campaigns: their definition (``SimCampaign``, from a campaign file or `mkbsim run` options), their
plans, and where their attempts run.

One definition covers every variant a simulated campaign has: the transfer protocol (``directions``,
``controls``, a ``filter`` every transferred skill goes through), ``chain = K`` (multi-hop chains instead of
the transfer protocol) and a filter re-run of a stored campaign's treatments (``rerun_of``). The simulator
(``mkbsim.simulator``) provides the attempts' runner, ``SimulatedRunner``; it is imported only where a
campaign plans or runs (it loads the problem catalogue).

LLM campaign files (``kind = "llm"``, the default) are read by ``mkbsim.agents.load_llm_campaign``;
``campaign_kind`` tells the two apart.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkbsim.campaigns._attempt import PlannedAttempt
from mkbsim.campaigns._controls import CONTROLS
from mkbsim.campaigns._executors import Executor, LocalExecutor, RayExecutor
from mkbsim.campaigns._lifecycle import Execution, guarded
from mkbsim.campaigns._plan import SOLO, Plan, fingerprint_parts, transfer_attempts
from mkbsim.campaigns._toml import Table, read_toml
from mkbsim.errors import UserError
from mkbsim.events import EventStore
from mkbsim.metrics._rules import DIRECTIONS

if TYPE_CHECKING:
    from mkbsim.simulator import CampaignConfig

KINDS = ("simulated", "llm")
PROTOCOLS = ("paper", "hardened")
MAX_CHUNK = 16  # simulated attempts per task at most: a task's overhead would dominate a single one


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@dataclass(frozen=True)
class Rerun:
    """The stored campaign whose treatments a filter re-run runs again, as its ``CampaignStarted`` recorded it."""

    campaign_id: str
    config: dict[str, Any]


@dataclass(frozen=True)
class SimCampaign:
    """A simulated campaign: the simulator's configuration plus the campaign-level choices."""

    sim: CampaignConfig
    directions: tuple[str, ...] = tuple(DIRECTIONS)
    protocol: str = "paper"
    workers: int = field(default_factory=default_workers)  # attempts running at once (decides nothing measured)
    filter: str | None = None
    chain: int | None = None
    controls: tuple[str, ...] = ()
    rerun_of: Rerun | None = None

    def __post_init__(self) -> None:
        if self.chain is not None and (self.filter is not None or set(self.directions) != set(DIRECTIONS)
                                       or self.controls):  # fmt: skip
            raise UserError("campaign.chain: a chain alternates both DSLs from both starts and reads skills "
                            "verbatim; it takes neither `filter`, `controls` nor a subset of `directions`")  # fmt: skip

    def normalized(self) -> dict[str, Any]:
        """What defines the campaign's measurements (how many attempts run at once does not)."""
        extra = {k: v for k, v in (("directions", list(self.directions)), ("filter", self.filter),
                                   ("chain", self.chain), ("controls", list(self.controls)))
                 if v not in (None, list(DIRECTIONS), [])}  # fmt: skip
        return {**self.sim.as_dict(), "protocol": self.protocol, **extra}

    def recorded_config(self) -> dict[str, Any]:
        """The configuration ``CampaignStarted`` records."""
        if self.rerun_of is not None:
            base = {k: v for k, v in self.rerun_of.config.items() if k != "kind"}
            return {"kind": "treatment_rerun", "base_campaign_id": self.rerun_of.campaign_id, "filter": self.filter,
                    **base}  # fmt: skip
        if self.chain is not None:
            return {**self.sim.as_dict(), "kind": "simulated_chain", "hops": self.chain}
        return self.normalized()

    @property
    def campaign_id(self) -> str:
        """Derived from what the campaign measures: the simulator's id for its plain campaign (so `mkbsim run`
        keeps its ids), extended by every other choice."""
        if self.rerun_of is not None:
            from mkbsim.campaigns._recorder import code_version

            return "sim-" + _short_hash({"config": self.recorded_config(), "code_version": code_version()})
        if self.chain is not None:
            return "chain-" + _short_hash(self.recorded_config())
        extra = {k: v for k, v in self.normalized().items() if k not in self.sim.as_dict()}
        if extra == {"protocol": "paper"}:
            return self.sim.campaign_id
        return "sim-" + hashlib.sha256(json.dumps({"base": self.sim.campaign_id, **extra}, sort_keys=True).encode()
                                       ).hexdigest()[:16]  # fmt: skip

    def attempts(self, campaign_id: str | None = None) -> tuple[PlannedAttempt, ...]:
        """The planned attempts (no fingerprint: for simulating in memory, e.g. calibration)."""
        cid = campaign_id or self.campaign_id
        if self.rerun_of is not None:
            return self._rerun_attempts(cid, self.rerun_of.campaign_id)
        if self.chain is not None:
            return self._chain_attempts(cid, self.chain)
        from mkbsim.simulator import attempt_id, attempt_seed

        seed = self.sim.seed
        return transfer_attempts(
            cid, [p.name for p in self.sim.profiles], self._problems(), replicates=self.sim.replicates,
            directions=self.directions, controls=self.controls, filter=self.filter, ids=attempt_id,
            seeds=lambda model, problem, arm, rep: attempt_seed(seed, model, problem, arm, rep), donor_seed=seed,
        )  # fmt: skip

    def plan(self, campaign_id: str | None = None) -> Plan:
        parts = fingerprint_parts(self.sim.problems, self.protocol, self.recorded_config())
        return Plan(campaign_id or self.campaign_id, self.recorded_config(), parts, self.attempts(campaign_id))

    @contextmanager
    def execution(self, store: EventStore, executor: str, ray_address: str | None) -> Iterator[Execution]:
        """Simulated attempts in a process pool (forked once the design spaces are loaded, so every worker
        starts with them) or as Ray tasks; each task a chunk of attempts, their events handed back."""
        from mkbsim.simulator import SimulatedRunner, all_design_spaces

        all_design_spaces(self.sim.device)
        runner = guarded(SimulatedRunner(self.sim))
        dispatch: Executor = (RayExecutor(runner, self.workers, ray_address, str(store.path)) if executor == "ray"
                              else LocalExecutor(runner, self.workers))  # fmt: skip
        yield Execution(dispatch, workers=self.workers, at_once=4 * self.workers, chunk=MAX_CHUNK)

    def _problems(self) -> list[tuple[str, str]]:
        from mkbsim.simulator import all_design_spaces

        spaces = all_design_spaces(self.sim.device)
        return [(pid, spaces[pid].family) for pid in self.sim.problems]

    def _chain_attempts(self, cid: str, hops: int) -> tuple[PlannedAttempt, ...]:
        """Per (profile, problem, replicate) both plain solos (every hop's baselines), then one chain per starting
        DSL: hop 0 is the solo in that DSL, hop k an attempt in the other DSL than hop k-1 reading its skill."""
        from mkbsim.simulator import attempt_seed, chain_attempt_id, chain_seed

        seed, out = self.sim.seed, list[PlannedAttempt]()
        for profile in self.sim.profiles:
            name = profile.name
            for pid, family in self._problems():
                for rep in range(self.sim.replicates):
                    solo = {dsl: PlannedAttempt(chain_attempt_id(cid, name, pid, arm, 0, rep), name, pid, family, dsl,
                                                arm, rep, attempt_seed(seed, name, pid, arm, rep))
                            for dsl, arm in SOLO.items()}  # fmt: skip
                    out += solo.values()
                    for start in SOLO:
                        previous = solo[start]
                        for hop in range(1, hops + 1):
                            target = _other(previous.dsl)
                            previous = PlannedAttempt(
                                chain_attempt_id(cid, name, pid, start, hop, rep), name, pid, family, target,
                                f"{previous.dsl}2{target}_skill", rep, chain_seed(seed, name, pid, start, hop, rep),
                                source=previous.attempt_id, baseline=solo[target].attempt_id, names_baseline=True,
                                chain_id=f"{cid}:{name}:{pid}:{rep}:{start}", hop=hop,
                            )  # fmt: skip
                            out.append(previous)
        return tuple(out)

    def _rerun_attempts(self, cid: str, base: str) -> tuple[PlannedAttempt, ...]:
        """The base campaign's treatments again, each reading its original source's skill through the filter with
        the original's seed (so only the skill differs), compared with the original's baseline."""
        from mkbsim.simulator import attempt_id, attempt_seed

        out = []
        directions = self.rerun_of.config.get("directions", list(DIRECTIONS)) if self.rerun_of else []
        for profile in self.sim.profiles:
            for pid, family in self._problems():
                for rep in range(self.sim.replicates):
                    for direction in (d for d in DIRECTIONS if d in directions):
                        source, target = DIRECTIONS[direction]
                        arm = f"{direction}_skill"
                        out.append(PlannedAttempt(
                            attempt_id(cid, profile.name, pid, arm, rep), profile.name, pid, family, target, arm, rep,
                            attempt_seed(self.sim.seed, profile.name, pid, arm, rep),
                            source=attempt_id(base, profile.name, pid, SOLO[source], rep),
                            baseline=attempt_id(base, profile.name, pid, SOLO[target], rep), names_baseline=True,
                            filter=self.filter,
                        ))  # fmt: skip
        return tuple(out)


def rerun_campaign(store: EventStore, base_campaign_id: str, filter_name: str, *, workers: int | None = None
                   ) -> SimCampaign:  # fmt: skip
    """A re-run of a stored simulated campaign's treatments with every source skill through the filter named
    ``filter_name``, against the same solo baselines (run it with ``run_campaign``, giving the filter)."""
    from mkbsim.simulator import CampaignConfig, profile_from_config

    config = _stored_config(store, base_campaign_id)
    if config.get("kind") != "simulated":
        raise UserError(f"campaign {base_campaign_id} is not a simulated campaign; only those can be re-run here")
    profiles = tuple(profile_from_config(name, data) for name, data in config["profiles"].items())
    sim = CampaignConfig(profiles, tuple(config["problems"]), config["replicates"], config["seed"], config["device"])
    if config.get("design_sha256") != sim.as_dict()["design_sha256"]:
        raise UserError(f"campaign {base_campaign_id} was simulated with other design data (design.toml changed "
                        "since); its treatments cannot be re-run against the same baselines")  # fmt: skip
    return SimCampaign(sim, protocol=config.get("protocol", "paper"), workers=workers or default_workers(),
                       filter=filter_name, rerun_of=Rerun(base_campaign_id, config))  # fmt: skip


def _stored_config(store: EventStore, campaign_id: str) -> dict[str, Any]:
    from mkbsim.events import campaign_stream

    for ev in store.read_stream(campaign_stream(campaign_id)):
        if ev.type == "CampaignStarted":
            config: dict[str, Any] = ev.payload["config"]
            return config
    raise UserError(f"no campaign {campaign_id!r} in {store.path}")


def _other(dsl: str) -> str:
    return "tirx" if dsl == "cutedsl" else "cutedsl"


def _short_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def campaign_kind(path: Path) -> str:
    raw = read_toml(path)
    top = raw.get("campaign")
    kind = top.get("kind", "llm") if isinstance(top, dict) else "llm"
    if kind not in KINDS:
        Table(path, "campaign", {}, ()).fail("kind", f"use {' or '.join(KINDS)}, got {kind!r}")
    return str(kind)


def load_simulated_campaign(path: str | os.PathLike[str]) -> SimCampaign:
    """Read and check a simulated campaign file."""
    from mkbsim.simulator import CampaignConfig, get_profile, select_problems, shipped_profiles

    file = Path(path)
    raw = read_toml(file)
    top = Table(file, "", raw, ("campaign", "agents", "verifier", "limits", "budget"))
    c = Table(file, "campaign", top.get("campaign", dict, required=True), (
        "kind", "problems", "directions", "replicates", "seed", "filter", "chain", "controls",
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
    controls = read_controls(c)

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
    workers = lim.positive("agents", default_workers(), integer=True)

    b = Table(file, "budget", top.get("budget", dict, {}), ("minutes", "submissions"))
    for key, study in (("minutes", 40), ("submissions", 10)):
        if b.positive(key, study, integer=True) != study:
            b.fail(key, f"the simulator models the study's budget ({study}); got {b.data[key]}")

    sim = CampaignConfig(profiles, problem_ids, c.positive("replicates", 1, integer=True), seed)
    return SimCampaign(sim, tuple(directions), protocol, workers, c.get("filter", str), chain, controls)


def read_controls(table: Table) -> tuple[str, ...]:
    """A campaign file's ``controls``: control arm names (DESIGN §4; a list, or one comma-separated string),
    each once, in the order of ``CONTROLS``."""
    raw = table.get("controls", (list, str), [])
    names = [n.strip() for n in raw.split(",") if n.strip()] if isinstance(raw, str) else raw
    bad = [n for n in names if n not in CONTROLS]
    if bad:
        table.fail("controls", f"use {', '.join(CONTROLS)}; got {bad[0]!r}")
    return tuple(n for n in CONTROLS if n in names)
