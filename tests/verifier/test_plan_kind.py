"""Plan kinds (verifier README, "Plan kinds"): every verdict says whether the DSL made the problem's products
(``full``) or eager code made a share of them (``partial``, as the study's partial plans do), and a protocol with
``require_full_plan`` fails partial plans as ``partial_plan``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mkbsim.catalog import problems_root
from mkbsim.cli import _main
from mkbsim.events import EventStore, NewEvent, PayloadError, VerifierResult
from mkbsim.verifier import PAPER, VerifierReport, VerifierSession, resolve_protocol
from mkbsim.verifier._eagerwork import KINDS, Work
from mkbsim.verifier._plankind import PARTIAL_SHARE, TIMED_SHORTFALL, plan_kind, with_timed_shortfall
from tests.kits.eager_shares import shares_module
from tests.kits.timing_rules import timing_rules_off
from tests.solutions.solution_sample import on_request, representatives

HONEST = Path(__file__).with_name("honest")
SPLIT_K = HONEST / "splitk_gemm_last_group_kernel.py"
FULL_PLAN = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p28_fused_add_rmsnorm_tirx.py"
TIRX_SOLUTIONS = sorted(problems_root().glob("*/solutions/[0-9][0-9]_*_tirx.py"))  # not the shared modules
#: The study's plans whose eager code makes the products (the GEMM of p49, p52, p56) or, on p28 (no products), a
#: fifth of the element work (the residual add). p72's `gateseager_statekernel` leaves its gates eager (4096 values)
#: and makes the state's products in the DSL: full by what it leaves the DSL, whatever its docstring calls it.
PARTIAL = frozenset((
    "28_addeager_normkernel_tirx", "49_gemmeager_routingkernel_tirx", "52_actquantkernel_gemmeager_tirx",
    "56_quantgemmeager_epiloguekernel_tirx",
))  # fmt: skip


def _work(necessary: float = 0.0, unknown: float = 0.0, **amounts: float) -> Work:
    return Work({k: amounts.get(k, 0.0) for k in KINDS}, {k: [] for k in KINDS}, necessary=necessary, unknown=unknown)


def test_eager_work_the_timed_calls_did_beyond_the_draws_is_the_plan_s_where_larger() -> None:
    """Red team rt45 F1: the draws are observable, so the eager work measured on one is not the timed calls'; what a
    floating output's DSL-made share falls short there is eager work too (``_coverage.work_check``)."""
    full = plan_kind(_work(), _work(matmul=100.0))
    assert with_timed_shortfall(full, TIMED_SHORTFALL * 0.9) is full  # the samples' noise
    priced = with_timed_shortfall(full, 0.125)
    assert (priced.kind, priced.eager_share, priced.basis, priced.timed) == ("partial", 0.125, "products", True)
    assert "12% of an output on the timed calls" in priced.describe()
    assert with_timed_shortfall(full, 1.5).eager_share == 1.0
    partial = plan_kind(_work(matmul=30.0), _work(matmul=100.0))
    assert with_timed_shortfall(partial, 0.125) is partial  # the larger share is the plan's
    assert with_timed_shortfall(partial, 0.4).eager_share == 0.4


