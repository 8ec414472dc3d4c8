"""`mkbsim run --campaign FILE`: an LLM campaign from the command line, and its one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from agent_kit import StubLLM, act, campaign_toml

from mkbsim.cli import main
from mkbsim.events import EventStore


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_run_campaign_file_until_the_cost_cap(
    tmp_path: Path, stub: StubLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keys.env").write_text("MKB_STUB_KEY=sk-from-env-file\n")
    campaign = campaign_toml(
        tmp_path / "llm.toml",
        {"model": "openai/gpt-4o-mini", "params": {"api_base": stub.url}, "api_key_env": "MKB_STUB_KEY"},
        campaign={"id": "cli", "problems": "p36", "directions": ["cutedsl2tirx"], "cost_cap_usd": 0.000001,
                  "env_file": tmp_path / "keys.env"},
        sandbox={"root": tmp_path / "sandboxes"},
    )  # fmt: skip
    stub.script = [act(write={"kernel.py": "", "SKILL.md": "- a finding\n"}, done=True)]
    store = tmp_path / "runs.sqlite"
    try:
        code, out, err = run_cli(capsys, "run", "--campaign", str(campaign), "--store", str(store))
    finally:
        os.environ.pop("MKB_STUB_KEY", None)
    assert code == 0, err
    assert "loaded MKB_STUB_KEY from" in out
    assert "cli.openai-gpt-4o-mini.p36.solo_cutedsl.r0: finished, failed" in err  # progress: stderr
    assert "stopped: the cost cap of $1e-06 was reached" in out
    assert "cannot run CuTe DSL kernels" in err
    assert stub.received[0].authorization == "Bearer sk-from-env-file"  # the env file's key reached the provider
    with EventStore(store) as s:
        assert s.count("AttemptStarted") == 1 and s.count("CampaignFinished") == 1


def test_a_bad_campaign_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = tmp_path / "bad.toml"
    campaign.write_text('[campaign]\nid = "x"\nproblems = "p36"\n[[agents]]\nmodl = "openai/gpt-4.1"\n')
    code, out, err = run_cli(capsys, "run", "--campaign", str(campaign), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and out == ""
    assert (
        err.strip() == f"mkbsim run: error: {campaign}: agents[0].modl: unknown key (known: model, name, params, "
        "api_key_env, context_tokens, request_timeout_s, max_retries, backoff_initial_s, backoff_max_s, reply_format, "
        "price_per_mtok)"
    )
    assert not (tmp_path / "s.sqlite").exists()


def test_a_missing_provider_key_stops_before_any_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    campaign = tmp_path / "llm.toml"
    campaign.write_text(
        f'[campaign]\nid = "x"\nproblems = "p36"\nenv_file = "{tmp_path / "none.env"}"\n'
        '[[agents]]\nmodel = "openai/gpt-4.1"\n'
    )
    code, out, err = run_cli(capsys, "run", "--campaign", str(campaign), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and out == ""
    assert err.strip() == (
        f"mkbsim run: error: {campaign}: agents[0] (openai/gpt-4.1): OPENAI_API_KEY not set "
        f"(export it or put it in {tmp_path / 'none.env'})"
    )
    assert not (tmp_path / "s.sqlite").exists()


def test_an_unknown_filter_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = tmp_path / "f.toml"
    campaign.write_text(
        f'[campaign]\nid = "x"\nproblems = "p36"\nfilter = "no_such_filter"\nenv_file = "{tmp_path / "n.env"}"\n'
        '[[agents]]\nmodel = "openai/gpt-4.1"\nparams = { api_base = "http://127.0.0.1:9/v1" }\n'
    )
    code, out, err = run_cli(capsys, "run", "--campaign", str(campaign), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and out == ""
    assert err.startswith(f"mkbsim run: error: {campaign}: campaign.filter: ") and "no_such_filter" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "s.sqlite").exists()


def test_a_campaign_filter_reaches_the_treatment_through_the_cli(
    tmp_path: Path, stub: StubLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = campaign_toml(
        tmp_path / "llm.toml",
        {"model": "openai/gpt-4o-mini", "params": {"api_base": stub.url, "api_key": "sk-stub"}},
        campaign={"id": "filtered", "problems": "p36", "directions": ["tirx2cutedsl"], "filter": "identity",
                  "env_file": tmp_path / "none.env"},
        limits={"agents": 2, "gpu_verifier_slots": 1},
        sandbox={"root": tmp_path / "sandboxes"},
    )  # fmt: skip
    # both solos write a skill and no kernel (nothing to verify); the treatment does the same
    stub.script = [act(write={"kernel.py": "", "SKILL.md": "- a finding (measured)\n"}, done=True)] * 3
    store = tmp_path / "runs.sqlite"
    code, _, err = run_cli(capsys, "run", "--campaign", str(campaign), "--store", str(store), "--workers", "2")
    assert code == 0, err
    with EventStore(store) as s:
        (read,) = [e.payload for e in s.read(types=["SkillRead"])]
        started = [e.payload for e in s.read(types=["CampaignStarted"])]
    assert read["filter"] == "identity" and read["text"] == "- a finding (measured)\n"
    assert started[0]["config"]["campaign"]["filter"] == "identity"


def test_a_campaign_whose_every_attempt_failed_on_infrastructure_exits_1_with_the_reasons(
    tmp_path: Path, stub: StubLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = campaign_toml(
        tmp_path / "llm.toml",
        {"model": "openai/gpt-4o-mini", "params": {"api_base": stub.url, "api_key": "sk-stub"}, "max_retries": 0},
        campaign={"id": "down", "problems": "p36", "directions": ["tirx2cutedsl"], "env_file": tmp_path / "none.env"},
        sandbox={"root": tmp_path / "sandboxes"},
    )  # fmt: skip
    stub.script = []  # every request is refused: the provider is down for this campaign
    code, _, err = run_cli(capsys, "run", "--campaign", str(campaign), "--store", str(tmp_path / "runs.sqlite"))
    assert code == 1 and "Traceback" not in err
    assert "campaign down: every attempt ended in infra_error, nothing was measured" in err
    reasons = [line for line in err.splitlines() if "× model unavailable" in line]
    assert len(reasons) == 1 and reasons[0].strip().startswith("2 × ")  # both solos, one reason
