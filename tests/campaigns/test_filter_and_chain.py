"""Campaign files with `filter` (every treatment reads its source skill through a skill filter) and with
`chain` (the multi-hop chain protocol instead of the plain one), through `mkbsim run --campaign`."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest
from campaign_kit import mkbsim, small_campaign

from mkbsim.campaigns import run_campaign
from mkbsim.cli import main
from mkbsim.errors import UserError
from mkbsim.events import EventStore


def _campaign_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(f"""[campaign]
kind = "simulated"
problems = ["p28", "p36", "p45"]
seed = 4
{extra}
[agents]
profiles = ["sim-gpt-5.6-sol", "sim-glm-5.3"]
[limits]
agents = 2
""")
    return path


def _treatments(store: Path) -> dict[tuple[str, str, str], tuple[str, str | None, bool]]:
    """(model, problem, arm) -> (status, filter, passed) of every skill-conditioned attempt."""
    conn = sqlite3.connect(store)
    rows = conn.execute(
        "SELECT json_extract(s.payload, '$.model'), json_extract(s.payload, '$.problem'),"
        " json_extract(s.payload, '$.arm'), json_extract(f.payload, '$.status'), json_extract(s.payload, '$.filter'),"
        " json_extract(f.payload, '$.passed') FROM events s JOIN events f ON f.stream_id = s.stream_id"
        " WHERE s.type = 'AttemptStarted' AND f.type = 'AttemptFinished'"
        " AND json_extract(s.payload, '$.arm') LIKE '%skill'"
    ).fetchall()
    conn.close()
    return {(m, p, a): (st, fi, bool(ok)) for m, p, a, st, fi, ok in rows}


def test_an_identity_filter_changes_nothing_but_the_label_and_a_dropping_filter_changes_skills(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain, identity, dropped = tmp_path / "plain.sqlite", tmp_path / "identity.sqlite", tmp_path / "dropped.sqlite"
    for store, extra in ((plain, ""), (identity, 'filter = "identity"'), (dropped, 'filter = "evidence_only"')):
        # the CLI in this process: three `mkbsim` subprocesses would each import torch (most of their cost)
        code = main(["run", "--campaign", str(_campaign_file(tmp_path, extra)), "--store", str(store)])
        assert code == 0, capsys.readouterr().err
    base, same = _treatments(plain), _treatments(identity)
    assert len(base) == 2 * 3 * 2 and set(base) == set(same)
    # same seeds, same skills: the identity filter reproduces every outcome, and labels the attempts
    assert {k: (st, ok) for k, (st, _, ok) in same.items()} == {k: (st, ok) for k, (st, _, ok) in base.items()}
    assert {fi for _, fi, _ in base.values()} == {None} and {fi for _, fi, _ in same.values()} == {"identity"}
    assert {fi for _, fi, _ in _treatments(dropped).values()} == {"evidence_only"}
    texts, original = _skills_read(dropped), _skills_read(plain)
    assert texts and sum(map(len, texts)) < sum(map(len, original))  # the filter removed sentences


def _skills_read(store: Path) -> list[str]:
    conn = sqlite3.connect(store)
    texts = [t for (t,) in conn.execute("SELECT json_extract(payload, '$.text') FROM events WHERE type = 'SkillRead'")]
    conn.close()
    return texts


def test_the_library_refuses_a_filter_name_without_its_transform(tmp_path: Path) -> None:
    campaign = dataclasses.replace(small_campaign(), filter="identity")
    with EventStore(tmp_path / "s.sqlite", create=True) as store, pytest.raises(UserError, match=r"campaign\.filter"):
        run_campaign(store, campaign)
    assert EventStore(tmp_path / "s.sqlite").count() == 0


def test_an_unknown_filter_is_a_one_line_error(tmp_path: Path) -> None:
    done = mkbsim("run", "--campaign", str(_campaign_file(tmp_path, 'filter = "nope"')), "--store",
                  str(tmp_path / "s.sqlite"))  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "nope" in done.stderr


def test_a_chain_campaign_file_runs_the_chain_protocol_and_reports_per_hop(tmp_path: Path) -> None:
    store = tmp_path / "chain.sqlite"
    # lexical claim links: loading MiniLM would cost this test most of its time (tests/skills checks MiniLM)
    lexical = ("--similarity", "lexical")
    done = mkbsim("run", "--campaign", str(_campaign_file(tmp_path, "chain = 2")), "--store", str(store), *lexical)
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(store)
    started = conn.execute("SELECT json_extract(payload, '$.hop') FROM events WHERE type = 'AttemptStarted'")
    hops = sorted({h for (h,) in started if h is not None})
    kinds = {k for (k,) in conn.execute(
        "SELECT json_extract(payload, '$.config.kind') FROM events WHERE type = 'CampaignStarted'")}  # fmt: skip
    conn.close()
    assert hops == [1, 2] and kinds == {"simulated_chain"}  # hop 0 is the plain solo
    assert "hop" in done.stdout.lower() and "lexical" in done.stdout
    again = mkbsim("run", "--campaign", str(_campaign_file(tmp_path, "chain = 2")), "--store", str(store), *lexical)
    assert again.returncode == 0 and "already in" in again.stderr  # the same file finds the stored chains
    bad = mkbsim("run", "--campaign", str(_campaign_file(tmp_path, 'chain = 2\nfilter = "identity"')), "--store",
                 str(store))  # fmt: skip
    assert bad.returncode == 2 and "campaign.chain" in bad.stderr
