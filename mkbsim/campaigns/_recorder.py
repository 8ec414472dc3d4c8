"""The one place a campaign's events are written: ``CampaignStarted`` (emitted nowhere else), the events of
the attempts its runners hand back — appended in batches through the executor, so a killed run never leaves
half an attempt behind — and ``CampaignFinished``. A runner that records as it goes (an LLM attempt, so
monitors see it live) appends its attempt's stream through the event log the execution gave it.

Reading back: the latest finished try of every planned attempt, and of the attempts of other campaigns a
plan names, with the skill each wrote — what a resume keeps and what the attempts still to run read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mkbsim.campaigns._attempt import AttemptOutcome, SkillText
from mkbsim.campaigns._executors import Executor
from mkbsim.campaigns._plan import Plan
from mkbsim.errors import UserError
from mkbsim.events import CampaignFinished, CampaignStarted, EventStore, NewEvent, campaign_stream

BATCH_EVENTS = 5000  # events per store transaction at most
FLUSH_S = 0.25  # and at least this often while attempts finish


def code_version() -> str:
    from mkbsim._version import __version__

    return f"mkbsim {__version__}"


@dataclass(frozen=True)
class Earlier:
    """What a resume finds of an attempt whose latest try finished."""

    outcome: AttemptOutcome
    skill: SkillText


class CampaignRecorder:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.appended = 0
        self._buffer: list[NewEvent] = []
        self._last_flush = time.monotonic()
        self._executor: Executor | None = None

    # -- the campaign's stream ------------------------------------------------------------------

    def start(self, plan: Plan, replan: Callable[[str], Plan], *, new_campaign: bool) -> Plan:
        """Record ``CampaignStarted`` for ``plan``, or find it recorded with the same fingerprint. A stored
        campaign planned differently is refused with what changed, unless ``new_campaign``: then the plan
        ``replan`` makes under an id suffixed with the new fingerprint runs as a campaign of its own."""
        started = self._started(plan.campaign_id)
        if started is not None and started["plan_fingerprint"] != plan.fingerprint:
            if not new_campaign:
                raise UserError(_changed(plan, started, str(self.store.path)))
            plan = replan(f"{plan.campaign_id}-{plan.fingerprint[:8]}")
            started = self._started(plan.campaign_id)
        if started is None:
            payload = CampaignStarted(campaign_id=plan.campaign_id, config=plan.config,
                                      plan_fingerprint=plan.fingerprint, code_version=code_version())  # fmt: skip
            event = NewEvent.of(campaign_stream(plan.campaign_id), payload)
            event.payload.update(fingerprint_parts=plan.parts, attempts=len(plan.attempts))
            self.store.append([event], expected_version=0)
            self.appended += 1
        return plan

    def finished_before(self, campaign_id: str) -> bool:
        return any(ev.type == CampaignFinished.TYPE for ev in self.store.read_stream(campaign_stream(campaign_id)))

    def finish(self, campaign_id: str, counts: dict[str, Any]) -> None:
        self.record([NewEvent.of(campaign_stream(campaign_id), CampaignFinished(campaign_id=campaign_id,
                                                                                counts=counts))])  # fmt: skip
        self.flush()

    def _started(self, campaign_id: str) -> dict[str, Any] | None:
        for ev in self.store.read_stream(campaign_stream(campaign_id)):
            if ev.type == CampaignStarted.TYPE:
                return ev.payload
        return None

    # -- attempts -------------------------------------------------------------------------------

    def earlier(self, ids: set[str]) -> dict[str, Earlier]:
        """The attempts among ``ids`` whose latest try finished, as the store holds them."""
        tries: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        finished: dict[str, Earlier] = {}
        for ev in self.store.read(types=["AttemptStarted", "SkillWritten", "LabelAssigned", "AttemptFinished"]):
            aid = ev.payload["subject_id"] if ev.type == "LabelAssigned" else ev.payload["attempt_id"]
            if aid not in ids:
                continue
            if ev.type == "AttemptStarted":
                tries[aid] = []
                finished.pop(aid, None)
            tries.setdefault(aid, []).append((ev.type, ev.payload))
            if ev.type == "AttemptFinished" and ev.payload["status"] == "finished":
                finished[aid] = _earlier(aid, tries[aid])
        return finished

    def attach(self, executor: Executor) -> None:
        """Append through ``executor`` from now on (a Ray run's writer actor)."""
        self.flush()
        self._executor = executor

    def record(self, events: Iterable[NewEvent]) -> None:
        self._buffer.extend(events)
        if len(self._buffer) >= BATCH_EVENTS or time.monotonic() - self._last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            if self._executor is not None:
                self._executor.append(self.store, self._buffer)
            else:
                self.store.append(self._buffer)
                self.appended += len(self._buffer)
            self._buffer = []
        self._last_flush = time.monotonic()

    def stats(self) -> tuple[int, float, float]:
        """Events appended so far, and the wall and CPU seconds the store spent on the executor's batches."""
        if self._executor is None:
            return self.appended, 0.0, 0.0
        events, wall, cpu = self._executor.appended()
        return self.appended + events, wall, cpu


def _earlier(attempt_id: str, events: list[tuple[str, dict[str, Any]]]) -> Earlier:
    end = events[-1][1]
    text: str | None = None
    labels: dict[str, str] = {}
    for type_, p in events:
        if type_ == "SkillWritten":
            text = p["text"]
        elif type_ == "LabelAssigned" and p["subject"] == "skill" and p.get("labeler") == "ground_truth":
            labels = {s["text"]: s["category"] for s in p["labels"]["sentences"]}
    outcome = AttemptOutcome(
        attempt_id, end["status"], bool(end["passed"]), end["runtime_ms"], end["speedup"], bool(end["skipped"]),
        end.get("reason"), text, labels, counted_submissions=end.get("counted_submissions", 0),
        tokens=end.get("tokens", 0), cost_usd=end.get("cost_usd", 0.0),
        network_isolated=end.get("network_isolated", False), infra_stall_s=end.get("infra_stall_s", 0.0),
    )  # fmt: skip
    return Earlier(outcome, SkillText(text, labels))


def _changed(plan: Plan, started: dict[str, Any], path: str) -> str:
    old = started.get("fingerprint_parts", {})
    changed = [k.replace("_", " ") for k, v in plan.parts.items() if old.get(k) != v] or ["the plan"]
    return (f"campaign {plan.campaign_id} in {path} has a different plan: fingerprint "
            f"{started['plan_fingerprint'][:12]} when it started, now {plan.fingerprint[:12]} ({', '.join(changed)} "
            "changed); its results would not be comparable — start a separate campaign (--new-campaign, or a new "
            "id in an LLM campaign file)")  # fmt: skip
