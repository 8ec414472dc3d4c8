"""The TUI's reads (through the read model, ``mkbsim.lab``) and helpers, without the UI: plans, throughput,
comparison queries, replay timelines, skill sentences, claim lineage, filter diffs, and the paged table's
fetching."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from tui_store_kit import FIXED_START, SKILLS, fixture_now

from mkbsim.claims import extract_claims
from mkbsim.lab import ComparisonQuery, Counts, Lab, plan_of
from tui import format as fmt
from tui.data import chains, replay
from tui.data.filters import word_diff
from tui.data.watcher import lift_rows
from tui.widgets.paged_table import Column, PagedTable


@pytest.fixture
def lab(store: Path) -> Iterator[Lab]:
    with Lab(store) as opened:
        yield opened


def test_every_rubric_category_has_a_tag_and_a_colour() -> None:
    from mkbsim.claims import CATEGORIES

    assert set(fmt.CATEGORY_STYLES) == set(CATEGORIES)
    assert len({tag for tag, _ in fmt.CATEGORY_STYLES.values()}) == len(CATEGORIES)


def test_plan_of_a_config() -> None:
    simulated = plan_of({"kind": "simulated", "problems": ["p01", "p02"], "replicates": 3,
                                 "profiles": {"b": {}, "a": {}}})  # fmt: skip
    assert simulated.models == ("a", "b") and simulated.per_model_arm == 6 and simulated.total == 48
    rerun = plan_of({"kind": "treatment_rerun", "problems": ["p01"], "profiles": {"a": {}}})
    assert rerun.arms == ("cutedsl2tirx_skill", "tirx2cutedsl_skill") and rerun.total == 2
    assert plan_of({"kind": "chain"}).total is None


def test_campaigns_progress_in_flight_and_failures(lab: Lab) -> None:
    from mkbsim.lab import arm_progress

    monitor = lab.monitor
    grid = monitor.attempt_counts()
    listed = monitor.campaigns(grid)
    assert [c.campaign_id for c in listed] == ["live", "chains", "demo"]  # newest first
    by_id = {c.campaign_id: c for c in listed}
    demo, live = by_id["demo"], by_id["live"]
    assert demo.finished and demo.counts == Counts(attempts=24, passed=15, failed=8, skipped=1)
    assert not live.finished and (live.running, live.counts.infra, live.plan.total) == (1, 1, 4)
    progress = {(p.model, p.arm): p for p in arm_progress(live, grid)}
    assert progress[("model-a", "cutedsl2tirx_skill")].running == 1
    assert progress[("model-a", "tirx2cutedsl_skill")].done == 0  # planned, not started
    (flight,) = monitor.in_flight("live", 10)
    assert (flight.arm, flight.submissions, flight.submission_limit) == ("cutedsl2tirx_skill", 2, 10)
    assert flight.agent_clock_s is not None and flight.agent_clock_s > 0
    (failure,) = monitor.recent_failures("live", 10)
    assert (failure.status, failure.reason) == ("infra_error", "GPU verifier lost")
    demo_failures = monitor.recent_failures("demo", 20)
    assert len(demo_failures) == 8 and all(f.reason for f in demo_failures)  # the final verdict's failure name


def test_first_position_at_and_throughput(lab: Lab, store: Path) -> None:
    step = timedelta(seconds=30)  # the fixture appends one batch every 30 s
    monitor = lab.monitor
    assert monitor.first_position_at(FIXED_START) == 1
    first = FIXED_START.isoformat(timespec="microseconds")
    second_batch = next(e.position for e in lab.store.read() if e.recorded_at > first)
    assert monitor.first_position_at(FIXED_START + step / 2) == second_batch
    assert monitor.first_position_at(fixture_now(store)) == lab.head + 1
    live = next(c for c in monitor.campaigns(monitor.attempt_counts()) if c.campaign_id == "live")
    assert live.started_at is not None
    # live's appends: start, then one attempt each 30 s; the last (in flight) 10 minutes before "now"
    window = timedelta(minutes=10, seconds=30)  # reaches back to the infra failure, finished 30 s before the end
    recent = monitor.throughput(live, fixture_now(store), window)
    assert not recent.since_start and recent.per_minute == pytest.approx(1 / 10.5)
    stalled = monitor.throughput(live, fixture_now(store), timedelta(minutes=5))
    assert stalled.since_start  # nothing finished in the last five minutes: judged over the whole run
    assert stalled.per_minute == pytest.approx(live.done / ((fixture_now(store) - live.started_at).seconds / 60))
    assert stalled.eta is not None


def test_comparison_queries_filter_sort_and_summarize(lab: Lab) -> None:
    comparisons = lab.comparisons
    everything = comparisons.ordered_rowids(ComparisonQuery())
    rows = comparisons.fetch(everything)
    assert len(rows) == 15
    rs = [r.comparison.r for r in rows]
    resolved = [r for r in rs if r is not None]
    assert resolved == sorted(resolved) and rs[-1] is None  # by r, unresolved last
    harmed = comparisons.ordered_rowids(ComparisonQuery(harmed_only=True, campaign_id="demo"))
    assert {r.comparison.outcome for r in comparisons.fetch(harmed)} == {"harmed"} and len(harmed) == 4
    flips = comparisons.fetch(comparisons.ordered_rowids(ComparisonQuery(verdict_flips=True)))
    assert {r.comparison.verdict_change for r in flips} == {"rescue", "break"}
    assert comparisons.fetch(list(reversed(harmed)))[0].rowid == harmed[-1]  # fetch keeps the given order
    first_harmed = comparisons.first(ComparisonQuery(harmed_only=True))
    assert first_harmed is not None and first_harmed.outcome == "harmed"
    query = ComparisonQuery()
    assert query.sorted_by("r").descending and query.sorted_by("model").sort == "model"
    with pytest.raises(ValueError):
        query.sorted_by("payload")
    demo = comparisons.aggregate(ComparisonQuery(campaign_id="demo"))
    assert (demo.summary.total, demo.summary.resolved) == (12, 12)
    assert demo.summary.help_rate == pytest.approx(4 / 12) and demo.summary.harm_rate == pytest.approx(4 / 12)
    by_family = {(b.label, b.direction): b for b in demo.by_family}
    assert by_family[("attention", "tirx2cutedsl")].paired_lift == pytest.approx((4 * 0.75) ** 0.5 - 1)
    by_tier = {(b.label, b.direction): b.n for b in demo.by_tier}
    assert (
        sum(by_tier.values()) == 12 and by_tier[("0", "cutedsl2tirx")] == 2
    )  # failed sources: p02 and p03 of model-a/b
    found = comparisons.search(["p02", "model-b"], 10)
    assert {(c.problem, c.model) for c in found} == {("p02", "model-b")} and len(found) == 2


def test_lift_rows_reuse_the_report_cells(lab: Lab) -> None:
    records, pending = lab.transfer.lift_records("demo")
    rows = lift_rows(records)
    assert pending == 0 and len(records) == 12
    cells = {(r["model"], r["direction"]): r for r in rows}
    assert cells[("model-a", "tirx2cutedsl")]["n"] == 3
    assert cells[("all", "cutedsl2tirx")]["helped"] == 2
    plain, _ = lab.transfer.lift_records(None)
    assert len(plain) == 12  # all campaigns: plain protocol only (the chain's hops are left out)


def test_replay_timeline_merges_on_the_agents_clocks(lab: Lab) -> None:
    treatment = next(
        c for c in (r.comparison for r in lab.comparisons.fetch(lab.comparisons.ordered_rowids(ComparisonQuery())))
        if c.campaign_id == "demo" and c.outcome == "harmed" and c.verdict_change == "break"
    )  # fmt: skip
    sides = (lab.trajectories.load(treatment.baseline_attempt_id),
             lab.trajectories.load(treatment.treatment_attempt_id))  # fmt: skip
    assert sides[0] is not None and sides[1] is not None
    timeline = replay.merge_timeline(sides)
    assert len(timeline) == len(sides[0].events) + len(sides[1].events)
    clocks = [sides[side].events[index].clock_s for side, index in timeline]  # type: ignore[union-attr]
    assert clocks == sorted(clocks)
    for side in (0, 1):  # each attempt's own order is kept
        assert [i for s, i in timeline if s == side] == list(range(len(sides[side].events)))  # type: ignore[arg-type]
    stops = replay.submission_stops(timeline, sides)
    verdicts = sum(e.type == "VerifierResult" for t in sides for e in t.events)  # type: ignore[union-attr]
    assert len(stops) == verdicts
    assert "comparison" in sides[1].labels and sides[1].skill_read is not None
    assert lab.trajectories.load("no-such-attempt") is None


def test_skill_sentences_mark_the_header_decisions_and_citations(lab: Lab) -> None:
    (aid,) = [
        c.treatment_attempt_id
        for c in lab.comparisons.search(["demo", "model-a", "p01", "cutedsl2tirx"], 10)
        if c.campaign_id == "demo" and c.chain_id is None
    ]
    treatment = lab.trajectories.load(aid)
    assert treatment is not None
    sentences = replay.skill_sentences(treatment)
    assert sentences[0].header and not any(s.header for s in sentences[1:])
    adopted = [s for s in sentences if s.decision == "adopted"]
    assert [s.claim.index for s in adopted] == [1, 2] and all(s.followed for s in adopted)
    assert all(s.cited_at is not None and treatment.events[s.cited_at].type == "AgentStep" for s in adopted)
    assert not any(s.followed for s in sentences if s.decision is None and s.cited_at is None)
    source_text = SKILLS[("model-a", "p01", "cutedsl")]
    assert [s.claim.text for s in sentences[1:]] == [c.text for c in extract_claims(source_text)]


def test_claim_lineage_links_claims_hop_to_hop(lab: Lab) -> None:
    (summary,) = lab.chains.summaries()
    assert [hop for hop, _, _ in summary.hops] == [0, 1, 2]
    detail = chains.chain_detail(lab, summary)
    assert [h.outcome for h in detail.hops] == [None, "neutral", "harmed"]
    by_category = {lin.category: sorted(lin.sentences) for lin in detail.lineages}
    assert by_category["unsupported_closure"] == [0, 1, 2]
    assert by_category["failure_diagnosis"] == [0]  # dropped after the first hop
    assert by_category["open_question"] == [1, 2]  # new at hop 1
    finding = next(lin for lin in detail.lineages if lin.category == "evidence_backed_finding")
    assert sorted(finding.sentences) == [0, 1]  # reworded (0.210 ms → 0.35 ms) but the same claim


def test_word_diff_reconstructs_both_texts() -> None:
    original = "Keep this. Drop this sentence entirely. Keep that."
    filtered = "Keep this. Keep that, now."
    pieces = word_diff(original, filtered)
    assert "".join(p.text for p in pieces if p.kind != "added") == original
    assert "".join(p.text for p in pieces if p.kind != "removed") == filtered
    assert any(p.kind == "removed" and "entirely" in p.text for p in pieces)


class _CountingSource:
    """A million rows, made on demand; records every fetch."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.fetches: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return self.n

    def rows(self, start: int, stop: int) -> Sequence[int]:
        self.fetches.append((start, stop))
        return list(range(start, min(stop, self.n)))


class _TableApp(App[None]):
    def __init__(self, source: _CountingSource) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        yield PagedTable([Column("n", "n", 10, lambda n: str(n))])

    def on_mount(self) -> None:
        self.query_one(PagedTable).set_source(self.source)
        self.query_one(PagedTable).focus()


async def test_paged_table_fetches_only_the_pages_it_draws() -> None:
    source = _CountingSource(1_000_000)
    app = _TableApp(source)
    async with app.run_test(size=(40, 20)) as pilot:
        table = app.query_one(PagedTable)
        await pilot.pause()
        assert source.fetches == [(0, 100)]
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor == 999_999 and table.cursor_row == 999_999
        await pilot.press("pageup", "pageup", "up")
        await pilot.pause()
        assert all(stop - start == 100 for start, stop in source.fetches)
        assert len(source.fetches) <= 3  # the first page, the last page, and at most the one before it
        assert table.cursor == 999_999 - 2 * (table.scrollable_content_region.height - 2) - 1