def test_the_share_is_of_the_products_or_the_compute_else_the_element_work_else_the_movement() -> None:
    products = _work(matmul=100.0, pointwise=50.0)
    assert plan_kind(_work(matmul=30.0), products).as_dict() == {
        "kind": "partial", "eager_share": 0.30, "basis": "products", "unseen": False, "timed": False,
        "through_python": False}  # fmt: skip
    # element work the reference does beside its products is no product, and a DSL GEMM's eager epilogue is a sliver
    # of the problem's compute: a full plan; element work beyond the reference's stands in for products (red team
    # rt19 F2: a split-K GEMM's eager groups written as a broadcast multiply and a sum)
    gemm = _work(matmul=1e6, pointwise=100.0)
    assert plan_kind(_work(pointwise=100.0), gemm).kind == "full"
    assert plan_kind(_work(pointwise=100.0 + 3e5), gemm).eager_share == pytest.approx(0.30, abs=1e-3)
    # where the reference's element work is most of its compute, it is a share of the plan's all the same (red team
    # rt29 F1: p63's state recurrence eager, its readout, the one product, a DSL kernel's: full at 0% before)
    scan = plan_kind(_work(pointwise=23.1e6), _work(matmul=16.8e6, pointwise=25.4e6))
    assert (scan.kind, scan.basis, round(scan.eager_share, 2)) == ("partial", "compute", 0.55)
    assert plan_kind(_work(matmul=10.0, pointwise=1e6), products).eager_share == 1.0
    assert plan_kind(_work(matmul=500.0), products).eager_share == 1.0  # more than the problem needs is all of it
    elements = _work(pointwise=100.0, necessary=50.0)  # against the work every formulation does
    fifth = plan_kind(_work(pointwise=10.0), elements)
    assert (fifth.kind, fifth.eager_share, fifth.basis) == ("partial", 0.2, "element work")
    assert plan_kind(_work(pointwise=50.0 * PARTIAL_SHARE * 0.9), elements).kind == "full"
    movement = _work(movement=100.0)
    assert plan_kind(_work(movement=3.0), movement).kind == "full"
    assert plan_kind(_work(pointwise=10.0), movement).as_dict()["basis"] == "movement"  # compute stands in
    assert plan_kind(_work(), _work()).kind == "full"
    # a sliver of element work beside the movement does not make it the basis (red team rt39 F2: p22 at SMOKE, its
    # slot arithmetic 1.6% of its moved elements, the value cache inserted eagerly: full at 0% on element work)
    slots = _work(pointwise=1356.0, movement=85248.0)
    value_cache = plan_kind(_work(movement=37888.0), slots)
    assert (value_cache.kind, value_cache.basis, round(value_cache.eager_share, 2)) == ("partial", "movement", 0.44)
    assert plan_kind(_work(pointwise=1356.0), slots).kind == "full"  # its element work, a sliver of the movement
    dequantise = _work(pointwise=417648.0, necessary=411000.0, movement=596648.0)  # p24: element work 0.69 of it
    assert plan_kind(_work(movement=596648.0), dequantise).basis == "element work"


def test_an_operator_the_cost_model_does_not_know_counts_at_its_most_and_says_so() -> None:
    """An unknown aten operator's product is priced at its bound (``_eagerwork._bound``): a plan whose products are
    out of sight is not labelled full, and the feedback says why."""
    plan = plan_kind(_work(matmul=100.0, unknown=100.0), _work(matmul=100.0))
    assert plan.partial and plan.unseen
    assert "could have made" in plan.describe() and "cannot price" in plan.describe()


def _labelled_everyday(path: Path) -> bool:
    """Files that inline shared kernel modules (``# bundle:``: the prefill templates at each problem's constants) share
    their eager code with their family × plan's first file, which stands for them (16-26 s each on the CPU, most of
    this module's time); every file with code of its own is labelled in every run."""
    return path in representatives(TIRX_SOLUTIONS) or "# bundle: " not in path.read_text()


@pytest.mark.parametrize("path", [on_request(p, id=p.stem, everyday=_labelled_everyday(p)) for p in TIRX_SOLUTIONS])
def test_the_study_s_solutions_are_labelled_by_what_their_eager_code_made(path: Path) -> None:
    """Priced with the kernels stubbed (``benchmarks/eager_work_shares.py --plans``), at SMOKE: the partial plans at
    0.2 (p28) and 1.0 (the GEMMs), every other plan at 0 (the bundled templates' other instances with
    MKBSIM_ALL_SOLUTIONS=1)."""
    shares = shares_module()
    with shares._stubbed_dsls():
        plan = shares.priced(path, "smoke")[1]
    assert plan.kind == ("partial" if path.stem in PARTIAL else "full"), plan
    assert plan.eager_share >= 3 * PARTIAL_SHARE if plan.partial else plan.eager_share < PARTIAL_SHARE / 10, plan


