"""Campaign files, the plan and its fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest
from campaign_kit import small_campaign

from mkbsim.campaigns import ConfigError, campaign_kind, load_simulated_campaign
from mkbsim.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "simulated.toml"


def test_the_shipped_example_loads() -> None:
    campaign = load_simulated_campaign(EXAMPLE)
    assert campaign_kind(EXAMPLE) == "simulated"
    assert [p.name for p in campaign.sim.profiles] == ["sim-gpt-5.6-sol", "sim-glm-5.3"]
    assert "p28" in campaign.sim.problems and campaign.sim.replicates == 2 and campaign.workers == 4
    plan = campaign.plan()
    assert len(plan.attempts) == 2 * len(campaign.sim.problems) * 2 * 4


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[campaign]\nkind = "simulated"\nproblemz = "p28"', "campaign.problemz: unknown key"),
        ('[campaign]\nkind = "simulated"\nproblems = "p99"', "campaign.problems: unknown problem"),
        ('[campaign]\nkind = "simulated"\ndirections = ["up"]', "campaign.directions: use cutedsl2tirx"),
        ('[campaign]\nkind = "simulated"\nreplicates = 0', "campaign.replicates: must be positive"),
        ('[campaign]\nkind = "simulated"\nseed = "x"', "campaign.seed: expected int"),
        ('[campaign]\nkind = "simulated"\nchain = 1', "campaign.chain: a chain has at least 2 hops"),
        ('[campaign]\nkind = "simulated"\n[agents]\nprofiles = ["sim-x"]', "agents.profiles: unknown profile"),
        ('[campaign]\nkind = "simulated"\n[verifier]\nprotocol = "fast"', "verifier.protocol: use paper or hardened"),
        ('[campaign]\nkind = "simulated"\n[limits]\nagents = 0', "limits.agents: must be positive"),
        ('[campaign]\nkind = "simulated"\n[budget]\nminutes = 30', "budget.minutes: the simulator models"),
        ('[campaign]\nkind = "robots"', "campaign.kind: use simulated or llm"),
        ("[campaign", "not valid TOML"),
    ],
)
def test_a_bad_campaign_file_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    file = tmp_path / "c.toml"
    file.write_text(body)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        campaign_kind(file)
        load_simulated_campaign(file)
    assert main(["run", "--store", str(tmp_path / "e.sqlite"), "--campaign", str(file)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_run_options_do_not_mix_with_a_campaign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--store", str(tmp_path / "e.sqlite"), "--campaign", str(EXAMPLE), "--seed", "3"]) == 2
    assert "--seed cannot be combined with --campaign" in capsys.readouterr().err


def test_the_plan_is_deterministic_and_orders_treatments_after_their_solos() -> None:
    campaign = small_campaign()
    plan = campaign.plan()
    assert plan == campaign.plan()
    assert plan.campaign_id == campaign.sim.campaign_id  # the plain campaign keeps the simulator's id
    seen: set[str] = set()
    for a in plan.attempts:
        assert set(a.depends_on) <= seen
        seen.add(a.attempt_id)
    treatment = next(a for a in plan.attempts if a.arm == "cutedsl2tirx_skill")
    by_id = {a.attempt_id: a for a in plan.attempts}
    assert by_id[treatment.source or ""].arm == "solo_cutedsl" and by_id[treatment.baseline or ""].arm == "solo_tirx"
    assert len(seen) == len(plan.attempts) == 2 * 2 * 4


def test_protocol_directions_and_seed_change_the_fingerprint_or_the_id() -> None:
    import dataclasses

    base = small_campaign()
    plan = base.plan()
    hardened = dataclasses.replace(base, protocol="hardened").plan()
    assert (
        hardened.fingerprint != plan.fingerprint
        and hardened.parts["problem_definitions"] == plan.parts["problem_definitions"]
    )
    one_way = dataclasses.replace(base, directions=("tirx2cutedsl",)).plan()
    assert one_way.campaign_id != plan.campaign_id and {a.arm for a in one_way.attempts} == {
        "solo_cutedsl", "solo_tirx", "tirx2cutedsl_skill"
    }  # fmt: skip
    assert small_campaign(seed=4).plan().campaign_id != plan.campaign_id
    workers = dataclasses.replace(base, workers=7)
    assert workers.plan() == plan  # how many run at once decides nothing measured


def test_options_an_llm_campaign_cannot_use_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    llm = Path(__file__).resolve().parents[2] / "examples" / "llm.toml"
    run = ["run", "--store", str(tmp_path / "e.sqlite"), "--campaign", str(llm)]
    assert main([*run, "--new-campaign"]) == 2
    assert "--new-campaign applies to simulated campaigns" in capsys.readouterr().err
    assert main([*run, "--ray-address", "auto"]) == 2
    assert "--ray-address needs --executor ray" in capsys.readouterr().err
    assert not (tmp_path / "e.sqlite").exists()
