"""Pairing attempts into comparisons: roles, retries, explicit links, filters and chains kept apart."""

from __future__ import annotations

from dataclasses import replace

from mkbsim.metrics import TransferAttempt, choose, pair_slot

_position = iter(range(1, 10**9))


def make(attempt_id: str, arm: str, **kw: object) -> TransferAttempt:
    dsl = "tirx" if arm in ("solo_tirx", "cutedsl2tirx_skill") else "cutedsl"
    started = next(_position)
    fields: dict[str, object] = dict(
        attempt_id=attempt_id, campaign_id="c1", model="m", problem="p01", family="moe", dsl=dsl, arm=arm,
        replicate=0, source_attempt_id=None, baseline_attempt_id=None, chain_id=None, hop=None, filter=None,
        status="finished", passed=True, inline_cuda=False, runtime_ms=1.0, speedup=1.0, skipped=False,
        started_position=started, finished_position=started + 1000,
    )  # fmt: skip
    fields.update(kw)
    return TransferAttempt(**fields)  # type: ignore[arg-type]


def by_direction(slot: list[TransferAttempt], referenced: dict[str, TransferAttempt] | None = None) -> dict:
    return {(c.direction, c.filter, c.chain_id, c.hop): c for c in pair_slot(slot, referenced or {})}


def test_a_plain_slot_gives_two_comparisons_with_sources_and_baselines() -> None:
    slot = [
        make("c", "solo_cutedsl", runtime_ms=2.0, speedup=2.0),
        make("t", "solo_tirx", runtime_ms=4.0, speedup=1.0),
        make("ct", "cutedsl2tirx_skill", runtime_ms=1.0, speedup=4.0),
        make("tc", "tirx2cutedsl_skill", passed=False, runtime_ms=None, speedup=None),
    ]
    got = by_direction(slot)
    forward = got["cutedsl2tirx", None, None, None]
    assert (forward.baseline_attempt_id, forward.source_attempt_id, forward.treatment_attempt_id) == ("t", "c", "ct")
    assert (forward.r, forward.outcome, forward.verdict_change) == (4.0, "helped", "none")
    assert (forward.source_tier, forward.baseline_tier, forward.treatment_tier, forward.standing) == (4, 3, 5, "above")
    backward = got["tirx2cutedsl", None, None, None]
    assert (backward.baseline_attempt_id, backward.source_attempt_id) == ("c", "t")
    assert (backward.r, backward.outcome, backward.verdict_change, backward.standing) == (0.25, "harmed", "break",
                                                                                         "below")  # fmt: skip
    assert forward.resolved and backward.resolved and forward.skipped is False


def test_only_attempts_finished_normally_count_and_the_last_finished_wins() -> None:
    crashed = make("t1", "solo_tirx", status="infra_error", passed=False, runtime_ms=None)
    retry = make("t2", "solo_tirx", runtime_ms=2.0)
    treatment = make("ct", "cutedsl2tirx_skill", runtime_ms=1.0)
    assert choose([crashed, retry]) is retry
    got = by_direction([crashed, retry, treatment, make("c", "solo_cutedsl")])["cutedsl2tirx", None, None, None]
    assert got.baseline_attempt_id == "t2" and got.r == 2.0
    interrupted = by_direction([crashed, treatment])["cutedsl2tirx", None, None, None]
    assert not interrupted.resolved and interrupted.r is None and interrupted.outcome is None
    assert interrupted.baseline_attempt_id == "t1"  # the attempt the comparison waits on
    running = by_direction([retry, replace(treatment, status="running", passed=None, finished_position=None)])
    assert not running["cutedsl2tirx", None, None, None].resolved
    first = make("a", "solo_tirx", runtime_ms=8.0, finished_position=10)
    second = make("b", "solo_tirx", runtime_ms=2.0, finished_position=20)
    assert choose([second, first]) is second


def test_a_pass_without_runtime_is_not_resolved() -> None:
    broken = make("t", "solo_tirx", passed=True, runtime_ms=None)
    assert not broken.resolved
    assert not by_direction([broken, make("ct", "cutedsl2tirx_skill")])["cutedsl2tirx", None, None, None].resolved


def test_skipped_treatment_is_neutral_and_inline_cuda_is_not_a_scored_pass() -> None:
    skipped = make("ct", "cutedsl2tirx_skill", passed=False, runtime_ms=None, skipped=True)
    got = by_direction([make("t", "solo_tirx", passed=False, runtime_ms=None), skipped])["cutedsl2tirx", None, None,
                                                                                          None]  # fmt: skip
    assert (got.r, got.outcome, got.verdict_change, got.skipped) == (1.0, "neutral", "none", True)
    inline = make("t", "solo_tirx", inline_cuda=True, runtime_ms=0.1, speedup=10.0)
    rescue = by_direction([inline, make("ct", "cutedsl2tirx_skill", runtime_ms=5.0)])["cutedsl2tirx", None, None, None]
    assert (rescue.baseline_passed, rescue.baseline_tier, rescue.r, rescue.verdict_change) == (False, 0, 4.0, "rescue")