def test_the_plan_kind_is_a_typed_field_of_the_verifier_result_event(tmp_path: Path) -> None:
    report = VerifierReport("p52", "x", "tirx", "cpu", "paper", PAPER.hash, "smoke", plan="partial",
                            plan_eager_share=2 / 3)  # fmt: skip
    payload = report.to_payload("a1", "final")
    with EventStore(tmp_path / "s.sqlite", create=True) as store:
        store.append([NewEvent("attempt-a1", "VerifierResult", payload)])
        (event,) = store.read()
        stored = VerifierResult.from_dict(event.payload)
        assert (stored.plan, stored.plan_eager_share) == ("partial", 2 / 3)
        with pytest.raises(PayloadError, match="plan"):
            store.append([NewEvent("attempt-a1", "VerifierResult", {**payload, "plan": "most"})])
    assert VerifierResult.from_dict({**payload, "plan": None, "plan_eager_share": None}).plan is None


def test_the_option_enters_the_protocol_hash_only_when_on() -> None:
    """The study's protocols keep the hashes their results were stored under; requiring full plans is another
    protocol (a campaign's plan fingerprint holds the hash)."""
    assert resolve_protocol("paper") is PAPER and "require_full_plan" not in PAPER.params()
    strict = resolve_protocol("paper", require_full_plan=True)
    assert strict.name == "paper" and strict.params()["require_full_plan"] and strict.hash != PAPER.hash
    assert resolve_protocol("hardened", require_full_plan=True).hash not in (strict.hash, PAPER.hash)


#: The split-K case's eager groups, and the same products written as element work (red team rt19 F2: labelled full
#: when only matmul-class FLOPs counted as products).
EAGER_GROUP = "partial += (q[:, g] @ w[:, g].t()) * s[:, g, None] * tile[None, :, g]"
EAGER_GROUP_AS_ELEMENT_WORK = {
    "matmul": EAGER_GROUP,
    "rank_one_updates": "acc = torch.zeros(tokens, n)\n"
    "        for k in range(GROUP):\n"
    "            acc.addcmul_(q[:, g, k, None], w[None, :, g, k])\n"
    "        partial += acc * s[:, g, None] * tile[None, :, g]",
    "broadcast_product_and_sum": "partial += torch.sum(q[:, None, g] * w[None, :, g], dim=2) * s[:, g, None] * "
    "tile[None, :, g]",
}


@pytest.mark.parametrize("formulation", [*EAGER_GROUP_AS_ELEMENT_WORK])
def test_a_split_k_gemm_fails_as_a_partial_plan_where_full_plans_are_required(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, formulation: str, cli_uses_cpu_session: VerifierSession
) -> None:
    """``mkbsim verify --require-full-plan``: the split-K case (which passes by default, labelled partial:
    ``test_honest``) fails as ``partial_plan``, with the eager share of the products, however its eager code
    writes them (in the warm shared session: the rule, not the CLI's session start, is what varies here)."""
    source = SPLIT_K.read_text()
    assert EAGER_GROUP in source
    submission = tmp_path / SPLIT_K.name
    submission.write_text(source.replace(EAGER_GROUP, EAGER_GROUP_AS_ELEMENT_WORK[formulation]))
    argv = ["verify", str(submission), "--problem", "p52", "--dsl", "tirx", "--backend", "cpu", "--require-full-plan"]
    assert _main.main([*argv, "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert (payload["failure"], payload["plan"], payload["bypass_ok"]) == ("partial_plan", "partial", True)
    # every 128-channel group of K but the last; as element work, less the element work the reference does itself
    share = payload["plan_eager_share"]
    assert share == pytest.approx(2 / 3) if formulation == "matmul" else 0.5 < share <= 2 / 3
    assert payload["protocol"] == "paper" and payload["protocol_hash"] != PAPER.hash
    assert "require_full_plan" in payload["feedback"]
    # of its products, or of its compute where the eager element work makes that the larger share
    assert f"{share:.0%} of the problem's {'products' if formulation == 'matmul' else ''}" in payload["feedback"]


def test_a_full_plan_passes_where_full_plans_are_required(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    timing_rules_off(monkeypatch)  # this test is about the plan rule: a loaded machine's timing noise is not
    report = cpu_session.verify(FULL_PLAN, "p28", "tirx", protocol=resolve_protocol("paper", require_full_plan=True))
    assert report.passed and report.plan == "full" and report.plan_eager_share == 0.0, report.feedback
    assert any(line.strip().startswith("plan: full") for line in report.verdict_lines())
