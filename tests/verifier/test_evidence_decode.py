"""The decode rule on the evidence calls (verifier README, "Timed calls run what the correctness draws checked", and
red team rt22 F1): the elements a launch of an evidence call changes that a simple map of values present before the
launch recovers are taken from its work (the bytes it changed, the outputs' shares it left), as a correctness draw's
are from its credit. The provenance vault driven directly on an evidence call (no dispatch mode: only the gate and the
harness's INPUTS and RESULT report), as in ``test_launch_copies.py``; a Python "kernel" behind a counted gate stands for
native code.

The operands there are the launch's tensor arguments as they were before it, the written one's own contents included
(an in-place map, a copy within one buffer), less what earlier launches of the call made and left (an honest pipeline)
and less the problem inputs' bytes as the harness gave them, and their lined-up casts (an honest elementwise kernel).
Each hostile case here changes every byte of the output and leaves every element of it: before this rule its work was
the draws' (share 1.0, checked against main)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from mkbsim.verifier import _decode
from mkbsim.verifier._provenance import provenance_lib
from tests.kits.evidence_vault import EvidenceVault as Evidence
from tests.kits.evidence_vault import evidence_vault

ROWS, HIDDEN = 64, 128  # p36 at SMOKE
N = ROWS * HIDDEN


@pytest.fixture
def evidence() -> Iterator[Evidence]:
    yield from evidence_vault(N)


def _inputs(rows: int = ROWS) -> tuple[torch.Tensor, torch.Tensor]:
    x = (2 * torch.randn(rows, HIDDEN)).to(torch.bfloat16)
    w = (1 + 0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)
    return x, w


def _answer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)


def rms_norm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(_answer(x, w))


def halve(out: torch.Tensor) -> None:
    out.copy_(out.float() * 0.5)


def test_an_honest_kernel_keeps_its_work(evidence: Evidence) -> None:
    x, w = _inputs()
    evidence.call(x, w)
    # an output holding nothing of this call's: an empty block may hold a copy of x the vault made, whose sign and
    # exponent bytes the answer's share often enough for the bytes changed to miss the bound at 1 seed in 30 (CI)
    out = torch.full_like(x, float("nan"))
    evidence.launch(rms_norm, x, w, out)
    found = evidence.work(out)
    assert found["shares"][0] > 0.98 and found["decoded"] == 0 and found["bytes"] > 0.9 * 2 * N, found


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="torch without float4")
def test_a_float4_argument_is_counted_without_a_nan_check(evidence: Evidence) -> None:
    """Red team rt69 FP0: a launch given packed float4 pairs (an NVFP4 kernel's weights typed as such) made the vault
    raise (float4 has no conversion nor copy: the copy search's sources, the decode rule's operands): its changed bytes
    count as any integer's."""
    x, w = _inputs()
    evidence.call(x, w)
    out, packed = torch.full_like(x, float("nan")), torch.zeros(N, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)

    def kernel(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, packed: torch.Tensor) -> None:
        rms_norm(x, w, out)
        packed.view(torch.uint8).fill_(0x35)

    evidence.launch(kernel, x, w, out, packed)
    assert evidence.work(out)["bytes"] > 0.9 * 2 * N + N


def padded_norm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    """The answer in the valid rows, and over the padded rows the NaN a division 0/0 makes in the cpu's bits (0xFFC0
    in bfloat16, not torch's 0x7FC0), as a tiled kernel's over a tail of fresh memory."""
    out[:ROWS] = _answer(x, w)
    out[ROWS:] = torch.tensor(-64, dtype=torch.int16).view(torch.bfloat16)  # 0xFFC0


@pytest.mark.parametrize("transposed", [False, True])
def test_nan_a_launch_writes_is_no_work(evidence: Evidence, transposed: bool) -> None:
    """The bytes of the work rule (``_provenance.nan_work``, once run() returned): a padded tile's NaN rows, which a
    draw's NaN sentinel turns into changed bytes where a reused block's rows do not (the honest p44 kernels' rejection
    on the H100, session 47, it seems), are no launch's work; the valid rows are, whatever the argument's layout."""
    x, w = _inputs()
    evidence.call(x, w)
    padded = torch.zeros(3 * ROWS, HIDDEN, dtype=torch.bfloat16)
    out = padded.t().contiguous().t() if transposed else padded
    evidence.launch(padded_norm, x, w, out)
    found = evidence.work(out[:ROWS])
    assert 0.9 * 2 * N < found["bytes"] <= 2 * N, found


def test_twice_the_answer_halved_in_place_is_no_work(evidence: Evidence) -> None:
    """rt22 F1 (1): eager code writes twice the answer into the output, the launch halves it in place."""
    x, w = _inputs()
    evidence.call(x, w)
    out = (_answer(x, w).float() * 2).to(torch.bfloat16)
    evidence.launch(halve, out)
    found = evidence.work(out)
    assert found["shares"][0] < 0.05 and found["decoded"] > 0.9 * 2 * N * 0.7, found


def test_larger_decoy_arguments_do_not_hide_an_in_place_map(evidence: Evidence) -> None:
    """The fit takes the six largest operands (``DECODE_OPERANDS``): the argument's own contents stay among them."""
    x, w = _inputs()
    evidence.call(x, w)
    out = (_answer(x, w).float() * 2).to(torch.bfloat16)
    decoys = [torch.randn(2 * ROWS, HIDDEN) for _ in range(_decode.DECODE_OPERANDS)]
    evidence.launch(lambda t, *rest: halve(t), out, *decoys)
    assert evidence.work(out)["shares"][0] < 0.05


def copy_down(buf: torch.Tensor) -> None:
    rows = buf.shape[0] // 2
    buf[:rows] = buf[rows:]


def test_an_answer_copied_within_its_own_buffer_is_no_work(evidence: Evidence) -> None:
    """rt22 F1 (2): the answer written into a buffer's second half, copied into its first half, which is returned."""
    x, w = _inputs()
    evidence.call(x, w)
    buf = torch.empty(2 * ROWS, HIDDEN, dtype=torch.bfloat16)
    buf[ROWS:] = _answer(x, w)
    evidence.launch(copy_down, buf)
    found = evidence.work(buf[:ROWS])
    assert found["shares"][0] < 0.05 and found["bytes"] < 0.05 * 2 * N, found


def unscale(s: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(s * 0.5)


def test_an_answer_mapped_from_a_separate_argument_is_no_work(evidence: Evidence) -> None:
    """rt22 F1 (3): twice the answer (float32) in a scratch argument, mapped into the output."""
    x, w = _inputs()
    evidence.call(x, w)
    out = torch.empty_like(x)
    evidence.launch(unscale, _answer(x, w).float() * 2, out)
    found = evidence.work(out)
    assert found["shares"][0] < 0.05 and found["bytes"] < 0.05 * 2 * N, found


def shift_down(s: torch.Tensor, w_: torch.Tensor) -> None:
    w_.copy_(s - 1.0)


def test_a_map_of_a_launch_s_withdrawn_work_is_no_work_either(evidence: Evidence) -> None:
    """Two launches: the first maps an eager ``2 * answer + 1`` into a workspace (a map: withdrawn), the second halves
    the workspace into the output. The workspace's bytes are no launch's work, so they are no earlier launch's output
    that the second may map honestly: both are withdrawn."""
    x, w = _inputs()
    evidence.call(x, w)
    out, workspace = torch.empty_like(x), torch.empty(ROWS, HIDDEN)
    evidence.launch(shift_down, _answer(x, w).float() * 2 + 1, workspace)
    evidence.launch(unscale, workspace, out)
    found = evidence.work(out)
    assert found["shares"][0] < 0.05 and found["bytes"] < 0.05 * (4 + 2) * N, found


def decay(state: torch.Tensor, out: torch.Tensor) -> None:
    state.mul_(0.5)
    out.copy_(state.to(torch.bfloat16))


def test_an_in_place_kernel_mapping_its_own_input_keeps_its_work(evidence: Evidence) -> None:
    """An honest in-place update of an in-place problem input (a state decayed, a cache rescaled): a simple map of the
    argument's own contents, which are the input's as the harness gave them. Reported as an ordinary eager tensor, the
    same launch is withdrawn."""
    state = torch.randn(ROWS, HIDDEN)
    evidence.call(state, inplace=(0,))
    out = torch.empty(ROWS, HIDDEN, dtype=torch.bfloat16)
    evidence.launch(decay, state, out)
    found = evidence.work(out)
    assert found["shares"][0] > 0.98 and found["decoded"] == 0, found
    evidence.call()  # the same, the state no input of the call's
    state = torch.randn(ROWS, HIDDEN)
    evidence.launch(decay, state, out)
    assert evidence.work(out)["shares"][0] < 0.05


def normalise_float(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    xf = x.float()
    out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float())


def cast(src: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(src.to(out.dtype))


def test_a_launch_mapping_an_earlier_launch_s_output_keeps_its_work(evidence: Evidence) -> None:
    """An honest pipeline: the first launch computes the RMSNorm in float32 into a workspace, the second casts it into
    the output (a simple map of what the first launch left), then a third doubles it in place and a fourth halves it
    back: each maps what a launch of the call made and left, and keeps its work."""
    x, w = _inputs()
    evidence.call(x, w)
    out, workspace = torch.empty_like(x), torch.empty(ROWS, HIDDEN)
    evidence.launch(normalise_float, x, w, workspace)
    evidence.launch(cast, workspace, out)
    evidence.launch(lambda t: t.mul_(2), out)
    evidence.launch(halve, out)
    found = evidence.work(out)
    assert found["shares"][0] > 0.98 and found["decoded"] == 0, found


def silu(src: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(torch.nn.functional.silu(src).to(out.dtype))


def test_an_elementwise_kernel_of_an_input_or_its_eager_cast_keeps_its_work(evidence: Evidence) -> None:
    """An honest elementwise kernel (a univariate map) of a problem input, of its float32 cast made eagerly, and of its
    transpose made contiguous: the input's values as given, not eager-made ones."""
    x, _ = _inputs()
    evidence.call(x)
    out = torch.empty_like(x)
    evidence.launch(silu, x, out)
    assert evidence.work(out)["decoded"] == 0
    for source in (x.float(), x.t().contiguous().t()):
        evidence.call(x)
        out = torch.zeros_like(x)
        evidence.launch(silu, source, out)
        found = evidence.work(out)
        assert found["shares"][0] > 0.98 and found["decoded"] == 0, found
    evidence.call(x)  # the same kernel over an eager answer it only decodes
    out = torch.zeros_like(x)
    evidence.launch(silu, (x.float() * 3).exp(), out)
    assert evidence.work(out)["shares"][0] < 0.05


def halve_and_pad(buf: torch.Tensor) -> None:
    """Halves the first ``ROWS`` rows in place, writes huge values of no operand's into the rest."""
    buf[:ROWS] = buf[:ROWS].float() * 0.5
    pad = buf[ROWS:]
    index = torch.arange(pad.numel(), dtype=torch.float64).reshape(pad.shape)
    pad.copy_((torch.sin(index * 12.9898) * 43758.5453 % 1.0 - 0.5) * 1e30)


def test_huge_values_written_beside_the_answer_do_not_widen_the_map_s_tolerance(evidence: Evidence) -> None:
    """Twice the answer halved in place, and beside it (in the same buffer, not returned) a sixteenth of huge values
    no map of the operands makes: an absolute tolerance from the sample's largest magnitude held nearly every answer
    element by chance too, and the map (missing only the padding) scored nothing beyond chance. The tolerance is
    the map's own terms at each element, and the answer is still decoded."""
    x, w = _inputs()
    evidence.call(x, w)
    buf = torch.zeros(ROWS + ROWS // 16, HIDDEN, dtype=torch.bfloat16)
    buf[:ROWS] = (_answer(x, w).float() * 2).to(torch.bfloat16)
    evidence.launch(halve_and_pad, buf)
    found = evidence.work(buf[:ROWS])
    assert found["shares"][0] < 0.05 and found["decoded"] > 0.9 * 2 * N * 0.7 and found["bytes"] < 2 * N // 8, found


def test_a_heavy_tailed_eager_answer_under_an_elementwise_kernel_is_decoded_at_every_seed() -> None:
    """The same elementwise kernel over an eager answer's exp (values over twenty decades): with the tolerance taken
    from the sample's largest magnitude, 1 seed in 80 or so scored under the decode's share (the luck of the few
    elements that tolerance did not hold by chance)."""
    for _ in range(40):
        for evidence in evidence_vault(N):
            x, _ = _inputs()
            evidence.call(x)
            out = torch.zeros_like(x)
            evidence.launch(silu, (x.float() * 3).exp(), out)
            assert evidence.work(out)["shares"][0] < 0.05


def normalise_rows(x: torch.Tensor, ws: torch.Tensor) -> None:
    xf = x.float()
    ws.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6))


def test_an_eager_step_between_two_launches_derives_from_the_first(evidence: Evidence) -> None:
    """Red team rt23 FP1, out of place: the first launch normalises the rows into a workspace, eager code multiplies
    it by the weight (a new tensor), the second launch casts that into the output. The multiplied workspace is a map
    of what the first launch made and of a problem input: derived from the DSL's work, as the draws' flow credits it,
    and the cast keeps its work (it was withdrawn as a cast of an eager answer)."""
    x, w = _inputs()
    evidence.call(x, w)
    ws, out = torch.empty(ROWS, HIDDEN), torch.empty_like(x)
    evidence.launch(normalise_rows, x, ws)
    scaled = ws * w.float()
    evidence.launch(cast, scaled, out)
    found = evidence.work(out)
    assert found["shares"][0] > 0.98 and found["decoded"] == 0, found


def test_an_eager_answer_of_wide_rows_beside_a_launch_copying_an_input_is_no_derivation() -> None:
    """Over rows of 4096 each row's RMSNorm scale varies ~1%, so the eager answer is within the fit's tolerance of one
    global map of the input and the weight: a first launch copying the input (launch-made values) must not make twice
    the answer, halved by the second launch, a derivation from the launches."""
    rows, hidden = 16, 4096
    for evidence in evidence_vault(rows * hidden):
        x = (2 * torch.randn(rows, hidden)).to(torch.bfloat16)
        w = (1 + 0.1 * torch.randn(hidden)).to(torch.bfloat16)
        evidence.call(x, w)
        copied, out = torch.empty_like(x), torch.empty_like(x)
        evidence.launch(cast, x, copied)
        twice = (_answer(copied, w).float() * 2).to(torch.bfloat16)  # bfloat16: the fit's loosest tolerance
        evidence.launch(unscale, twice, out)
        found = evidence.work(out)
        assert found["shares"][0] < 0.05, found


def test_an_answer_parked_in_an_input_then_restored_is_no_input(evidence: Evidence) -> None:
    """Eager code writes twice the answer over a problem input, the launch halves it into the output, eager code puts
    the input back before run() returns (the input-mutation check sees nothing): the input's bytes are judged as they
    were at the launch, against the digests taken when the call started."""
    x, w = _inputs()
    evidence.call(x, w)
    kept = x.clone()
    x.copy_((_answer(kept, w).float() * 2).to(torch.bfloat16))
    out = torch.empty_like(x)
    evidence.launch(unscale, x, out)
    x.copy_(kept)
    assert evidence.work(out)["shares"][0] < 0.05


def test_memory_a_reused_block_held_is_no_map_of_an_honest_kernel(evidence: Evidence) -> None:
    """The output's memory holds the previous call's output (a block the allocator hands back, a kept buffer): the
    written argument's own contents before the launch are among the operands, and an honest kernel's output of fresh
    inputs is no simple map of them."""
    out = torch.empty(ROWS, HIDDEN, dtype=torch.bfloat16)
    for _ in range(3):
        x, w = _inputs()
        evidence.call(x, w)
        evidence.launch(rms_norm, x, w, out)
        found = evidence.work(out)
        assert found["shares"][0] > 0.98 and found["decoded"] == 0, found


def test_a_halving_in_launches_of_few_elements_is_pooled(evidence: Evidence) -> None:
    """Each launch halves fewer elements than the rule's minimum (``DECODE_MIN_ELEMENTS``): pooled by storage."""
    x, w = _inputs()
    evidence.call(x, w)
    out = (_answer(x, w).float() * 2).to(torch.bfloat16)
    flat = out.view(-1)

    def halve_few(part: torch.Tensor) -> None:
        part.copy_(part.float() * 0.5)

    step = _decode.DECODE_MIN_ELEMENTS - 1
    for start in range(0, N, step):
        evidence.launch(halve_few, flat[start : start + step])
    assert evidence.work(out)["shares"][0] < 0.05


def test_a_raise_inside_the_fit_withdraws_the_launch_s_work() -> None:
    """Fails closed, as ``unjudged`` does on a draw: a raise is the submission's to cause."""
    lib = provenance_lib(torch.device("cpu"))

    def raising(*args: Any) -> Any:
        raise RecursionError("lowered")

    lib.decoded = raising
    for evidence in evidence_vault(N, lib):
        x, w = _inputs()
        evidence.call(x, w)
        out = torch.empty_like(x)
        evidence.launch(rms_norm, x, w, out)
        found = evidence.work(out)
        assert found["shares"] == [0.0] and found["bytes"] == 0 and found["decoded"] > 0.7 * 2 * N, found


@pytest.mark.parametrize("honest", [True, False], ids=["honest", "halved"])
def test_at_production_size(honest: bool) -> None:
    """p36 at PRODUCTION (65,536 rows of 128, bf16): the honest kernel keeps its work, the halving does not; the
    vault's time on the call (its decode fit of 8.4M changed elements included) stays within seconds."""
    rows = 65536
    for evidence in evidence_vault(rows * HIDDEN):
        x, w = _inputs(rows)
        evidence.call(x, w)
        start = time.perf_counter()
        if honest:
            out = torch.empty_like(x)
            evidence.launch(rms_norm, x, w, out)
        else:
            out = (_answer(x, w).float() * 2).to(torch.bfloat16)
            evidence.launch(halve, out)
        found = evidence.work(out)
        assert time.perf_counter() - start < 60
        if honest:
            assert found["shares"][0] > 0.98 and found["decoded"] == 0, found
        else:
            assert found["shares"][0] < 0.05, found


def _an_eighth_halved(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The output before the launch (twice the answer in the last eighth of the rows, NaN elsewhere) and which rows
    the launch halves there."""
    eighth = (torch.arange(ROWS) >= ROWS - ROWS // 8)[:, None].expand(ROWS, HIDDEN)
    twice = (_answer(x, w).float() * 2).to(torch.bfloat16)
    return torch.where(eighth, twice, torch.full_like(twice, float("nan"))), eighth


def rms_norm_or_halve(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, eighth: torch.Tensor) -> None:
    out.copy_(torch.where(eighth, out.float() * 0.5, _answer(x, w).float()).to(torch.bfloat16))


def test_an_eighth_halved_beside_the_kernel_s_own_rows_is_no_work(evidence: Evidence) -> None:
    """Red team rt48 F4: the call's one launch computes seven eighths of the rows and halves the eager rest in place.
    The map holds for an eighth of its changed elements, under ``DECODE_PEEL``; no correctness draw's launch held any
    (``peeled_on_draws``, none here), so the eighth is withdrawn (``DECODE_CONTRAST``). The share is measured on a
    sample of 512 elements: 0.875 within four of its standard errors (0.015; CI stop 48 saw 0.8945)."""
    x, w = _inputs()
    evidence.call(x, w)
    out, eighth = _an_eighth_halved(x, w)
    evidence.launch(rms_norm_or_halve, x, w, out, eighth)
    found = evidence.work(out)
    assert 0.815 <= found["shares"][0] <= 0.935 and found["decoded"] >= 0.1 * 2 * N * 0.7, found


@pytest.mark.parametrize("eager_norm", [False, True], ids=["dsl_norm", "eager_norm_between"])
def test_a_pipeline_over_a_launch_s_sum_keeps_its_work(eager_norm: bool) -> None:
    """Honest p28 in two launches: the residual sum (float32), then its RMSNorm (or eager code normalises the sum and
    the second launch applies the weight: red team rt49 k10). An evidence call knows no element's history: it takes
    the sum as a copy's source (its copied share reaches ``COPY_TAINT``), or the eager rows as eager data, where the
    draws credit both to the DSL; each row of the output is a line of them, lines peeled to 77% of the elements. The
    maps under half are held against the draws' in a call's first launch only (rejected in 3 of 11 runs before)."""
    rows, hidden = 16, 4096
    for evidence in evidence_vault(rows * hidden):
        for _ in range(2):
            h, r = torch.randn(rows, hidden).bfloat16(), torch.randn(rows, hidden).bfloat16()
            w = (1 + 0.1 * torch.randn(hidden)).bfloat16()
            evidence.call(h, r, w)
            summed, out = torch.empty(rows, hidden), torch.empty_like(h)

            def add(h: torch.Tensor, r: torch.Tensor, s: torch.Tensor) -> None:
                s.copy_(h.float() + r.float())

            def norm(s: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
                out.copy_((s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()).bfloat16())

            def weigh(s: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
                out.copy_((s * w.float()).bfloat16())

            evidence.launch(add, h, r, summed)
            if eager_norm:
                normed = summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-5)
                evidence.launch(weigh, normed, w, out)
            else:
                evidence.launch(norm, summed, w, out)
            found = evidence.work(out)
            assert found["shares"][0] > 0.98 and found["decoded"] == 0, found