def test_explicit_links_win_and_may_point_outside_the_slot() -> None:
    solo_c = make("c", "solo_cutedsl", speedup=0.1)
    other_c = make("c-old", "solo_cutedsl", speedup=8.0, campaign_id="c0")
    other_t = make("t-old", "solo_tirx", runtime_ms=4.0, speedup=8.0, campaign_id="c0")
    rerun = make("ct", "cutedsl2tirx_skill", source_attempt_id="c-old", baseline_attempt_id="t-old", runtime_ms=2.0,
                 campaign_id="c-filter", filter="drop_closure")  # fmt: skip
    got = by_direction([solo_c, rerun], {"c-old": other_c, "t-old": other_t})["cutedsl2tirx", "drop_closure", None,
                                                                              None]  # fmt: skip
    assert (got.source_attempt_id, got.baseline_attempt_id, got.r, got.standing) == ("c-old", "t-old", 2.0, "same")
    missing = by_direction([rerun])["cutedsl2tirx", "drop_closure", None, None]
    assert not missing.resolved and missing.baseline_attempt_id == "t-old" and missing.source_attempt_id == "c-old"


def test_filters_and_chains_never_mix_with_plain_attempts() -> None:
    slot = [
        make("c", "solo_cutedsl"),
        make("t", "solo_tirx", runtime_ms=2.0),
        make("plain", "cutedsl2tirx_skill", runtime_ms=2.0),
        make("filtered", "cutedsl2tirx_skill", filter="evidence_only", runtime_ms=1.0),
        make("hop2", "cutedsl2tirx_skill", chain_id="k1", hop=2, runtime_ms=0.5),
        make("chain-solo", "solo_tirx", chain_id="k1", hop=0, runtime_ms=100.0),
    ]
    got = by_direction(slot)
    assert set(got) == {("cutedsl2tirx", None, None, None), ("cutedsl2tirx", "evidence_only", None, None),
                        ("cutedsl2tirx", None, "k1", 2)}  # fmt: skip
    assert got["cutedsl2tirx", None, None, None].r == 1.0  # 2 ms vs the plain solo's 2 ms
    assert got["cutedsl2tirx", "evidence_only", None, None].r == 2.0
    assert got["cutedsl2tirx", None, "k1", 2].r == 4.0
    assert all(c.baseline_attempt_id == "t" for c in got.values())  # the plain solo, never the chain's


def test_a_slot_without_treatments_has_no_comparisons() -> None:
    assert pair_slot([make("c", "solo_cutedsl"), make("t", "solo_tirx")], {}) == []


def test_control_arms_pair_with_their_treatments_baseline_and_stand_beside_its_source() -> None:
    """DESIGN §4: each control arm is compared with the same baseline as its direction's treatment; its standing
    is measured against the treatment's source (a placebo read another problem's solo, an A/A attempt nothing)."""
    slot = [
        make("c", "solo_cutedsl", runtime_ms=2.0, speedup=2.0),
        make("t", "solo_tirx", dsl="tirx", runtime_ms=4.0, speedup=1.0),
        make("ct", "cutedsl2tirx_skill", dsl="tirx", source_attempt_id="c", runtime_ms=1.0, speedup=4.0),
        make("aa", "cutedsl2tirx_aa", dsl="tirx", runtime_ms=8.0, speedup=0.5),
        make("pl", "cutedsl2tirx_placebo", dsl="tirx", source_attempt_id="other", runtime_ms=4.0, speedup=1.0),
        make("ma", "cutedsl2tirx_matched", dsl="tirx", source_attempt_id="c", passed=False, runtime_ms=None,
             speedup=None),
    ]  # fmt: skip
    other = make("other", "solo_cutedsl", problem="p02", runtime_ms=9.0, speedup=0.2)
    got = {c.arm: c for c in pair_slot(slot, {"other": other})}
    assert set(got) == {"skill", "aa", "placebo", "matched"}
    assert {c.direction for c in got.values()} == {"cutedsl2tirx"}
    assert {c.baseline_attempt_id for c in got.values()} == {"t"}
    assert {c.source_attempt_id for c in got.values()} == {"c"}  # not the placebo's donor
    assert [got[k].treatment_attempt_id for k in ("skill", "aa", "placebo", "matched")] == ["ct", "aa", "pl", "ma"]
    assert (got["aa"].r, got["placebo"].r, got["matched"].r) == (0.5, 1.0, 0.25)  # scored exactly like a treatment
    assert got["aa"].standing == got["skill"].standing == "above"
