"""Control arms (DESIGN §4) in simulated campaigns: planned beside each treatment, run by the same simulated
agent reading text through the same reader, paired with the treatment's baseline, kept out of the reports of
the study's treatments."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from mkbsim.campaigns import AttemptTask, ConfigError, SimCampaign, load_simulated_campaign, run_campaign
from mkbsim.catalog import SKILL_HEADER
from mkbsim.claims import cues, segment, speedups
from mkbsim.cli import main
from mkbsim.errors import UserError
from mkbsim.events import EventStore
from mkbsim.projections import ProjectionEngine, default_projections
from mkbsim.simulator import CampaignConfig, SimulatedRunner, all_design_spaces, get_profile, select_problems
from mkbsim.simulator._phrasing import mentioned_plans

PROFILES = ("sim-glm-5.3-flash", "sim-gpt-5.6-sol")
PROBLEMS = "p28,p36,p45,p49"  # two problems in each of two families: every placebo has a donor
CONTROLS = ("aa", "placebo", "matched")


def _campaign(problems: str = PROBLEMS, seed: int = 5, controls: tuple[str, ...] = CONTROLS) -> SimCampaign:
    config = CampaignConfig(tuple(get_profile(p) for p in PROFILES), tuple(select_problems(problems)), seed=seed)
    return SimCampaign(config, workers=2, controls=controls)


@pytest.fixture(scope="module")
def controlled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimCampaign]:
    path = tmp_path_factory.mktemp("controls") / "events.sqlite"
    campaign = _campaign()
    with EventStore(path, create=True) as store:
        run_campaign(store, campaign)
        ProjectionEngine(store, default_projections()).catch_up()
    return path, campaign


def _events(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], dict[str, str]]:
    """AttemptStarted and SkillRead payloads, and the skills written, by attempt id."""
    with EventStore(path) as store:
        started = {e.payload["attempt_id"]: e.payload for e in store.read(types=["AttemptStarted"])}
        read = {e.payload["attempt_id"]: e.payload for e in store.read(types=["SkillRead"])}
        written = {e.payload["attempt_id"]: e.payload["text"] for e in store.read(types=["SkillWritten"])}
    return started, read, written


def test_controls_pair_with_the_treatments_baseline_and_reports_show_treatments_only(
    controlled: tuple[Path, SimCampaign], capsys: pytest.CaptureFixture[str]
) -> None:
    path, campaign = controlled
    started, _, _ = _events(path)
    with EventStore(path) as store:
        conn = store.connection
        key = "model, problem, replicate, direction"
        treatments = {row[:4]: row[4:] for row in conn.execute(
            f"SELECT {key}, arm, baseline_attempt_id, source_attempt_id FROM comparisons")}  # fmt: skip
        controls = conn.execute(f"SELECT {key}, arm, baseline_attempt_id, source_attempt_id, treatment_attempt_id "
                                "FROM control_comparisons WHERE resolved = 1").fetchall()  # fmt: skip
    slots = len(PROFILES) * 4 * 2  # models × problems × directions
    assert len(treatments) == slots and {arm for arm, _, _ in treatments.values()} == {"skill"}
    assert len(controls) == slots * len(CONTROLS)
    for *place, arm, baseline, source, attempt in controls:
        _, treatment_baseline, treatment_source = treatments[tuple(place)]
        assert (baseline, source) == (treatment_baseline, treatment_source)
        assert started[attempt]["arm"] == f"{place[3]}_{arm}" and started[baseline]["arm"].startswith("solo_")
    assert main(["report", "--store", str(path), "--campaign", campaign.campaign_id, "--by", "model,direction",
                 "--format", "json"]) == 0  # fmt: skip
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert groups and all(g["n"] == 4 for g in groups)  # one treatment per problem: the controls are not in it


def test_an_aa_attempt_differs_from_the_baseline_solo_by_its_seed_only(controlled: tuple[Path, SimCampaign]) -> None:
    campaign = controlled[1]
    plan = campaign.plan()
    by_id = {a.attempt_id: a for a in plan.attempts}
    runner = SimulatedRunner(campaign.sim)
    aas = [a for a in plan.attempts if a.arm.endswith("_aa")]
    assert len(aas) == len(PROFILES) * 4 * 2
    differs = 0
    for aa in aas:
        baseline = by_id[aa.baseline or ""]
        assert aa.source is None and aa.dsl == baseline.dsl and aa.seed != baseline.seed
        # the baseline solo, given the A/A attempt's seed, is the A/A attempt: nothing else tells them apart
        clone = dataclasses.replace(baseline, attempt_id=aa.attempt_id, arm=aa.arm, seed=aa.seed)
        (mine,), (twin,) = runner([AttemptTask(plan.campaign_id, aa)]), runner([AttemptTask(plan.campaign_id, clone)])
        assert _trajectory(mine.events) == _trajectory(twin.events)
        (own,) = runner([AttemptTask(plan.campaign_id, baseline)])
        differs += (own.passed, own.runtime_ms) != (mine.passed, mine.runtime_ms)
    assert differs > 0  # a second solo is a second draw: the noise floor


def _trajectory(events: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, e.payload) for e in events if e.type not in ("AttemptStarted", "LabelAssigned")]


def test_a_placebo_reads_another_problems_skill_of_the_same_family(controlled: tuple[Path, SimCampaign]) -> None:
    started, read, written = _events(controlled[0])
    family = {pid: space.family for pid, space in all_design_spaces().items()}
    placebos = [s for s in started.values() if s["arm"].endswith("_placebo")]
    assert len(placebos) == len(PROFILES) * 4 * 2
    reading = [s for s in placebos if s["attempt_id"] in read]
    assert reading  # some sources left no skill (then the placebo is skipped, like its treatment)
    for s in reading:
        donor = started[s["source_attempt_id"]]
        source_dsl = s["arm"].split("2")[0]
        assert s["source_problem"] == donor["problem"] != s["problem"] and family[donor["problem"]] == s["family"]
        assert (donor["arm"], donor["model"], donor["replicate"]) == (f"solo_{source_dsl}", s["model"], s["replicate"])
        got = read[s["attempt_id"]]
        assert got["text"] == SKILL_HEADER + written[donor["attempt_id"]] and got["source_problem"] == donor["problem"]


def test_the_placebo_donor_order_is_drawn_from_the_seed() -> None:
    def donors(seed: int) -> list[tuple[str, ...]]:
        attempts = _campaign("moe", seed=seed, controls=("placebo",)).attempts()
        return [tuple(p for p, _ in a.donors) for a in attempts if a.arm.endswith("_placebo")]

    assert donors(1) == donors(1) != donors(2)
    assert all(len(d) == 7 for d in donors(1))  # the family's seven other problems


def test_the_matched_note_has_the_skills_length_and_says_nothing(controlled: tuple[Path, SimCampaign]) -> None:
    path, _ = controlled
    started, read, written = _events(path)
    matched = [s for s in started.values() if s["arm"].endswith("_matched") and s["attempt_id"] in read]
    assert matched
    with EventStore(path) as store:
        follow = {e.payload["subject_id"]: e.payload["labels"] for e in store.read(types=["LabelAssigned"])
                  if e.payload["subject"] == "comparison"}  # fmt: skip
    for s in matched:
        got = read[s["attempt_id"]]
        note, skill = got["text"].removeprefix(SKILL_HEADER), written[s["source_attempt_id"]]
        assert got["neutral_note"] and len(note) == len(skill) and len(segment(note)) == len(segment(skill))
        for sentence in segment(note):
            assert not cues(sentence.text) and not speedups(sentence.text) and not mentioned_plans(sentence.text)
        labels = follow[s["attempt_id"]]
        assert labels["follow"] is None and labels["adopted"] == {}  # the reader found nothing to act on


def test_controls_are_part_of_the_campaign_id_and_the_plan() -> None:
    plain, some, all_three = _campaign(controls=()), _campaign(controls=("aa",)), _campaign()
    assert len({plain.campaign_id, some.campaign_id, all_three.campaign_id}) == 3
    assert "controls" not in plain.normalized() and all_three.normalized()["controls"] == list(CONTROLS)
    assert {a.arm for a in all_three.attempts()} == {
        "solo_cutedsl", "solo_tirx", *(f"{d}_{k}" for d in ("cutedsl2tirx", "tirx2cutedsl")
                                       for k in ("skill", *CONTROLS))}  # fmt: skip


def test_a_placebo_needs_another_problem_of_the_family() -> None:
    with pytest.raises(UserError, match=r"placebo reads another problem's skill .* p28 is the campaign's only"):
        _campaign("p28,p45,p49", controls=("placebo",)).attempts()


def test_controls_from_the_command_line_and_from_a_campaign_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "e.sqlite"
    argv = ["run", "--store", str(store), "--problems", "p28,p36", "--profiles", "sim-gpt-5.6-sol", "--workers", "2"]
    assert main([*argv, "--controls", "matched,aa"]) == 0
    with EventStore(store) as s:
        arms = {e.payload["arm"] for e in s.read(types=["AttemptStarted"])}
    assert arms == {"solo_cutedsl", "solo_tirx", *(f"{d}_{k}" for d in ("cutedsl2tirx", "tirx2cutedsl")
                                                 for k in ("skill", "aa", "matched"))}  # fmt: skip
    capsys.readouterr()
    with pytest.raises(SystemExit) as bad:  # argparse's usage error: one line, exit 2
        main([*argv, "--controls", "aa,nocebo"])
    assert bad.value.code == 2 and "use aa, placebo, matched; got 'nocebo'" in capsys.readouterr().err
    file = tmp_path / "c.toml"
    file.write_text('[campaign]\nkind = "simulated"\nproblems = "p28,p36"\ncontrols = ["placebo", "aa"]\n')
    assert load_simulated_campaign(file).controls == ("aa", "placebo")
    file.write_text('[campaign]\nkind = "simulated"\nproblems = "p28,p36"\ncontrols = ["nocebo"]\n')
    with pytest.raises(ConfigError, match=r"campaign\.controls: use aa, placebo, matched; got 'nocebo'"):
        load_simulated_campaign(file)
