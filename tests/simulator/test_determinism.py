"""Same configuration and seed → byte-identical event payloads; ids are derived, never random."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from mkbsim.campaigns import CampaignSummary, SimCampaign, SkillTransform, rerun_campaign, run_campaign
from mkbsim.events import EventStore, NewEvent
from mkbsim.simulator import CampaignConfig, attempt_id, get_profile, select_problems, simulate


def _config(seed: int) -> CampaignConfig:
    profiles = (get_profile("sim-glm-5.3-flash"), get_profile("sim-qwen3.8-flash"))
    return CampaignConfig(profiles, tuple(select_problems("p02,p21,p36,p47,p55,p69")), replicates=2, seed=seed)


def _digest(events: Iterable[NewEvent]) -> str:
    h = hashlib.sha256()
    for ev in events:
        h.update(f"{ev.stream_id}\x1f{ev.type}\x1f".encode())
        h.update(json.dumps(ev.payload, sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


def _simulated(config: CampaignConfig) -> list[NewEvent]:
    return [ev for _, outcome in simulate(config) for ev in outcome.events]


def test_same_seed_gives_byte_identical_payloads_and_another_seed_does_not() -> None:
    first, again, other = _simulated(_config(11)), _simulated(_config(11)), _simulated(_config(12))
    assert _digest(first) == _digest(again)
    assert _digest(first) != _digest(other)
    assert _config(11).campaign_id == _config(11).campaign_id != _config(12).campaign_id


def test_stored_payloads_are_the_simulated_ones(tmp_path: Path) -> None:
    config = _config(11)
    with EventStore(tmp_path / "a.sqlite", create=True) as store:
        run_campaign(store, SimCampaign(config))
        stored = [NewEvent(ev.stream_id, ev.type, ev.payload) for ev in store.read()
                  if ev.stream_id.startswith("attempt-")]  # fmt: skip
    # attempts run in parallel end in any order; each attempt's events keep theirs
    assert _digest(sorted(stored, key=lambda e: e.stream_id)) == _digest(
        sorted(_simulated(config), key=lambda e: e.stream_id)
    )
    start = stored[0].payload
    assert start["attempt_id"] == attempt_id(config.campaign_id, start["model"], start["problem"], start["arm"],
                                             start["replicate"])  # fmt: skip


def test_a_campaign_is_recorded_once_per_store(tmp_path: Path) -> None:
    config = _config(11)
    with EventStore(tmp_path / "a.sqlite", create=True) as store:
        run_campaign(store, SimCampaign(config))
        attempts = store.count("AttemptStarted")
        again = run_campaign(store, SimCampaign(config))
        assert store.count("AttemptStarted") == attempts  # nothing ran twice
    assert again.already_finished and again.campaign_id == config.campaign_id and again.ran == 0


def test_an_identity_rerun_reproduces_every_treatment_outcome(campaign_copy: tuple[Path, CampaignSummary]) -> None:
    """Reruns reuse the original treatments' seeds: with the skill unchanged nothing else can differ."""
    path, summary = campaign_copy
    with EventStore(path) as store:
        identity = SkillTransform("identity", lambda text: text)
        rerun = run_campaign(store, rerun_campaign(store, summary.campaign_id, "identity"), skill_filter=identity)
        finishes: dict[str, dict[tuple[str, str, str, int], tuple[object, ...]]] = {}
        starts = {}
        for ev in store.read(types=["AttemptStarted", "AttemptFinished"]):
            if ev.type == "AttemptStarted":
                starts[ev.payload["attempt_id"]] = ev.payload
                continue
            s = starts[ev.payload["attempt_id"]]
            key = (s["model"], s["problem"], s["arm"], s["replicate"])
            outcome = (ev.payload["passed"], ev.payload["runtime_ms"], ev.payload["skipped"])
            finishes.setdefault(s["campaign_id"], {})[key] = outcome
    original, again = finishes[summary.campaign_id], finishes[rerun.campaign_id]
    assert len(again) == rerun.attempts == summary.attempts // 2
    assert all(original[key] == outcome for key, outcome in again.items())
    rerun_starts = [s for s in starts.values() if s["campaign_id"] == rerun.campaign_id]
    assert all(s["filter"] == "identity" and s["baseline_attempt_id"] for s in rerun_starts)
