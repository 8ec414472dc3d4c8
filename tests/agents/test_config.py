"""The LLM campaign file: the shipped example loads; mistakes name the file and the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mkbsim.agents import ConfigError, load_env_file, load_llm_campaign

EXAMPLE = Path(__file__).parents[2] / "examples" / "llm.toml"

MINIMAL = """
[campaign]
id = "t1"
problems = "p36"

[[agents]]
model = "openai/gpt-4.1-mini"
"""


def test_the_example_loads_with_the_study_protocol() -> None:
    config = load_llm_campaign(EXAMPLE)
    assert config.campaign_id == "llm-demo" and config.problems == "p36,p28"
    assert (config.budget.minutes, config.budget.submissions) == (40, 10)
    assert config.sandbox.cpus == 2 and config.sandbox.memory_bytes == 8 << 30
    sandbox, loop = config.sandbox, config.loop
    assert (sandbox.isolation, sandbox.max_processes, loop.max_reply_chars) == ("bwrap", 128, 100_000)
    assert config.directions == ("cutedsl2tirx", "tirx2cutedsl") and config.cost_cap_usd == 25.0
    (agent,) = config.agents
    assert agent.model == "openai/gpt-4.1" and agent.label == "gpt-4.1"
    assert dict(agent.params) == {"temperature": 0.2, "max_tokens": 8192}
    assert config.verifier_backend == "cuda" and config.verifier_protocol == "paper"


def test_defaults_of_a_minimal_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(MINIMAL)
    config = load_llm_campaign(path)
    assert config.replicates == 1 and config.cost_cap_usd is None and config.verifier_backend is None
    assert config.env_file == Path(".env") and config.agents[0].label == "openai/gpt-4.1-mini"
    # one attempt at a time, the verifier slots from the machine, no filter
    assert (config.agents_at_once, config.gpu_verifier_slots, config.filter) == (1, None, None)
    assert not config.skip_unverifiable  # CuTe DSL attempts on cpu ask their model as they always did


def test_a_campaign_may_require_full_plans_and_its_fingerprint_says_so(tmp_path: Path) -> None:
    """``[verifier] require_full_plan``: every scorer gets the protocol object with the option (verifier README,
    "Plan kinds"), and the plan fingerprint holds its hash, so a resume cannot mix the two."""
    from mkbsim.campaigns import fingerprint_parts
    from mkbsim.verifier import PAPER

    path = tmp_path / "c.toml"
    path.write_text(MINIMAL)
    assert load_llm_campaign(path).protocol is PAPER  # the study's protocol, as stored campaigns ran
    path.write_text(MINIMAL + "\n[verifier]\nrequire_full_plan = true\n")
    strict = load_llm_campaign(path).protocol
    assert strict.require_full_plan and strict.name == "paper"
    parts = [fingerprint_parts(["p36"], protocol, {})["verifier_protocol"] for protocol in (PAPER, strict)]
    assert parts == [PAPER.hash, strict.hash] and parts[0] != parts[1]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('id = "t1"', 'id = "a b"'), "campaign.id: use letters"),
        (lambda t: t.replace('problems = "p36"\n', ""), "campaign.problems: required key is missing"),
        (lambda t: t + "\n[sandbox]\ncpu = 2\n", "sandbox.cpu: unknown key"),
        (lambda t: t + "\n[sandbox]\nmemory_gb = -1\n", "sandbox.memory_gb: must be positive"),
        (lambda t: t + "\n[sandbox]\ncpus = true\n", "sandbox.cpus: expected int or list, got bool"),
        (lambda t: t + '\n[budget]\nminutes = "40"\n', "budget.minutes: expected int, got str"),
        (lambda t: t + '\n[verifier]\nbackend = "tpu"\n', "verifier.backend: use cuda or cpu"),
        (lambda t: t + '\n[verifier]\nskip_unverifiable = "yes"\n', "verifier.skip_unverifiable: expected bool"),
        (lambda t: t + '\n[verifier]\nrequire_full_plan = "yes"\n', "verifier.require_full_plan: expected bool"),
        (lambda t: t + "\n[loop]\nsummarize_at = 1.5\n", "loop.summarize_at: must be a fraction"),
        (lambda t: t.replace('problems = "p36"', 'problems = "p36"\ndirections = ["a2b"]'), "campaign.directions"),
        (lambda t: t.replace('model = "openai/gpt-4.1-mini"', ""), r"agents\[0\].model: required key is missing"),
        (lambda t: t + "params = { timeout = 5 }\n", r"agents\[0\].params: 'timeout' is set by mkbsim"),
        (lambda t: t + "temperature = 0.2\n", r"agents\[0\].temperature: unknown key"),
        (lambda t: t + '\n[[agents]]\nmodel = "openai/gpt-4.1-mini"\n', "agents: two agents share the name"),
        (lambda t: t + "\n[simulation]\nseed = 1\n", "simulation: unknown key"),
        (lambda t: t + "\n[limits]\nagents = 0\n", "limits.agents: must be positive"),
        (lambda t: t + "\n[limits]\nagents = true\n", "limits.agents: expected int, got bool"),
        (lambda t: t + "\n[limits]\ngpu_verifier_slots = 0\n", "limits.gpu_verifier_slots: must be positive"),
        (lambda t: t + "\n[limits]\nworkers = 2\n", "limits.workers: unknown key"),
        (lambda t: t.replace('problems = "p36"', 'problems = "p36"\nfilter = " "'), "campaign.filter: name a skill"),
        (lambda t: t + "[[[", "not valid TOML"),
        (lambda t: t + '\n[sandbox]\nisolation = "docker"\n', "sandbox.isolation: use 'bwrap' or 'none'"),
        (lambda t: t + '\n[sandbox]\nisolation = "none"\nrequire_network_isolation = true\n',
         'sandbox.require_network_isolation: true needs isolation = "bwrap"'),
        (lambda t: t + "\n[sandbox]\nmax_processes = 0\n", "sandbox.max_processes: must be positive"),
        (lambda t: t + "\n[loop]\nmax_reply_chars = 0\n", "loop.max_reply_chars: must be positive"),
        (lambda t: t + 'reply_format = "xml"\n', r"agents\[0\].reply_format: use 'auto', 'json_schema', 'tools'"),
        (lambda t: t + "params = { tool_choice = 'none' }\n", r"agents\[0\].params: 'tool_choice' is set by mkbsim"),
        (lambda t: t + "price_per_mtok = { input = 0 }\n",
         r"agents\[0\].price_per_mtok.output: required key is missing"),
        (lambda t: t + "price_per_mtok = { input = -1, output = 0 }\n",
         r"agents\[0\].price_per_mtok.input: must be 0 or more"),
        (lambda t: t + "price_per_mtok = { input = 0, output = 0, cached = 0 }\n",
         r"agents\[0\].price_per_mtok.cached: unknown key"),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, edit: object, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(edit(MINIMAL))  # type: ignore[operator]
    with pytest.raises(ConfigError, match=message) as caught:
        load_llm_campaign(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such campaign file"):
        load_llm_campaign(tmp_path / "nope.toml")


def test_env_file_fills_only_unset_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKB_TEST_SET", "from-environment")
    monkeypatch.delenv("MKB_TEST_NEW", raising=False)
    env = tmp_path / ".env"
    env.write_text("MKB_TEST_SET=from-file\nMKB_TEST_NEW=new-value\n")
    try:
        assert load_env_file(env) == ["MKB_TEST_NEW"]
        assert os.environ["MKB_TEST_SET"] == "from-environment" and os.environ["MKB_TEST_NEW"] == "new-value"
    finally:
        os.environ.pop("MKB_TEST_NEW", None)
    assert load_env_file(tmp_path / "missing.env") == []


def test_the_env_files_variables_are_the_sandboxs_secrets(tmp_path: Path) -> None:
    (tmp_path / "keys.env").write_text("A_KEY=sk-1234567890\nLAB_PASSWORD=pw-1234567890\n")
    path = tmp_path / "c.toml"
    path.write_text(MINIMAL.replace('problems = "p36"', f'problems = "p36"\nenv_file = "{tmp_path / "keys.env"}"'))
    assert load_llm_campaign(path).sandbox.secret_env == ("A_KEY", "LAB_PASSWORD")
