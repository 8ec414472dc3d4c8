"""Simulated campaigns: profiles × problems × 4 arms × replicates, seeded, appended to an event store.

Ids are derived, never random: the campaign id from the configuration and seed, each attempt id from
the campaign id and the attempt's place (model, problem, arm, replicate), each attempt's seed from the
campaign seed and that place. Same configuration and seed → byte-identical event payloads.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from mkbsim.catalog import SKILL_HEADER
from mkbsim.errors import UserError
from mkbsim.events import CampaignFinished, CampaignStarted, EventStore, NewEvent, campaign_stream
from mkbsim.simulator._attempt import AttemptResult, AttemptSpec, simulate_attempt
from mkbsim.simulator._design import DESIGN_FILE
from mkbsim.simulator._profiles import AgentProfile, parameter_names
from mkbsim.simulator._rng import seed_of
from mkbsim.simulator._spaces import all_design_spaces

ARMS = ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")
ARM_DSL = {
    "solo_cutedsl": "cutedsl",
    "solo_tirx": "tirx",
    "cutedsl2tirx_skill": "tirx",
    "tirx2cutedsl_skill": "cutedsl",
}
SOURCE_ARM = {"cutedsl2tirx_skill": "solo_cutedsl", "tirx2cutedsl_skill": "solo_tirx"}
BASELINE_ARM = {"cutedsl2tirx_skill": "solo_tirx", "tirx2cutedsl_skill": "solo_cutedsl"}
BATCH_EVENTS = 5000  # events per store transaction


class CampaignExists(UserError):
    """The store already holds this campaign (same configuration and seed)."""

    def __init__(self, campaign_id: str, finished: bool) -> None:
        state = "finished" if finished else "unfinished (interrupted?)"
        super().__init__(
            f"campaign {campaign_id} is already in the store, {state}; change --seed or use another --store"
        )
        self.campaign_id = campaign_id
        self.finished = finished


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
        return _campaign_id(self.as_dict())


@dataclass(frozen=True)
class SlotResult:
    """The attempts of one (profile, problem, replicate): two solos and the two skill-conditioned ones."""

    profile: AgentProfile
    problem: str
    replicate: int
    attempts: dict[str, tuple[AttemptSpec, AttemptResult]]


@dataclass(frozen=True)
class CampaignSummary:
    campaign_id: str
    attempts: int
    events: int
    counts: dict[str, Any]


def attempt_id(campaign_id: str, model: str, problem: str, arm: str, replicate: int) -> str:
    return hashlib.sha256(f"{campaign_id}|{model}|{problem}|{arm}|{replicate}".encode()).hexdigest()[:24]


def attempt_seed(seed: int, model: str, problem: str, arm: str, replicate: int) -> int:
    return seed_of("mkbsim.simulator", seed, model, problem, arm, replicate)


def simulate_slots(config: CampaignConfig, campaign_id: str | None = None) -> Iterator[SlotResult]:
    """Every slot of ``config`` in order (profile, problem, replicate), without touching a store."""
    cid = campaign_id or config.campaign_id
    for profile in config.profiles:
        for problem in config.problems:
            for replicate in range(config.replicates):
                yield _simulate_slot(config, cid, profile, problem, replicate)


def _simulate_slot(config: CampaignConfig, cid: str, profile: AgentProfile, problem: str, replicate: int) -> SlotResult:
    attempts: dict[str, tuple[AttemptSpec, AttemptResult]] = {}
    for arm in ARMS:
        source = attempts.get(SOURCE_ARM.get(arm, ""))
        read = SourceSkill(source[0].attempt_id, source[1].skill, source[1].skill_labels) if source else None
        spec = attempt_spec(config, cid, profile, problem, arm, replicate, read)
        attempts[arm] = (spec, simulate_attempt(spec))
    return SlotResult(profile, problem, replicate, attempts)


@dataclass(frozen=True)
class SourceSkill:
    """What a skill-conditioned attempt receives from its source solo."""

    attempt_id: str
    text: str | None
    labels: dict[str, str]


def attempt_spec(
    config: CampaignConfig,
    cid: str,
    profile: AgentProfile,
    problem: str,
    arm: str,
    replicate: int,
    source: SourceSkill | None = None,
    skill_filter: str | None = None,
) -> AttemptSpec:
    """The attempt at one place of a campaign; a treatment reads ``source``'s skill (already passed through
    the skill filter named ``skill_filter``, if any)."""
    skill = source.text if source and source.text and source.text.strip() else None
    return AttemptSpec(
        attempt_id=attempt_id(cid, profile.name, problem, arm, replicate), campaign_id=cid, profile=profile,
        space=all_design_spaces(config.device)[problem], dsl=ARM_DSL[arm], arm=arm, replicate=replicate,
        seed=attempt_seed(config.seed, profile.name, problem, arm, replicate),
        skill=SKILL_HEADER + skill if skill else None,
        source_attempt_id=source.attempt_id if source else None,
        source_labels=source.labels if source else {}, filter=skill_filter,
    )  # fmt: skip


def skill_of_events(events: Iterable[tuple[str, dict[str, Any]]]) -> tuple[str | None, dict[str, str]]:
    """An attempt's skill text and its sentences' true categories, from its (type, payload) events."""
    text: str | None = None
    labels: dict[str, str] = {}
    for type_, p in events:
        if type_ == "SkillWritten":
            text = p["text"]
        elif type_ == "LabelAssigned" and p["subject"] == "skill":
            labels = {s["text"]: s["category"] for s in p["labels"]["sentences"]}
    return text, labels


def run_campaign(store: EventStore, config: CampaignConfig, *, progress: bool = False) -> CampaignSummary:
    """Simulate ``config`` and append every event to ``store`` (in batches), with an optional progress bar."""
    cid = config.campaign_id
    _refuse_existing(store, cid)
    total = len(config.profiles) * len(config.problems) * config.replicates * len(ARMS)
    ids = sorted(attempt_id(cid, p.name, pid, arm, r) for p in config.profiles for pid in config.problems
                 for r in range(config.replicates) for arm in ARMS)  # fmt: skip
    started = CampaignStarted(
        campaign_id=cid, config=config.as_dict(), plan_fingerprint=_fingerprint(ids), code_version=_code_version()
    )
    slots = (list(s.attempts.values()) for s in simulate_slots(config, cid))
    return _record(store, cid, started, slots, total, progress)


def rerun_treatments(
    store: EventStore,
    base_campaign_id: str,
    transform: Callable[[str], str],
    *,
    name: str,
    progress: bool = False,
) -> CampaignSummary:
    """Re-run the skill-conditioned attempts of a stored simulated campaign with transformed skills.

    Each source skill (the solo's SkillWritten text) is passed through ``transform`` (text → text) and
    read by a fresh treatment attempt with the original treatment's seed, so the same plan and try meet
    the same luck and only the skill differs. The new campaign records ``filter = name`` and pairs with
    the original campaign's solo baselines (``baseline_attempt_id``); its config links the original.
    """
    base = _stored_config(store, base_campaign_id)
    if base.get("kind") != "simulated":
        raise UserError(f"campaign {base_campaign_id} is not a simulated campaign; only those can be re-run here")
    profiles = tuple(_profile_from(n, d) for n, d in base["profiles"].items())
    config = CampaignConfig(profiles, tuple(base["problems"]), base["replicates"], base["seed"], base["device"])
    if base.get("design_sha256") != config.as_dict()["design_sha256"]:
        raise UserError(f"campaign {base_campaign_id} was simulated with other design data (design.toml changed "
                        "since); its treatments cannot be re-run against the same baselines")  # fmt: skip
    skills, labels = _stored_skills(store, base_campaign_id)
    as_dict = {"kind": "treatment_rerun", "base_campaign_id": base_campaign_id, "filter": name,
               **{k: v for k, v in base.items() if k != "kind"}}  # fmt: skip
    cid = _campaign_id(as_dict)
    _refuse_existing(store, cid)
    specs: list[AttemptSpec] = []
    for profile, problem, replicate, arm in itertools.product(
        profiles, config.problems, range(config.replicates), SOURCE_ARM
    ):
        source = attempt_id(base_campaign_id, profile.name, problem, SOURCE_ARM[arm], replicate)
        skill = skills.get(source)
        filtered = transform(skill) if skill else None
        specs.append(AttemptSpec(
            attempt_id=attempt_id(cid, profile.name, problem, arm, replicate), campaign_id=cid, profile=profile,
            space=all_design_spaces(config.device)[problem], dsl=ARM_DSL[arm], arm=arm, replicate=replicate,
            seed=attempt_seed(config.seed, profile.name, problem, arm, replicate),
            skill=SKILL_HEADER + filtered if filtered and filtered.strip() else None, source_attempt_id=source,
            baseline_attempt_id=attempt_id(base_campaign_id, profile.name, problem, BASELINE_ARM[arm], replicate),
            filter=name, source_labels=labels.get(source, {}),
        ))  # fmt: skip
    started = CampaignStarted(
        campaign_id=cid,
        config=as_dict,
        plan_fingerprint=_fingerprint(sorted(s.attempt_id for s in specs)),
        code_version=_code_version(),
    )
    groups = ([(spec, simulate_attempt(spec))] for spec in specs)
    return _record(store, cid, started, groups, len(specs), progress)


def _record(
    store: EventStore,
    cid: str,
    started: CampaignStarted,
    groups: Iterator[list[tuple[AttemptSpec, AttemptResult]]],
    total: int,
    progress: bool,
) -> CampaignSummary:
    stream = campaign_stream(cid)
    pending = [NewEvent.of(stream, started)]
    events = attempts = skipped = skills = 0
    passed: dict[str, int] = dict.fromkeys(ARMS, 0)
    with _progress_bar(total, progress, cid) as advance:
        for group in groups:
            for spec, result in group:
                pending.extend(result.events)
                attempts += 1
                skipped += result.skipped
                skills += result.skill is not None
                passed[spec.arm] += result.passed
                advance()
            if len(pending) >= BATCH_EVENTS:
                events += len(pending)
                store.append(pending)
                pending = []
        events += len(pending) + 1
        counts = {"attempts": attempts, "events": events, "passed": passed, "skipped": skipped,
                  "skills_written": skills}  # fmt: skip
        pending.append(NewEvent.of(stream, CampaignFinished(campaign_id=cid, counts=counts)))
        store.append(pending)
    return CampaignSummary(cid, attempts, events, counts)


@contextlib.contextmanager
def _progress_bar(total: int, enabled: bool, cid: str) -> Iterator[Callable[[], None]]:
    if not enabled:
        yield lambda: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(f"simulating {cid}", total=total)
        yield lambda: bar.advance(task)


def _refuse_existing(store: EventStore, cid: str) -> None:
    stream = campaign_stream(cid)
    if store.stream_version(stream):
        finished = any(ev.type == "CampaignFinished" for ev in store.read(stream_id=stream))
        raise CampaignExists(cid, finished)


def _stored_config(store: EventStore, cid: str) -> dict[str, Any]:
    for ev in store.read(stream_id=campaign_stream(cid)):
        if ev.type == "CampaignStarted":
            config: dict[str, Any] = ev.payload["config"]
            return config
    raise UserError(f"no campaign {cid!r} in {store.path}")


def _stored_skills(store: EventStore, cid: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Skill texts written by the campaign's attempts, and their sentences' true categories, by attempt id."""
    ids = {ev.payload["attempt_id"] for ev in store.read(types=["AttemptStarted"]) if ev.payload["campaign_id"] == cid}
    by_attempt: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for ev in store.read(types=["SkillWritten", "LabelAssigned"]):
        subject = ev.payload["attempt_id"] if ev.type == "SkillWritten" else ev.payload["subject_id"]
        if subject in ids:
            by_attempt.setdefault(subject, []).append((ev.type, ev.payload))
    texts: dict[str, str] = {}
    labels: dict[str, dict[str, str]] = {}
    for subject, events in by_attempt.items():
        text, sentence_labels = skill_of_events(events)
        if text is not None:
            texts[subject] = text
        if sentence_labels:
            labels[subject] = sentence_labels
    return texts, labels


def _profile_dict(p: AgentProfile) -> dict[str, Any]:
    return {"study_model": p.study_model, "description": p.description, **p.parameters()}


def _profile_from(name: str, data: dict[str, Any]) -> AgentProfile:
    return AgentProfile(name=name, study_model=data["study_model"], description=data["description"],
                        **{k: float(data[k]) for k in parameter_names()})  # fmt: skip


def _campaign_id(config: dict[str, Any]) -> str:
    text = json.dumps({"config": config, "code_version": _code_version()}, sort_keys=True, separators=(",", ":"))
    return "sim-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _fingerprint(attempt_ids: list[str]) -> str:
    return hashlib.sha256("\n".join(attempt_ids).encode()).hexdigest()


def _code_version() -> str:
    from mkbsim import __version__

    return f"mkbsim {__version__}"
