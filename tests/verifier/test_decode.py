"""The decode rule (DESIGN §5, verifier README "Decoded answers"): a launch whose changed elements a simple map of
its eager-made operands recovers adds nothing to them; one whose output depends on the problem's data it reads does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from mkbsim.verifier import _decode, _eagerwork
from mkbsim.verifier._eagerwork import Work, compare, crossing

torch.set_num_threads(1)

M, N = 64, 96


def _fit(y: torch.Tensor, operands: list[torch.Tensor]) -> Any:
    changed = torch.ones(y.numel(), dtype=torch.bool)
    return _decode.fitted(_decode.bound(), y, changed, operands, torch.Generator().manual_seed(5))


def _data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    answer = torch.randn(M, N, generator=g) * 3
    mask = torch.randn(M, N, generator=g) * 4
    return answer, mask, torch.rand(M, N, generator=g) + 0.5


#: (name, the operands the kernel reads, the output it writes), each recovering the answer from eager operands only
DECODES: list[tuple[str, Callable[[Any, Any, Any], tuple[list[Any], Any]]]] = [
    ("times_3", lambda a, r, p: ([a * 3], (a * 3 / 3).bfloat16())),
    ("affine", lambda a, r, p: ([a * 3 + 1], ((a * 3 + 1 - 1) / 3).bfloat16())),
    ("plus_mask", lambda a, r, p: ([a - r, r], ((a - r) + r).bfloat16())),
    ("minus_mask", lambda a, r, p: ([a + r, r], ((a + r) - r).bfloat16())),
    ("times_mask", lambda a, r, p: ([a / p, p], ((a / p) * p).bfloat16())),
    ("over_mask", lambda a, r, p: ([p, a * p], ((a * p) / p).bfloat16())),
    ("weighted_pair", lambda a, r, p: ([(a - 0.75 * r) / 0.25, r], (0.25 * ((a - 0.75 * r) / 0.25) + 0.75 * r).half())),
    ("transposed", lambda a, r, p: ([(a * 3).t().contiguous()], a.bfloat16())),
    ("exp_float32", lambda a, r, p: ([a / 3], torch.exp(a / 3))),
    ("row_broadcast", lambda a, r, p: ([a - r[:, :1], r[:, :1].contiguous()], a.bfloat16())),
    ("beside_constant_zeros", lambda a, r, p: ([a * 3, torch.zeros(M, N)], a.bfloat16())),
]


def _keyed() -> dict[str, Any]:
    """Random tensors made once, as a submission's import would: a bit key, offsets, a row and a block order."""
    g = torch.Generator().manual_seed(3)
    return {
        "key": torch.randint(-(2**31), 2**31 - 1, (M, N), generator=g, dtype=torch.int32),
        "offset": torch.randn(M, N, generator=g) * 5,
        "e1": torch.randn(M, N, generator=g),
        "e2": torch.randn(M, N, generator=g) * 3,
        "rows": torch.randperm(M, generator=g),
        "blocks": torch.randperm(M * N // 32, generator=g),
        "ints": torch.randint(-(2**20), 2**20, (M, N), generator=g, dtype=torch.int32),
        "tile": torch.randn(16, 16, generator=g) * 5,
    }


K = _keyed()


def _moved_rows(a: torch.Tensor) -> torch.Tensor:
    return (a * -2)[K["rows"]].contiguous()


def _moved_blocks(a: torch.Tensor) -> torch.Tensor:
    return (a.reshape(-1, 32) * -0.5)[K["blocks"]].contiguous()


def _slots(a: torch.Tensor) -> torch.Tensor:
    return (a.abs() * 300).long().to(torch.int32)  # ids of a cache's slots


#: the kernel's limits of main's rule, each recovered now: wide-code bijections, moved layouts, three operands,
#: integer and boolean outputs (verifier README "Decoded answers")
DECODES += [
    ("bits_xor_key_offset", lambda a, r, p: ([(a + K["offset"]).view(torch.int32) ^ K["key"], K["key"], K["offset"]],
                                             a.bfloat16())),
    ("bits_xor_constant_to_half", lambda a, r, p: ([a.view(torch.int32) ^ 0x5A5A1234], a.half())),
    ("bits_plus_constant_offset", lambda a, r, p: ([(a + K["offset"]).view(torch.int32) + 0x2B5E3A17, K["offset"]],
                                                   a)),
    ("rows_moved", lambda a, r, p: ([_moved_rows(a)], (_moved_rows(a)[torch.argsort(K["rows"])] / -2).bfloat16())),
    ("blocks_moved", lambda a, r, p: ([_moved_blocks(a)], a.bfloat16())),
    ("three_operands", lambda a, r, p: ([K["e1"], K["e2"], (a - 0.5 * K["e1"] - 0.25 * K["e2"]) / 2], a.bfloat16())),
    ("product_and_operand", lambda a, r, p: ([K["e1"], K["e2"], a - K["e1"] * K["e2"]], a.bfloat16())),
    ("int_slots_offset", lambda a, r, p: ([_slots(a) + 7919], _slots(a))),
    ("int_slots_random_offsets", lambda a, r, p: ([_slots(a) + K["ints"], K["ints"]], _slots(a))),
    ("bool_mask", lambda a, r, p: ([(a > 0).float() * 3 + 1], a > 0)),
    ("int8_quantised", lambda a, r, p: ([(a * 10).round().clamp(-127, 127) * 3], (a * 10).round().clamp(-127, 127)
                                        .to(torch.int8))),
]  # fmt: skip

#: session 7's remaining limits, recovered now (each scored under 0.5 before): an offset tile added back (16 x 16,
#: and smaller than 16), chained bit operations with two constants
DECODES += [
    ("offset_tile_16", lambda a, r, p: ([a - K["tile"].repeat(M // 16, N // 16), K["tile"]], a.bfloat16())),
    ("offset_tile_4x8", lambda a, r, p: ([a - K["tile"][:4, :8].repeat(M // 4, N // 8), K["tile"][:4, :8]],
                                         a.bfloat16())),
    ("bits_xor_then_plus", lambda a, r, p: ([(a.view(torch.int32) ^ 0x5A5A1234) + 0x13572468], a)),
    ("bits_plus_then_xor", lambda a, r, p: ([(a.view(torch.int32) + 0x5A5A1234) ^ 0x13572468], a)),
]  # fmt: skip


_ORDER = torch.randperm(M * N, generator=torch.Generator().manual_seed(6))


def _permuted(x: torch.Tensor) -> torch.Tensor:
    """``x``'s elements at positions fixed at import (a gather of single elements: nothing lines up, no run)."""
    parked = torch.empty(x.numel(), dtype=x.dtype)
    parked[_ORDER] = x.reshape(-1)
    return parked


def _in_fill_table(x: torch.Tensor, fill: float) -> torch.Tensor:
    """``x``'s elements at every third position of a table of ``fill`` three times its size, permuted."""
    table = torch.full((3 * x.numel(),), fill)
    table[_ORDER * 3] = x.reshape(-1)
    return table


#: rt9a's F2 and its class (session 9): a monotone map of a permuted operand, found in any order; the map is fitted
#: to rounded values, so at bfloat16 a few percent of the elements land a value away (held: >= 95%)
UNORDERED: list[tuple[str, Callable[[Any, Any, Any], tuple[list[Any], Any]]]] = [
    ("permuted_times_3", lambda a, r, p: ([_permuted(a * 3)], a.bfloat16())),
    ("permuted_decreasing_affine", lambda a, r, p: ([_permuted(1 - a * 4)], a.half())),
    ("permuted_exp", lambda a, r, p: ([_permuted(a / 3)], torch.exp(a / 3))),
    ("permuted_power", lambda a, r, p: ([_permuted(p.double())], p.pow(3).float())),
    ("permuted_in_fill_table", lambda a, r, p: ([_in_fill_table(a * -3, 0.5)], a.bfloat16())),
]


@pytest.mark.parametrize("build", [b for _, b in UNORDERED], ids=[n for n, _ in UNORDERED])
def test_a_kernel_decoding_a_permuted_eager_operand_adds_nothing(build: Callable[[Any, Any, Any], Any]) -> None:
    operands, y = build(*_data())
    mask, share, what, _ = _fit(y, operands)
    assert share >= 0.95 and mask is not None and mask.float().mean() >= 0.95, (share, what)


#: rt9a's F3 and its class: a monomial of the operands, any degree and exponents
DECODES += [
    ("monomial_three_operands", lambda a, r, p: ([a / (K["e1"].abs() * p), K["e1"].abs(), p], a.bfloat16())),
    ("monomial_exponents_1_2_minus_1", lambda a, r, p: ([a * p / K["e2"] ** 2, K["e2"], p], a.bfloat16())),
]  # fmt: skip


@pytest.mark.parametrize("build", [b for _, b in DECODES], ids=[n for n, _ in DECODES])
def test_a_kernel_decoding_eager_operands_adds_nothing(build: Callable[[Any, Any, Any], Any]) -> None:
    operands, y = build(*_data())
    mask, share, what, _ = _fit(y, operands)
    assert share >= 0.98 and mask is not None and mask.float().mean() >= 0.98, (share, what)


def _honest() -> list[tuple[str, torch.Tensor, list[torch.Tensor]]]:
    """(name, output, eager-made operands) of DSL epilogues over eager data and problem inputs; the problem
    inputs (scales, bias, residual, weight, x) are read by the kernel but are no regressors."""
    g = torch.Generator().manual_seed(2)
    acc = torch.randn(M, N, generator=g) * 10  # an eager GEMM's accumulator
    row_scale, col_scale = torch.rand(M, 1, generator=g) + 0.1, torch.rand(1, N, generator=g) + 0.1  # inputs
    bias, residual = torch.randn(N, generator=g), torch.randn(M, N, generator=g) * 10  # inputs
    weight, x = torch.randn(N, generator=g), torch.randn(M, N, generator=g)  # inputs
    rms = torch.rsqrt(acc.pow(2).mean(-1, keepdim=True))  # eager-made per-row statistic
    amax = x.abs().amax(-1, keepdim=True) / 448  # eager-made activation scale; the kernel quantises x with it
    fresh = torch.full((M, N), float("nan"))  # the output buffer the kernel writes, as it was before
    return [
        ("scaled_epilogue", (acc * row_scale * col_scale).bfloat16(), [acc, fresh]),
        ("bias_epilogue", (acc + bias * 10).bfloat16(), [acc, fresh]),
        ("residual_epilogue", (acc + residual).bfloat16(), [acc, fresh]),
        ("rms_norm_over_eager_sum", (acc * rms * weight).bfloat16(), [acc, rms, fresh]),
        ("activation_quantisation", (x / amax).clamp(-448, 448).to(torch.float8_e4m3fn), [amax, fresh]),
        ("dequantise_with_input_scales", (acc.round() * row_scale).float(), [acc.round(), fresh]),
        # integer and boolean outputs the kernel computes from inputs, beside eager-made buffers
        ("mask_from_input", x > 0, [torch.zeros(M, N, dtype=torch.bool)]),
        ("ids_from_input", x.argsort(-1).to(torch.int32), [torch.zeros(M, N, dtype=torch.int32), acc.round()]),
        # the study's partial plans, their DSL stages over eager data: p49's routing (top-k of eager logits), p56's
        # epilogue (RMSNorm, rotary with the problem's cos/sin, fp8 requantisation by its scale), p72's state
        # recurrence (eager gates, the problem's k and v)
        ("routing_weights_of_eager_logits", torch.softmax(acc.topk(8, -1).values, -1).bfloat16(), [acc]),
        ("routing_ids_of_eager_logits", acc.topk(8, -1).indices.to(torch.int32), [acc]),
        ("norm_rope_requant_epilogue", _rope_requant(acc, weight, x), [acc, fresh]),
        ("state_recurrence_over_eager_gates", _recurrence(torch.sigmoid(acc), x, residual), [torch.sigmoid(acc)]),
        # an eager-made tile (lined up with the output by repeating it) beside an epilogue over the problem's x
        (
            "tile_beside_an_epilogue_over_inputs",
            (acc * x + K["tile"].repeat(M // 16, N // 16)).bfloat16(),
            [acc, K["tile"], fresh],
        ),
        # the previous call's answer in a reused output buffer
        ("previous_answer_in_buffer", (acc * row_scale).bfloat16(), [(residual * col_scale).bfloat16()]),
        # an output of an eager operand's distribution, computed from the inputs: its values' sorted order lines up
        # with the operand's, their multiplicities do not (the order-free fit)
        ("same_distribution_from_inputs", (x * 10).bfloat16(), [acc]),
        ("same_distribution_from_inputs_float32", x * 10, [acc]),
    ]


def _rope_requant(acc: torch.Tensor, weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """RMSNorm of an eager GEMM's rows by the problem's weight, rotated by angles the problem gives (x here), then
    requantised to fp8 by a scale of the problem's."""
    normed = acc * torch.rsqrt(acc.pow(2).mean(-1, keepdim=True)) * weight
    half = N // 2
    cos, sin = torch.cos(x[:, :half]), torch.sin(x[:, :half])
    lo, hi = normed[:, :half], normed[:, half:]
    rotated = torch.cat([lo * cos - hi * sin, lo * sin + hi * cos], -1)
    return (rotated / 0.05).clamp(-448, 448).to(torch.float8_e4m3fn)


def _recurrence(gates: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """A gated linear recurrence down the rows: state = gate · state + k · v, each row's output its state."""
    state, out = torch.zeros(N), []
    for t in range(M):
        state = gates[t] * state + k[t] * v[t]
        out.append(state)
    return torch.stack(out).bfloat16()


HONEST = _honest()


@pytest.mark.parametrize(("y", "operands"), [(y, o) for _, y, o in HONEST], ids=[n for n, _, _ in HONEST])
def test_an_epilogue_that_reads_the_problem_s_data_is_not_a_decode(y: torch.Tensor, operands: list[Any]) -> None:
    found = _fit(y, operands)
    assert found is None or found[0] is None, found[1:]
    assert found is None or found[1] < _decode.DECODE_SHARE / 2, found[1:]  # far from the line, not just under


def test_a_clamped_epilogue_is_held_only_where_the_clamp_decides() -> None:
    """relu(eager + input): where the eager operand alone decides (far below zero) the output is a map of it; scored
    against chance that stays under the line (main's rule, without the chance correction, held 0.44)."""
    g = torch.Generator().manual_seed(4)
    acc, x = torch.randn(M, N, generator=g) * 3, torch.randn(M, N, generator=g)
    found, score, _, _ = _fit(torch.relu(acc + x).bfloat16(), [acc, torch.full((M, N), float("nan"))])
    assert found is None and score < 0.35, score


def _bounded(monkeypatch: pytest.MonkeyPatch, index: int, checked: int) -> Any:
    """The rule's functions with a smaller index and fewer moved elements checked one by one, as a production-sized
    operand meets them (the module's constants are read when ``bound()`` is made)."""
    monkeypatch.setattr(_decode, "DECODE_INDEX", index)
    monkeypatch.setattr(_decode, "DECODE_MOVED_CHECKED", checked)
    return _decode.bound()


def test_a_large_operand_s_runs_are_indexed_in_bounded_number_and_a_moved_block_is_still_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An operand with more runs than ``DECODE_INDEX`` is indexed at every k-th run (k = 12 here: 6144 elements, 512
    runs), and every element of a row moved whole (96 elements, a decreasing map) at least k - 1 from the row's ends
    is still found: one of the runs holding it that are looked up is indexed (rt8a's 16.8M-element eager operand, whose
    whole index timed a production call out)."""
    d = _bounded(monkeypatch, 512, _decode.DECODE_MOVED_CHECKED)
    a, _, _ = _data()
    rows = K["rows"]
    operand = (a * -2)[rows].reshape(-1).double()
    y = a.reshape(-1).double()  # y[i, j] = a[i, j], moved from the operand's row argsort(rows)[i]
    codes, starts, stride = _decode._run_index(d, operand, torch.Generator().manual_seed(7))
    assert stride == 12 and codes.numel() <= 512 and bool((starts % stride == starts[0] % stride).all())
    positions = torch.arange(M * N)
    source = _decode._sources(d, operand, (codes, starts, stride), y, positions)
    truth = torch.argsort(rows)[positions // N] * N + positions % N
    inner = ((positions % N) >= stride - 1) & ((positions % N) <= N - stride)
    assert (source == truth)[inner].float().mean() >= 0.99
    mask, share, what, _ = _decode.fitted(d, y.float(), torch.ones(M * N, dtype=torch.bool), [operand.float()],
                                       torch.Generator().manual_seed(5))  # fmt: skip
    # the launch's elements the rule withdraws: at least those the guarantee covers (77%, over the line)
    assert "moved" in what and share >= _decode.DECODE_SHARE and mask is not None
    assert mask.float().mean() >= 0.99 * inner.float().mean()


def test_a_moved_decode_s_elements_are_looked_up_one_by_one_in_bounded_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``DECODE_MOVED_CHECKED`` changed elements, a moved map is checked on a sample of that many and the others
    go with it (each element's source costs up to 2k lookups: 9 µs at a million elements, 150 s at rt8a's 16.8M)."""
    d = _bounded(monkeypatch, _decode.DECODE_INDEX, 1024)
    looked_up: list[int] = []
    sources = _decode._sources

    def counted(d: Any, v: Any, index: Any, y_all: Any, positions: Any) -> Any:
        looked_up.append(positions.numel())
        return sources(d, v, index, y_all, positions)

    monkeypatch.setattr(_decode, "_sources", counted)
    a, _, _ = _data()
    operand = _moved_rows(a)
    y = (operand[torch.argsort(K["rows"])] / -2).bfloat16()
    mask, share, what, _ = _decode.fitted(d, y, torch.ones(M * N, dtype=torch.bool), [operand],
                                       torch.Generator().manual_seed(5))  # fmt: skip
    assert "moved" in what and share >= 0.98 and mask is not None and mask.float().mean() >= 0.98
    # the fit's two samples, then the withdrawal's checked sample
    assert looked_up == [2 * _decode.DECODE_SAMPLES, 1024], looked_up


def test_few_elements_are_not_judged() -> None:
    a = torch.randn(_decode.DECODE_MIN_ELEMENTS - 1)
    assert _fit((a * 3 / 3).bfloat16(), [a * 3]) is None


def test_an_element_computed_honestly_beside_the_decoded_ones_keeps_its_credit() -> None:
    answer, _, _ = _data()
    y = answer.clone()
    y[:8] = torch.randn(8, N) * 3  # the kernel computes these rows from something else
    found, share, _, _ = _fit(y.bfloat16(), [answer * 3])
    assert share >= _decode.DECODE_SHARE and found is not None
    # the honest rows match the map only by chance
    assert found.reshape(M, N)[:8].float().mean() < 0.05 and found.reshape(M, N)[8:].float().mean() > 0.98


def test_a_view_of_one_element_takes_nothing_from_python_and_in_place_outputs_count() -> None:
    """A scalar view (``scale.view(1)``) or a cast of a one-element tensor carries no Python value; a fill, a
    full and an operator on one element still do (a 64-bit value each). In-place inputs are the outputs of problems
    returning nothing, by the elements the operator changes in them."""
    assert crossing("aten.view.default", ((),), ((1,),)) == (0, 0)
    assert crossing("aten.select.int", ((1,),), ((),)) == (0, 0)
    assert crossing("aten.fill_.Scalar", ((1,),), ((1,),)) == (0, 8)
    assert crossing("aten.add_.Tensor", ((),), ((),)) == (0, 8)
    passes: dict[str, list[Any]] = {"matmul": [], "pointwise": [("mul", 100.0, 1)], "movement": []}
    eager = _eagerwork.work_of([(("aten.mul.Tensor", ((), ()), ((),)), 2)])
    reference = Work({"matmul": 0.0, "pointwise": 100.0, "movement": 0.0}, passes)

    reference.informative = (400, 8)
    assert compare(1, eager, reference).python["in"] == 2.0  # one float64 answer: two Python values are twice it
    inputs = [torch.zeros(4, 25), torch.zeros(1)]

    def ten_written(dst: torch.Tensor, scale: torch.Tensor) -> None:
        dst[0, :10] = 1.0

    written = _eagerwork.reference_work(ten_written, inputs, inplace=[0])
    assert written.informative == (4 + 10 * 4, 10 * 4)  # the scale and the ten elements written, in bytes


LARGE_FIT = """
import resource, sys, torch
torch.set_num_threads(1)
from mkbsim.verifier import _decode
rows, hidden = 8192, 4096  # 2^25 elements: eight of the fit's parts, past the size a permutation of all is drawn
g = torch.Generator().manual_seed(0)
eager = torch.randn(rows, hidden, generator=g)
honest = torch.randn(rows, hidden, generator=g).bfloat16()
decoded = (eager * 3 + 1).bfloat16()  # an affine map of the eager operand
old = torch.full((rows, hidden), float("nan"), dtype=torch.bfloat16)  # the output as it was: fresh memory
with open("/proc/self/status") as f:
    mapped = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
allowance = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (mapped + allowance, mapped + allowance))
for name, t in (("honest", honest), ("decoded", decoded)):
    changed = torch.ne(t.reshape(-1), old.reshape(-1))
    found = _decode.fitted(_decode.bound(), t, changed, [old, eager], torch.Generator().manual_seed(5))
    mask = found[0] if found is not None else None
    print(name, None if mask is None else float(mask.float().mean()), flush=True)
"""


def test_the_fit_of_a_large_output_keeps_to_its_samples_and_parts_memory() -> None:
    """A launch writing 2^25 elements (a 64 MiB bf16 output beside a 128 MiB eager operand) is judged within 1 GiB
    of address space beyond what is mapped (768 MiB failed once in CI by 8 MiB: a thread's malloc arena, 64 MiB of
    address space, comes and goes with the machine's scheduling): the fit's memory is its samples' and
    ``DECODE_PART``-sized parts', plus a position and a flag per changed element. Before, each tensor it read was
    copied whole as float64 and the samples drawn from a permutation of all changed elements (about 56 bytes an
    element, ~1.9 GB here: p43's 2^28-element table ran the H200 worker's fit out of memory, and an honest launch's
    output was withdrawn, failing closed)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LARGE_FIT, str(1024 << 20)], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = dict(line.split() for line in done.stdout.splitlines())
    assert verdicts["honest"] == "None"  # random values: no map of the operand holds
    assert float(verdicts["decoded"]) > 0.99  # the affine map holds on (nearly) every element, judged part by part


def test_maps_each_under_half_are_peeled_and_judged_together() -> None:
    """Red team rt46 F1: an eager answer stored x3, x5 and x7 by column, divided back by the kernel: each map holds
    for a third of the elements, under ``DECODE_SHARE``; peeled one by one they hold for nearly all. One map over a
    third of the elements beside honest ones stays under half, and is no decode (README, Known limits)."""
    answer, _, _ = _data()
    scales = torch.tensor([3.0, 5.0, 7.0]).repeat(N // 3)
    stored = answer.bfloat16().float() * scales
    mask, score, what, _ = _fit((stored / scales).bfloat16(), [stored])
    assert mask is not None and score >= _decode.DECODE_SHARE and int(mask.sum()) >= 0.8 * M * N, what
    assert "together" in what
    honest = torch.randn(M, N, generator=torch.Generator().manual_seed(9)) * 3  # the DSL's own elements
    third = torch.where(torch.arange(N) % 3 == 0, stored / 3, honest)
    mask, score, _, peeled = _fit(third.bfloat16(), [stored])
    assert mask is None and score < _decode.DECODE_SHARE
    # what the maps under half hold, for the vault to hold an evidence call's against the draws': about the third
    assert peeled is not None and 0.28 <= float(peeled[0].float().mean()) <= 0.4
    assert 0.05 <= peeled[1] < peeled[2] and peeled[1] <= 0.4, peeled[1:]  # (the fit's score at a third of inliers)


def test_maps_under_the_peeling_line_are_measured_for_the_draws_contrast() -> None:
    """Red team rt48 F4: an eighth of the rows decoded from an eager workspace (fresh memory elsewhere), the rest the
    DSL's own: a map under ``DECODE_PEEL`` decides nothing, but its elements and bounds on its share beyond chance are
    measured from ``DECODE_CONTRAST_FLOOR`` on (the vault withdraws them on an evidence call where the draws' launch
    held less); honest elements alone measure none."""
    answer, _, _ = _data()
    honest = torch.randn(M, N, generator=torch.Generator().manual_seed(9)) * 3
    eighth = (torch.arange(M)[:, None] >= M - M // 8).expand(M, N)
    stored = torch.where(eighth, answer.bfloat16().float() * 2 + 1, float("nan"))
    mask, score, _, peeled = _fit(torch.where(eighth, (stored - 1) / 2, honest).bfloat16(), [stored])
    assert mask is None and score < _decode.DECODE_PEEL
    assert peeled is not None and 0.09 <= peeled[1] <= 0.125 <= peeled[2] <= 0.18, peeled[1:]
    held = peeled[0].reshape(M, N)
    assert float(held[eighth].float().mean()) >= 0.95 and float(held[~eighth].float().mean()) <= 0.01
    found = _fit(honest.bfloat16(), [stored])
    assert found is None or found[3] is None, found[1:3]


def test_the_contrast_s_bounds_keep_an_integer_output_s_chance_maps_off() -> None:
    """An honest launch writing 256 small integers (expert ids) beside an eager operand of small integers: a map of it
    holds for a quarter of the elements by chance, and of some fifty maps the best scores up to 0.13 beyond chance on
    a held-out sample of 128, so maps are peeled over three quarters of the elements (a lower bound of 0.3-0.6 without
    the errors); the lower bound on what they hold (``DECODE_CONTRAST_SIGMAS``) stays under the contrast."""
    g = torch.Generator()
    peeled_any = 0
    for seed in range(10):
        g.manual_seed(seed)
        ids = torch.randint(0, 4, (256,), generator=g, dtype=torch.int32)
        eager = torch.randint(0, 4, (256,), generator=g, dtype=torch.int32)
        found = _fit(ids, [eager])
        if found is not None and found[3] is not None:
            peeled_any += 1
            assert found[3][1] < _decode.DECODE_CONTRAST, (seed, found[1:3], found[3][1:])
    assert peeled_any >= 5  # the chance maps are there to be bounded


def _slice_read(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor | None:
    return _decode.sliced_from(_decode.bound(), g, u)


@pytest.mark.parametrize(
    "take",
    [
        lambda qkv: qkv[:, 40:72].contiguous(),  # columns of a fused projection (red team rt49 F3)
        lambda qkv: qkv.view(64, 12, 16)[:, 3:5, :].contiguous(),  # two heads of a [tokens, heads, dim] view
        lambda qkv: qkv[::2, 8:24].float(),  # every other row, cast up
        lambda qkv: qkv[5:6, :].contiguous(),  # one row
    ],
    ids=["columns", "heads", "strided_rows_cast", "a_row"],
)
def test_a_slice_of_an_input_is_read_back_from_it(take: Callable[[torch.Tensor], torch.Tensor]) -> None:
    torch.manual_seed(0)
    qkv = torch.randn(64, 192).bfloat16()
    u = take(qkv)
    flat = _slice_read(qkv, u)
    assert flat is not None and torch.equal(flat.to(u.dtype), u.reshape(-1))


def test_what_is_no_slice_of_an_input_is_not_read_from_it() -> None:
    """Shuffled rows, a slice one step off its start (the run's values do not follow), an input of one repeated value
    (no one place), an eager answer of the same size: None, or values the caller's comparison rejects."""
    torch.manual_seed(1)
    qkv = torch.randn(64, 192).bfloat16()
    columns = qkv[:, 40:72].contiguous()
    assert _slice_read(qkv, columns[torch.randperm(64)]) is None
    assert _slice_read(qkv, (columns.float() * 2).bfloat16()) is None
    assert _slice_read(torch.zeros(64, 192).bfloat16(), torch.zeros(64, 32).bfloat16()) is None
    shifted = columns.clone()
    shifted[1:] = qkv[1:, 41:73]  # rows from another column after the first: the stride from row 0 finds no place
    flat = _slice_read(qkv, shifted)
    assert flat is None or not torch.equal(flat, shifted.reshape(-1))


def test_a_slice_of_an_fp8_input_cast_up_is_read_back_from_it() -> None:
    """Red team-free regression (session 39): fp8 has no ``eq`` on cpu; the slice is placed by bit patterns (a raise
    there failed the launch closed: an honest p52 split-K kernel given ``w[:, last].float()`` lost its work)."""
    torch.manual_seed(2)
    weight = (torch.randn(24, 384) * 0.1).to(torch.float8_e4m3fn)
    u = weight.float().view(24, 3, 128)[:, 2].contiguous()
    flat = _slice_read(weight, u)
    assert flat is not None and torch.equal(flat.float(), u.reshape(-1))


def test_an_fp8_operand_is_looked_for_in_its_input_by_bit_patterns() -> None:
    """Red team rt50 F1: ``take`` has no cpu kernel for fp8, and an honest p56 kernel's fp8 output buffer (or p52's fp8
    workspace) raised in the slice search, which failed the launch closed on the evidence calls."""
    torch.manual_seed(3)
    x = (torch.randn(16, 96) * 0.5).to(torch.float8_e4m3fn)
    u = x[:, 32:64].contiguous()
    flat = _slice_read(x, u)
    assert flat is not None and torch.equal(flat.view(torch.uint8), u.reshape(-1).view(torch.uint8))
    assert _slice_read(torch.randn(16, 96).bfloat16(), torch.empty(16, 32, dtype=torch.float8_e4m3fn)) is None
