"""The simulator's side of a campaign: its configuration, its ids and seeds, and ``SimulatedRunner``, the
``AttemptRunner`` of simulated campaigns (``mkbsim.campaigns`` runs them: ``run_campaign`` into a store,
``simulate`` in memory).

Ids are derived, never random: the campaign id from the configuration and seed, each attempt id from
the campaign id and the attempt's place (model, problem, arm, replicate), each attempt's seed from the
campaign seed and that place. Same configuration and seed → byte-identical event payloads.
"""

from __future__ import annotations

import hashlib
import json
import traceback
from dataclasses import dataclass
from typing import Any

from mkbsim.campaigns import AttemptOutcome, AttemptTask, PlannedAttempt, SimCampaign, simulate_plan
from mkbsim.events import AgentStep, AttemptFinished, AttemptStarted, NewEvent, attempt_stream
from mkbsim.simulator._attempt import simulate_attempt
from mkbsim.simulator._design import DESIGN_FILE
from mkbsim.simulator._profiles import AgentProfile, parameter_names
from mkbsim.simulator._rng import seed_of
from mkbsim.simulator._spaces import all_design_spaces

ARMS = ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")


@dataclass(frozen=True)
class CampaignConfig:
    profiles: tuple[AgentProfile, ...]
    problems: tuple[str, ...]
    replicates: int = 1
    seed: int = 0
    device: str = "h200"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": "simulated",
            "seed": self.seed,
            "replicates": self.replicates,
            "device": self.device,
            # the design data shapes every runtime: a changed design.toml is a different campaign
            "design_sha256": hashlib.sha256(DESIGN_FILE.read_bytes()).hexdigest(),
            "problems": list(self.problems),
            "profiles": {p.name: _profile_dict(p) for p in self.profiles},
        }

    @property
    def campaign_id(self) -> str:
        from mkbsim.campaigns._recorder import code_version

        text = json.dumps({"config": self.as_dict(), "code_version": code_version()}, sort_keys=True,
                          separators=(",", ":"))  # fmt: skip
        return "sim-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def attempt_id(campaign_id: str, model: str, problem: str, arm: str, replicate: int) -> str:
    return hashlib.sha256(f"{campaign_id}|{model}|{problem}|{arm}|{replicate}".encode()).hexdigest()[:24]


def attempt_seed(seed: int, model: str, problem: str, arm: str, replicate: int) -> int:
    return seed_of("mkbsim.simulator", seed, model, problem, arm, replicate)


@dataclass(frozen=True)
class SimulatedRunner:
    """Simulated attempts of ``config``'s profiles on its device's design spaces. Each outcome carries all the
    attempt's events; a fault of the simulator ends its attempt ``infra_error`` (with the traceback as a note)
    instead of the campaign."""

    config: CampaignConfig

    def __call__(self, tasks: list[AttemptTask]) -> list[AttemptOutcome]:
        profiles = {p.name: p for p in self.config.profiles}
        spaces = all_design_spaces(self.config.device)
        out = []
        for task in tasks:
            try:
                out.append(simulate_attempt(task, profiles[task.attempt.model], spaces[task.attempt.problem]))
            except Exception as exc:
                out.append(_internal_error(task, exc))
        return out


def _internal_error(task: AttemptTask, exc: Exception) -> AttemptOutcome:
    reason = f"internal error: {type(exc).__name__}: {exc}"
    stream = attempt_stream(task.attempt_id)
    note = AgentStep(attempt_id=task.attempt_id, step=0, kind="note", content=traceback.format_exc(), elapsed_s=0.0)
    end = AttemptFinished(attempt_id=task.attempt_id, status="infra_error", passed=False, runtime_ms=None,
                          speedup=None, skipped=False, reason=reason)  # fmt: skip
    events = (NewEvent(stream, AttemptStarted.TYPE, task.started()), NewEvent.of(stream, note),
              NewEvent.of(stream, end))  # fmt: skip
    return AttemptOutcome(task.attempt_id, "infra_error", False, None, None, False, reason, None, events=events)


def simulate(campaign: CampaignConfig | SimCampaign) -> list[tuple[PlannedAttempt, AttemptOutcome]]:
    """Every attempt of a simulated campaign with its outcome, simulated in this process without a store."""
    definition = campaign if isinstance(campaign, SimCampaign) else SimCampaign(campaign, workers=1)
    cid = definition.campaign_id
    return list(simulate_plan(cid, definition.attempts(cid), SimulatedRunner(definition.sim)))


def profile_from_config(name: str, data: dict[str, Any]) -> AgentProfile:
    """A profile as a campaign's ``CampaignStarted`` config recorded it."""
    return AgentProfile(name=name, study_model=data["study_model"], description=data["description"],
                        **{k: float(data[k]) for k in parameter_names()})  # fmt: skip


def _profile_dict(p: AgentProfile) -> dict[str, Any]:
    return {"study_model": p.study_model, "description": p.description, **p.parameters()}
