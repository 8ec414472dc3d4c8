"""The eager-work rule (DESIGN §5, verifier README "Eager work"): the submission's own eager operators priced
against the reference's; eager code doing most of every kind of the reference's work and most of its passes
leaves the DSL decorative, whatever the outputs depend on."""

from __future__ import annotations

import _thread
import functools
import importlib.util
import itertools
import math
import re
import types
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from mkbsim.catalog import load_problem, problems_root
from mkbsim.verifier import VerifierSession, _control, _eagerwork, _operators, _phases, _provenance, _widths
from mkbsim.verifier._eagerwork import Work, compare, op_work, reference_ops, reference_work, work_of
from mkbsim.verifier._judge import Failure
from mkbsim.verifier._operators import dispatch_hooks
from mkbsim.verifier._vault import Registry
from tests.kits.case_files import case_params
from tests.kits.eager_shares import shares_module
from tests.kits.timing_rules import timing_rules_off

ADVERSARIAL = Path(__file__).with_name("adversarial")
EVIDENCE = Path(__file__).with_name("evidence")
EAGER_CASES = sorted(ADVERSARIAL.glob("eagerwork_*.py"))


def test_products_are_priced_in_flops_and_everything_else_per_element() -> None:
    assert op_work("aten.mm.default", ((4, 8), (8, 3)), ((4, 3),)) == [("matmul", 2.0 * 4 * 8 * 3, 1)]
    assert op_work("aten.addmm.default", ((3,), (4, 8), (8, 3)), ((4, 3),)) == [("matmul", 2.0 * 4 * 8 * 3, 1)]
    assert op_work("aten.bmm.default", ((2, 4, 8), (2, 8, 3)), ((2, 4, 3),)) == [("matmul", 2.0 * 2 * 4 * 8 * 3, 1)]
    assert op_work("aten.convolution.default", ((1, 2, 5), (4, 2, 3)), ((1, 4, 3),)) == [("matmul", 2.0 * 12 * 6, 1)]
    mm, pw = op_work("aten._scaled_dot_product_flash_attention_for_cpu.default", ((1, 2, 4, 8),) * 3, ())[1:]
    assert mm == ("matmul", 2.0 * 2 * 4 * 4 * 8, 1) and pw == ("pointwise", 2 * 4 * 4, 4)
    # element operations: the largest tensor read or written; in-place and out= forms alike; fused ones by passes
    assert op_work("aten.mean.dim", ((4, 8),), ((4, 1),)) == [("pointwise", 32.0, 1)]
    assert op_work("aten.add_.Tensor", ((4, 8), (8,)), ((4, 8),)) == [("pointwise", 32.0, 1)]
    assert op_work("aten._softmax.default", ((4, 8),), ((4, 8),)) == [("pointwise", 32.0, 4)]
    # views and allocations are free; copies, casts, gathers and scatters move what they write
    assert op_work("aten.view.default", ((4, 8),), ((32,),)) == []
    assert op_work("aten.empty.memory_format", (), ((4, 8),)) == [] == op_work("prim.device.default", ((4, 8),), ())
    assert op_work("aten._to_copy.default", ((4, 8),), ((4, 8),)) == [("movement", 32.0, 1)]
    assert op_work("aten.index_put_.default", ((100, 8), (2,), (2, 8)), ((100, 8),)) == [("movement", 16.0, 1)]


def test_stores_that_add_or_multiply_into_their_destination_are_element_arithmetic() -> None:
    """``scatter_(..., reduce="multiply"|"add")`` (a tensor's or a value's) and ``index_put_``/``put_`` with
    ``accumulate=True`` compute: priced by their base names as movement (not judged where the problem computes),
    they made squares, row sums and scalings free (red team 8a, finding 3)."""
    store = ((100, 8), (2,), (2, 8))
    assert op_work("aten.index_put_.default", store, ((100, 8),)) == [("movement", 16.0, 1)]
    assert op_work("aten.index_put_.default" + _eagerwork.ACCUMULATES, store, ((100, 8),)) == [("pointwise", 800.0, 1)]
    assert op_work("aten.scatter_.src", ((100, 8), (2, 8), (2, 8)), ((100, 8),)) == [("movement", 16.0, 1)]
    for overload in ("reduce", "value_reduce", "reduce_out", "value_reduce_out"):
        assert _eagerwork.category(f"aten.scatter.{overload}") == "elementwise", overload
    x, i, v = torch.zeros(6), torch.tensor([0, 1, 1]), torch.ones(3)
    calls = {
        "index_put": lambda: x.clone().index_put_((i,), v, accumulate=True),
        "index_put positional": lambda: x.clone().index_put_((i,), v, True),
        "_index_put_impl": lambda: torch.ops.aten._index_put_impl_(x.clone(), (i,), v, True),
        "_unsafe_index_put": lambda: torch.ops.aten._unsafe_index_put(x, (i,), v, True),
        "put": lambda: x.clone().put_(i, v, accumulate=True),
        "scatter multiply": lambda: x.clone().scatter_(0, i, v, reduce="multiply"),
        "scatter value add": lambda: x.clone().scatter_(0, i, 2.0, reduce="add"),
    }
    for what, call in calls.items():
        for ops in (reference_ops(call, []), _vault_records(call, [])):
            work = work_of(ops)
            assert work.amounts["pointwise"] >= 6 and work.amounts["movement"] <= 6, (what, ops)
    plain = work_of(_vault_records(lambda: x.clone().index_put_((i,), v), []))
    assert plain.amounts["pointwise"] == 0, plain


def test_every_operator_an_argument_can_make_compute_is_priced_as_compute_then() -> None:
    """Every aten schema with an ``accumulate`` or a ``reduce`` argument: an accumulating store is marked where its
    flag is (``ACCUMULATE_AT``) and priced per element; a reducing overload is never movement."""
    for schema in torch._C._jit_get_all_schemas():
        namespace, _, op = schema.name.partition("::")
        names = [a.name for a in schema.arguments]
        name = f"{namespace}.{op}.{schema.overload_name or 'default'}"
        if namespace != "aten" or not {"accumulate", "reduce"} & set(names):
            continue
        if "accumulate" in names:
            assert _eagerwork._operator(name)[1] in _eagerwork.ACCUMULATING, name
            assert names.index("accumulate") == _eagerwork.ACCUMULATE_AT, name
            assert _eagerwork.category(name + _eagerwork.ACCUMULATES) == "elementwise", name
        else:
            assert _eagerwork.category(name) not in ("none", "movement"), name


#: Arithmetic that must never be priced as movement or as free, whatever operator torch dispatches for it.
ARITHMETIC: dict[str, Any] = {
    "lerp": lambda x: torch.lerp(x, x.flip(0), 0.3),
    "addcmul": lambda x: torch.addcmul(x, x, x),
    "where of products": lambda x: torch.where(x > 0, x * 2, x),
    "cumsum": lambda x: torch.cumsum(x, 0),
    "cumprod": lambda x: torch.cumprod(x, 0),
    "logcumsumexp": lambda x: torch.logcumsumexp(x, 0),
    "einsum": lambda x: torch.einsum("ij,jk->ik", x, x),
    "baddbmm": lambda x: torch.baddbmm(x[None], x[None], x[None]),
    "conv as a product": lambda x: F.conv1d(x.t()[None], x[:, :, None]),
    "fft": lambda x: torch.fft.rfft(x, dim=0),
    "linalg solve": lambda x: torch.linalg.solve(x + 8 * torch.eye(8), x),
    "inverse": lambda x: torch.linalg.inv(x + 8 * torch.eye(8)),
    "sort": lambda x: torch.sort(x, dim=1),
    "topk": lambda x: torch.topk(x, 3, dim=1),
    "index_add": lambda x: torch.zeros(8, 8).index_add_(0, torch.arange(8) % 2, x),
    "index_reduce": lambda x: torch.ones(8, 8).index_reduce_(0, torch.arange(8) % 2, x, "prod"),
    "scatter_reduce": lambda x: torch.zeros(8, 8).scatter_reduce_(0, torch.arange(64).view(8, 8) % 8, x, "sum"),
    "scatter_add": lambda x: torch.zeros(8, 8).scatter_add_(0, torch.arange(64).view(8, 8) % 8, x),
    "embedding_bag": lambda x: F.embedding_bag(torch.arange(8), x, torch.tensor([0, 4])),
    "negation": lambda x: x.neg(),
    "dequantisation": lambda x: x.to(torch.float8_e4m3fn).float() * 3.0,
}


@pytest.mark.parametrize("what", list(ARITHMETIC))
def test_arithmetic_is_never_priced_as_movement(what: str) -> None:
    """Each of these does at least one element operation per element of its 8x8 operand, priced as compute."""
    x = torch.randn(8, 8)
    work = work_of(reference_ops(ARITHMETIC[what], [x]))
    assert work.amounts["matmul"] + work.amounts["pointwise"] >= x.numel(), work.amounts


def test_lookups_by_a_much_smaller_table_and_compactions_are_element_work() -> None:
    # a table of 256 values looked up by 4096 codes evaluates a function 4096 times (rt25b F2/F3); a problem's own
    # gathers (cache rows by a block table, embedding rows) read as much as they write
    for name in ("aten.index.Tensor", "aten.take.default", "aten.index_select.default", "aten.gather.default"):
        assert op_work(name, ((256,), (4096,)), ((4096,),)) == [("pointwise", 4096.0, 1)]
        assert op_work(name, ((4096, 8), (512,)), ((512, 8),)) == [("movement", 4096.0, 1)]
    assert op_work("aten.embedding.default", ((16, 64), (4096,)), ((4096, 64),))[0][0] == "pointwise"
    assert op_work("aten.embedding.default", ((32000, 64), (128,)), ((128, 64),))[0][0] == "movement"
    # a compaction reads every element of its input, however few it finds (rt25c F1: a counting sort's collection)
    assert op_work("aten.nonzero.default", ((64, 4096),), ((3, 2),)) == [("pointwise", 64.0 * 4096, 1)]
    # ... and so does indexing by a boolean mask (an index operand larger than the result), rt25c F1b
    assert op_work("aten.index.Tensor", ((64, 4096), (64, 4096)), ((12,),)) == [("pointwise", 64.0 * 4096, 1)]
    assert op_work("aten.masked_select.default", ((64, 4096), (64, 4096)), ((12,),)) == [("pointwise", 64.0 * 4096, 1)]
    assert op_work("aten.index.Tensor", ((64, 4096), (16,)), ((16, 4096),)) == [("movement", 16.0 * 4096, 1)]
    # a lookup into a table made from constants (the vault's mark, the count it took there after the result's sizes):
    # the elements it took there, however large the table, the rest moved
    tabled = "aten.index.Tensor" + _eagerwork.TABLED
    assert op_work(tabled, ((1 << 17,), (8000,)), ((8000,), (8000,))) == [("pointwise", 8000.0, 1)]
    assert op_work(tabled, ((1 << 17,), (8000,)), ((8000,), (3,))) == [("pointwise", 3.0, 1), ("movement", 7997.0, 1)]
    # ... and a small table stays a function of all the result, whatever few entries of it were constants (the CI run
    # of session 26: the entry of code 0 left as the zeros the table was made with, 3 of 4096 taken there, priced 3)
    assert op_work(tabled, ((256,), (4096,)), ((4096,), (3,))) == [("pointwise", 4096.0, 1)]
    # the vault's judgement of a lookup, by what stands behind its table (rt26 F3, rt27 F1-F3), or of one moving the
    # call's own data or reading a table of its own indices (rt27's false positive: a request's row for each token)
    evaluated, moved = "aten.take.default" + _eagerwork.EVALUATED, "aten.index.Tensor" + _eagerwork.MOVED
    assert op_work(evaluated, ((1 << 22,), (4096,)), ((4096,),)) == [("pointwise", 4096.0, 1)]
    assert op_work(moved, ((256,), (8128,)), ((8128,),)) == [("movement", 8128.0, 1)]


def test_integer_lanes_copied_out_of_a_wider_view_stay_the_narrow_data_float_results_do_not() -> None:
    """Arithmetic within a register on uint8 data copied out of an int64 view is priced per byte, after the copy too;
    a float result of packed scale bytes (p18's and p24's references: ``.contiguous().view(torch.float32)``, cast) is
    data of its own width: the operations after the cast are priced as they were."""
    data = torch.randint(0, 256, (64, 64), dtype=torch.uint8)
    swar = {name for (name, _, _), _ in reference_ops(lambda x: (x.view(torch.int64).clone() ^ 1) + 3, [data])}
    assert {"aten.clone.default+x8", "aten.bitwise_xor.Scalar+x8", "aten.add.Tensor+x8"} <= swar, swar
    scales = {name for (name, _, _), _ in reference_ops(lambda x: x.view(torch.float32).to(torch.bfloat16) * 2, [data])}
    assert {"aten._to_copy.default+x4", "aten.mul.Tensor"} <= scales, scales


def test_fourier_transforms_are_products_and_complex_calls_multiply() -> None:
    """Red team rt28b F3: p67's long convolution as an eager rfft/irfft pair, priced one element pass each, was a full
    plan at 0%; a transform is a product of 2.5 n log2 n FLOPs (real) along the dimension the complex side halves.
    F2: a complex multiplication by addcmul, lerp or prod escaped the factor of mul and div."""
    points = _eagerwork.FFT_POINTS
    assert op_work("aten._fft_r2c.default" + points + "4096", ((8, 768, 4096),), ((8, 768, 2049),)) == [
        ("matmul", 2.5 * 8 * 768 * 4096 * 12, 1)
    ]
    assert op_work("aten._fft_c2r.default" + points + "128", ((768, 65, 8),), ((768, 128, 8),)) == [
        ("matmul", 2.5 * 768 * 128 * 8 * 7, 1)
    ]
    assert op_work("aten._fft_c2c.default" + points + "256", ((4, 256),), ((4, 256),)) == [
        ("matmul", 5.0 * 4 * 256 * 8, 1)
    ]
    # unmarked, at the most it could have run along (all its points)
    assert op_work("aten._fft_c2c.default", ((4, 256),), ((4, 256),)) == [("matmul", 5.0 * 4 * 256 * 10, 1)]
    x = torch.randn(16, 64, 2)
    for glue in (
        lambda x: torch.addcmul(torch.zeros_like(torch.view_as_complex(x)), *[torch.view_as_complex(x)] * 2),
        lambda x: torch.lerp(torch.zeros_like(torch.view_as_complex(x)), torch.view_as_complex(x), 0.5),
        lambda x: torch.stack((torch.view_as_complex(x), torch.view_as_complex(x))).prod(0),
    ):
        names = {name for (name, _, _), _ in reference_ops(glue, [x])}
        assert any(_eagerwork.category(n) == "elementwise" and n.endswith(_eagerwork.WIDER + "6") for n in names), names
    spectra = {name for (name, _, _), _ in reference_ops(lambda x: torch.fft.irfft(torch.fft.rfft(x) * 2), [x])}
    # their price counts complex work: no width mark
    assert {"aten._fft_r2c.default+n2", "aten._fft_c2r.default+n2"} <= spectra, spectra


def test_a_wide_significand_is_priced_as_the_float32_work_its_hardware_does() -> None:
    """Red team rt28b F1: four e2m1 block sums packed by arithmetic into a float64 (13 bits a lane), one float64 bmm
    column for four of p59's output columns. A float64 product costs (53/24)^2 ~ 5 float32 ones (a multiplier's area),
    a 64-bit integer one (63/24)^2 ~ 7, a 32-bit one 3 (its lanes of 10 bits: rt29b F3), float64 element work 53/24 ~
    2; float32 and narrower cost what they did, and a float64 view of float32 data is priced by the data it holds, not
    as float64 arithmetic."""
    x, w = torch.randn(8, 32), torch.randn(16, 32)
    wide = _eagerwork.WIDER

    def names(glue: Any, *inputs: torch.Tensor) -> set[str]:
        return {name for (name, _, _), _ in _placeless(reference_ops(glue, list(inputs)))}

    assert "aten.mm.default" + wide + "5" in names(lambda x, w: x.double() @ w.double().T, x, w)
    assert "aten.mm.default" + wide + "7" in names(lambda x, w: x.long() @ w.long().T, x, w)
    assert "aten.mm.default" + wide + "3" in names(lambda x, w: x.int() @ w.int().T, x, w)  # rt29b F3: int32 lanes
    assert {"aten.mul.Tensor" + wide + "2", "aten.sum.default" + wide + "2"} <= names(
        lambda x: (x.double() * 3).sum(), x
    )
    assert "aten.mm.default" in names(lambda x, w: x @ w.T, x, w)
    assert "aten.mul.Tensor" in names(lambda x: x.bfloat16() * 3, x)
    assert "aten.add.Tensor" + wide + "2" in names(lambda x: x.view(torch.float64) + 1, x)  # two float32s an element
    packed = {name for (name, _, _), _ in _placeless(_vault_records(_float64_lanes, [x.clone(), w.clone()]))}
    assert "aten.bmm.default" + wide + "5" in packed, packed


def _float64_lanes(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """rt28b F1's shape: lanes packed by arithmetic into a fresh float64 (its own width), one bmm over them."""
    lanes = w.round().double().reshape(4, 4, 32)
    packed = lanes[0] + lanes[1] * 2.0**13 + lanes[2] * 2.0**26 + lanes[3] * 2.0**39
    return torch.bmm(x.round().double().unsqueeze(0), packed.T.unsqueeze(0))


def test_integer_element_work_is_priced_at_the_gpu_s_integer_rate() -> None:
    """Red team rt30a F2: p59's GEMM as a broadcast int64 ``mul`` and ``sum`` over four 16-bit weight columns a lane
    (partial 0.28 where its one-column twin was decorative). Integer element work is priced as the GPU issues it:
    int32 at half float32's rate (2), int64 as two or more of those (3), a multiplication or division as an integer
    product (3 and 7); narrower integers and floats as before. And a storage written through a narrower view holds
    that narrow data from then on (the lanes packed by ``copy_`` into an int16 view of an int64 ``zeros`` buffer)."""
    wide = _eagerwork.WIDER
    x = torch.randint(0, 16, (8, 32))

    def names(glue: Any, *inputs: torch.Tensor) -> set[str]:
        return {name for (name, _, _), _ in reference_ops(glue, list(inputs))}

    assert {"aten.mul.Tensor" + wide + "7", "aten.sum.default" + wide + "3"} <= names(lambda x: (x * x).sum(), x)
    assert {"aten.mul.Tensor" + wide + "3", "aten.add.Tensor" + wide + "2"} <= names(lambda x: x.int() * x.int() + 1, x)
    assert "aten.remainder.Scalar" + wide + "7" in names(lambda x: x % 5, x)
    assert {"aten.mul.Tensor", "aten.add.Tensor"} <= names(lambda x: x.short() * x.short() + 1, x)
    assert "aten.mul.Tensor" + wide + "2" in names(lambda x: x.double() * 3, x)  # a wide float's: element work
    lib, made = _widths.bound(), {}
    buffer = torch.zeros(8, 32, dtype=torch.int64)
    _widths.made_as(lib, made, [buffer])
    lanes = buffer.view(torch.int16)
    _widths.priced(lib, made, "aten.copy_.default", [lanes, x.short()], [lanes])
    assert _widths.held(lib, made, buffer) == 2
    assert _widths.widened(lib, made, "aten.mul.Tensor", [buffer]) == (4, 2)  # four 16-bit lanes an element


def test_a_storage_s_record_ends_with_it() -> None:
    """What a storage held is known while it lives: a new storage at a freed one's address holds its own data (a
    float32 product written where bf16 data had been was priced twice over, on whichever calls the allocator placed
    so: the references of p04, p14, p59...); a view keeps its storage's record after the tensor that made it is gone."""
    lib, made = _widths.bound(), {}
    dead = weakref.ref(torch.zeros(4, dtype=torch.bfloat16).untyped_storage())
    assert dead() is None
    product = torch.randn(4, 4)
    made[_widths.address(lib, product)] = (2, dead)
    assert _widths.held(lib, made, product) == 4
    assert _widths.widened(lib, made, "aten.mm.default", [product]) == (1, 0)
    data = torch.randint(0, 256, (64,), dtype=torch.uint8)
    _widths.made_as(lib, made, [data])
    view = data.view(torch.int64)
    del data
    assert _widths.held(lib, made, view) == 1
    assert _widths.widened(lib, made, "aten.bitwise_xor.Scalar", [view]) == (8, 1)


def test_a_transform_is_priced_by_the_points_it_runs_along_and_conv_tbc_by_its_weight_s_layout() -> None:
    """Red team rt29b F1: p67's transforms along a dimension before a trailing one of size 1 (``fft(x[..., None],
    dim=-2)``) were priced at log2(2) a point, the length read off the last dimension; F2: ``conv_tbc``'s weight is
    [kernel, Cin, Cout], its kernel length was taken for Cout, a causal convolution of one channel priced as one tap.
    The vault records a transform's points as the reference's recorder does."""
    x = torch.randn(2, 3, 64)

    def names(glue: Any) -> list[str]:
        return sorted(name for (name, _, _), _ in reference_ops(glue, [x]))

    marked = _eagerwork.FFT_POINTS
    trailing = names(lambda x: torch.fft.ifft(torch.fft.fft(x[..., None], n=128, dim=-2), dim=-2).real)
    assert "aten._fft_c2c.default" + marked + "128" in trailing, trailing
    assert "aten._fft_r2c.default" + marked + "128" in trailing, trailing
    two = names(lambda x: torch.fft.irfft2(torch.fft.rfft2(x), s=(3, 64)))
    assert {"aten._fft_r2c.default" + marked + "192", "aten._fft_c2r.default" + marked + "192"} <= set(two), two
    for glue in (lambda x: torch.fft.fft(x[..., None], dim=-2), lambda x: torch.fft.irfft(torch.fft.rfft(x), n=64)):
        assert sorted(_vault_records(glue, [x.clone()])) == sorted(reference_ops(glue, [x]))
    # one channel, a 4096-tap causal filter: 4096 multiply-adds an output element
    assert op_work("aten.conv_tbc.default", ((8191, 1, 1), (4096, 1, 1), (1,)), ((4096, 1, 1),)) == [
        ("matmul", 2.0 * 8191 * 4096, 1)
    ]


def test_an_attention_backward_is_priced_from_its_query_key_and_value() -> None:
    """Red team rt29b F4: an attention operator was priced as a forward from its first three operands; a backward's
    are (grad_out, query, key), so its scores were the query length by itself: p03's attention as one backward call
    a query row passed as a full plan at 1.5%. A backward recomputes the scores and makes four products through them."""
    q, k, v = (1, 8, 1, 64), (1, 8, 4096, 64), (1, 8, 4096, 64)
    forward = op_work("aten._scaled_dot_product_flash_attention_for_cpu.default", (q, k, v), ((1, 8, 1, 64),))
    backward = op_work("aten._scaled_dot_product_flash_attention_for_cpu_backward.default", (q, q, k, v, q, (1, 8, 1)),
                       (q, k, v))  # fmt: skip
    scores = 8 * 4096
    assert forward[0] == ("matmul", 2.0 * scores * 64, 1)
    assert backward[0] == ("matmul", 2.0 * scores * (3 * 64 + 2 * 64), 1)
    flash = op_work("aten._flash_attention_backward.default", ((1, 1, 8, 64), (1, 1, 8, 64), (1, 4096, 8, 64),
                                                                (1, 4096, 8, 64)), ())  # fmt: skip
    assert flash[0] == backward[0]


def test_the_per_sample_weights_gradient_of_an_embedding_bag_is_a_dot_product_an_index() -> None:
    """Red team rt29c F3: ``_embedding_bag_per_sample_weights_backward(grad [M, D], weight [N, D], indices, ...)``,
    one D-long dot product an index (every (bag, row) pair an index: a GEMM), was priced by the forward's rule from
    the weight's size, D·D a row: p59's GEMM as one such call a K column at 9% of its products."""
    grad, weight, indices = (16, 1), (32, 1), (512,)
    assert op_work("aten._embedding_bag_per_sample_weights_backward.default", (grad, weight, indices, (16,), (512,)),
                   ((512,),)) == [("matmul", 2.0 * 512 * 1, 1)]  # fmt: skip
    assert op_work("aten._embedding_bag.default", ((32, 64), indices, (16,)), ((16, 64),))[0] == (
        "matmul", 2.0 * 512 * 64, 1)  # fmt: skip


def test_a_call_on_data_seen_through_a_wider_dtype_is_priced_by_the_data_it_holds() -> None:
    # red team rt28: p25's uint8 block copy through complex128 views, 16 bytes an element; an RMSNorm on complex pairs
    wider = _eagerwork.WIDER
    assert op_work("aten.where.self_out" + wider + "16", ((1,), (32, 256), ()), ((32, 256),)) == [
        ("pointwise", 16.0 * 32 * 256, 1)
    ]
    assert op_work("aten.mul.Tensor" + wider + "2", ((64, 64), (64, 1)), ((64, 64),)) == [("pointwise", 8192.0, 1)]
    assert op_work("aten.index.Tensor+evaluated" + wider + "8", ((16,), (4096,)), ((4096,),)) == [
        ("pointwise", 8.0 * 4096, 1)
    ]
    # an accumulating store keeps its mark however many follow (the marks are read anywhere in the name)
    accumulating = "aten.index_put_.default" + _eagerwork.ACCUMULATES
    sizes = (((64,), (8,), (8,)), ((64,),))
    assert op_work(accumulating + wider + "4", *sizes) == [("pointwise", 4 * op_work(accumulating, *sizes)[0][1], 1)]
    assert op_work(accumulating, *sizes)[0][0] == "pointwise"


def test_a_lookup_into_a_table_made_before_the_call_is_the_function_it_tabulates(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team rt25b F1: p26's ``p // bs`` and ``block * bs`` tabulated at import, larger than a call's tokens, and
    looked up eagerly passed as a full plan (the lookups priced as movement). The vault counts the values made from
    nothing the call was given (the census's storages, what eager operators make from them alone) through a clone,
    writes to a one-element view, an indexed store and a strided column: the plan is the same partial plan, with at
    least the eager share, as its twin computing the two functions with eager operators."""
    timing_rules_off(monkeypatch)
    computed = cpu_session.verify(EVIDENCE / "import_time_tables_computed_eagerly_p26.py", "p26", "tirx")
    assert computed.correct and computed.plan == "partial", computed.feedback
    looked_up = cpu_session.verify(EVIDENCE / "import_time_tables_looked_up_p26.py", "p26", "tirx")
    assert looked_up.correct and looked_up.plan == "partial", looked_up.feedback
    assert looked_up.plan_eager_share >= computed.plan_eager_share, (looked_up.feedback, computed.feedback)


def test_the_classification_tables_name_torch_s_operators_and_no_arithmetic_one_moves() -> None:
    """Every base name the free and movement tables hold is an aten operator, none tagged pointwise or
    reduction by torch (``clone`` aside: a copy), and the fused and listed computing ones are no movement."""
    for base in _eagerwork._MOVEMENT:
        assert hasattr(torch.ops.aten, base), base
        assert not (_eagerwork._tags(base) & _eagerwork._ELEMENT_TAGS) or base == "clone", base
    for base in (*_eagerwork._ELEMENTWISE, *_eagerwork._WEIGHTS, *_eagerwork.PRODUCTS):
        assert base not in _eagerwork._MOVEMENT, base


def _matmul_priced(call: Any) -> float:
    return work_of(reference_ops(call, [])).amounts["matmul"]


def test_every_product_is_priced_at_its_flops_whatever_operator_computes_it() -> None:
    """A GEMM through an operator that is no matrix multiply by name (``F.bilinear``'s ``_trilinear``,
    ``F.embedding_bag`` with per-sample weights, distances, packed-weight products, multi-head attention) costs
    its FLOPs: priced as one pass over its largest tensor, it hid an eager GEMM from the rule."""
    torch.manual_seed(0)
    t, k, n = 6, 32, 10
    a, w = torch.randn(t, k), torch.randn(n, k)
    gemm = 2.0 * t * k * n
    bags = (torch.arange(k).repeat(t), w.t().contiguous(), torch.arange(t) * k)
    q = torch.randn(1, 2, 4, 8)
    x, embed = torch.randn(2, 5, 16), 16
    weights = (torch.randn(3 * embed, embed), torch.zeros(3 * embed), torch.randn(embed, embed), torch.zeros(embed))
    cases = {
        "bilinear": (lambda: F.bilinear(a, torch.ones(t, 1), w[:, :, None]), gemm),
        "embedding_bag": (lambda: F.embedding_bag(*bags, mode="sum", per_sample_weights=a.reshape(-1)), gemm),
        "cdist": (lambda: torch.cdist(a[None], w[None]), gemm),
        "int8 weights": (lambda: torch.ops.aten._weight_int8pack_mm(a, w.to(torch.int8), torch.ones(n)), gemm),
        "linear": (lambda: F.linear(a, w, torch.zeros(n)), gemm),
        "einsum": (lambda: torch.einsum("tk,nk->tn", a, w), gemm),
        "baddbmm": (lambda: torch.baddbmm(torch.zeros(1, t, n), a[None], w.t()[None]), gemm),
        "conv1d": (lambda: F.conv1d(a.t()[None], w[:, :, None]), gemm),
        "sdpa": (lambda: F.scaled_dot_product_attention(q, q, q), 4.0 * 2 * 4 * 4 * 8),
        "multi-head attention": (
            lambda: torch._native_multi_head_attention(x, x, x, embed, 4, *weights),
            2.0 * 4 * 10 * embed * embed + 4.0 * 2 * 5 * 5 * embed,
        ),
    }
    for name, (call, flops) in cases.items():
        assert _matmul_priced(call) >= flops * (1 - 1e-9), name


def test_an_operator_the_model_does_not_know_costs_the_most_it_could_have_done() -> None:
    """Unknown (unlisted, untagged by torch, or a custom namespace's, whatever its name): at least the
    contraction its operands allow and a pass over all of them."""
    m, k, n = 8, 64, 16
    for name in ("aten.some_new_op.default", "mylib.view.default", "mylib.mm.default"):
        assert _eagerwork.category(name) == "bound", name
        work = {kind: amount for kind, amount, _ in op_work(name, ((m, k), (k, n)), ((m, n),))}
        assert work["matmul"] >= 2.0 * m * k * n * (1 - 1e-9) and work["pointwise"] >= m * k + k * n + m * n
    assert _eagerwork.category("aten.view.default") == "none"
    assert _eagerwork.category("aten.masked_fill_.Scalar") == "elementwise"  # by torch's tag of masked_fill


def test_every_operator_of_the_references_has_a_price_of_its_own() -> None:
    """The unknown operator's bound prices a submission's exotic operators, never a reference (where it would
    raise the bar)."""
    for path in sorted(problems_root().glob("*/[0-9][0-9]_*.py")):
        problem = load_problem(path)
        ops = reference_ops(problem.reference, list(problem.make_inputs(problem.smoke, seed=0)))
        unknown = {name for (name, _, _), _ in ops if _eagerwork.category(name) == "bound"}
        assert not unknown, (problem.id, unknown)


def test_a_pass_split_into_row_chunks_is_still_that_pass() -> None:
    """The calls of one operator are pooled: an eager RMSNorm done four rows at a time stands for every pass
    of the reference's (it matched a third before), and one call as large as four passes for the four (a loop
    batched into one call: red team 9a's F7, one pass before)."""
    x, w = torch.randn(16, 64), torch.randn(64)

    def norm(rows: torch.Tensor) -> torch.Tensor:
        return rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    whole = work_of(reference_ops(norm, [x]))
    chunked = compare(1, work_of(reference_ops(lambda x: torch.cat([norm(r) for r in x.chunk(4)]), [x])), whole)
    assert chunked.passes == 1.0 and chunked.covers
    mul = "aten.mul.Tensor"
    large = work_of([((mul, ((256,), (256,)), ((256,),)), 1)])
    assert compare(1, large, work_of([((mul, ((64,), (64,)), ((64,),)), 4)])).passes == 1.0


def test_chunks_of_a_pass_computed_by_other_operators_are_still_that_pass() -> None:
    """eagerwork_chunks_renamed: each chunk's stages written with other operators (``mul``/``pow``/``square``,
    ``mean``/``sum`` and ``div``, ``add``/``sub``, ``rsqrt``/``reciprocal`` of ``sqrt``/``exp2`` of ``log2``, a
    product or a division by the reciprocal). Pooled by operator name they matched half the passes (0.50)."""
    x, w = torch.randn(16, 64), torch.randn(64)

    def norm(rows: torch.Tensor) -> torch.Tensor:
        return rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def renamed(rows: torch.Tensor, k: int) -> torch.Tensor:
        if k == 0:
            return norm(rows)
        if k == 1:
            inv = torch.reciprocal(torch.sqrt(torch.square(rows).sum(-1, keepdim=True) / 64 - (-1e-6)))
            return rows / torch.reciprocal(inv) / torch.reciprocal(w)
        inv = torch.exp2(torch.log2((rows * rows).mean(-1, keepdim=True) + 1e-6) * -0.5)
        return torch.div(rows, torch.reciprocal(inv)).mul(w)

    whole = work_of(reference_ops(norm, [x]))
    eager = work_of(reference_ops(lambda x: torch.cat([renamed(r, k % 3) for k, r in enumerate(x.chunk(4))]), [x]))
    assert compare(1, eager, whole).passes == 1.0


def test_passes_are_covered_by_whole_calls_best_fit() -> None:
    """Each call covers one pass at most; chunks of 0.6 and 0.4 of two passes pair up; a large call is one pass."""
    assert _eagerwork._matched([(10.0, 2)], [(6.0, 2), (4.0, 2)]) == 2
    assert _eagerwork._matched([(10.0, 3)], [(30.0, 1)]) == 1
    assert _eagerwork._matched([(1.0, 2), (10.0, 1)], [(10.0, 1), (0.5, 4)]) == 3
    assert _eagerwork._matched([(10.0, 1)], [(3.0, 3)]) == 0


def test_a_call_stands_for_the_passes_of_its_kind_its_work_covers() -> None:
    """Red team 9a's F7 (p48: every expert on every token in one broadcast product per projection, 30x the
    reference's FLOPs, matched 8% of its per-expert passes). Within a kind a call stands for as many passes as its
    amount covers, the largest passes first (a call the size of one large pass stands for it, not for the small
    ones it adds up to: p52's plan, its weight dequantisation against the DSL's activation quantisation); across
    kinds for one at most: an eager GEMM never stands for the element passes of the epilogue the DSL computes."""
    mm, mul = "aten.mm.default", "aten.mul.Tensor"
    per_expert = work_of([((mm, ((4, 8), (8, 16)), ((4, 16),)), 64), ((mul, ((4, 16), (4, 16)), ((4, 16),)), 64)])
    batched = work_of([((mm, ((256, 8), (8, 16)), ((256, 16),)), 1), ((mul, ((256, 16), (256, 16)), ((256, 16),)), 1)])
    assert compare(1, batched, per_expert).passes == 1.0
    quantised = [((mul, ((15,), ()), ((15,),)), 2), ((mul, ((1920,), ()), ((1920,),)), 5)]
    weights = ((mul, ((98304,), ()), ((98304,),)), 1)
    assert compare(1, work_of([weights]), work_of([*quantised, weights])).passes == 1 / 8
    gemm = ((mm, ((64, 256), (256, 256)), ((64, 256),)), 1)
    epilogue = ((mul, ((64, 256), (256,)), ((64, 256),)), 3)
    assert compare(1, work_of([gemm]), work_of([gemm, epilogue])).passes == 1 / 4


def test_an_unknown_operator_stands_for_every_pass_it_could_have_made() -> None:
    """Red team 9a's F1/F5/F6: ``_weight_norm_interface`` (the whole RMS normalisation), ``renorm`` (a quantisation's
    scaling), ``_masked_softmax`` stood for one pass each, so one call computing the answer matched half the passes.
    Priced at its bound it stands for any number of passes no larger than a pass over its operands."""
    x, w = torch.randn(16, 64), torch.randn(64)

    def norm(rows: torch.Tensor) -> torch.Tensor:
        return rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def unknown(rows: torch.Tensor) -> torch.Tensor:  # rows / their norm · sqrt(64): rows / their RMS
        return torch._weight_norm_interface(rows, torch.full((16, 1), 8.0), dim=0)[0] * w

    assert torch.allclose(unknown(x), norm(x), atol=1e-3)
    reference, eager = work_of(reference_ops(norm, [x])), work_of(reference_ops(unknown, [x]))
    assert eager.unbounded["pointwise"] >= x.numel() and eager.passes["pointwise"] == [("mul", x.numel(), 1)]
    found = compare(1, eager, reference)
    assert found.passes == 1.0 and found.covers, found.as_dict()
    small = work_of([(("aten.some_new_op.default", ((4,),), ((4,),)), 1)])  # smaller than every pass: none
    assert compare(1, small, reference).passes == 0.0


def test_a_scaled_product_is_a_product_and_a_pass() -> None:
    """Red team 9a's F6: ``baddbmm(..., beta=0, alpha=scale)`` did the scores' scaling for free."""
    q, k = torch.randn(2, 8, 4), torch.randn(2, 4, 8)
    for alpha, beta, scaled in ((0.5, 0.0, True), (1.0, 2.0, True), (1.0, 0.0, False), (1.0, 1.0, False)):
        ops = reference_ops(functools.partial(torch.baddbmm, torch.zeros(2, 8, 8), beta=beta, alpha=alpha), [q, k])
        work = work_of(ops)
        assert [name for (name, _, _), _ in ops][-1].endswith(_eagerwork.SCALES) == scaled
        assert work.passes["pointwise"] == ([("baddbmm", 128.0, 1)] if scaled else []), (alpha, beta)


def test_the_reference_s_padding_is_taken_out_of_its_price() -> None:
    """p01's reference pads every sequence to the longest: an eager decode of each sequence over its own pages
    is the whole answer, priced against the products the problem needs (its cost()), not the padded ones."""
    problem = load_problem(next(problems_root().glob("attention/01_*.py")))
    inputs = list(problem.make_inputs(problem.smoke, seed=3))

    def unpadded(q: Any, k_cache: Any, v_cache: Any, indptr: Any, indices: Any, scale: float) -> Any:
        batch, _, d = q.shape
        hkv = k_cache.shape[2]
        bounds = indptr.tolist()
        for b in range(batch):
            pages = indices[bounds[b] : bounds[b + 1]].long()
            logits = torch.einsum("hgd,lhd->hgl", q[b].float().view(hkv, -1, d), k_cache[pages, 0].float()) * scale
            torch.logsumexp(logits, dim=-1)
            torch.einsum("hgl,lhd->hgd", torch.softmax(logits, dim=-1), v_cache[pages, 0].float())

    eager = work_of(reference_ops(unpadded, inputs))
    padded = reference_work(problem.reference, inputs)
    useful = reference_work(problem.reference, inputs, problem.cost(problem.smoke).total_flops)
    assert useful.padding > 1.5 and padded.padding == 1.0
    assert not compare(1, eager, padded).covers and compare(1, eager, useful).covers


def _work(**amounts: float) -> Work:
    found = Work(dict.fromkeys(_eagerwork.KINDS, 0.0), {kind: [] for kind in _eagerwork.KINDS})
    for kind, amount in amounts.items():
        found.amounts[kind] = amount
        found.passes[kind].append((kind, amount, 1))
    return found


def test_compute_stands_in_for_compute_and_movement_only_where_the_reference_computes_nothing() -> None:
    # a reduction done as a product with ones: the products beyond the reference's count as element operations
    assert compare(1, _work(matmul=900.0), _work(pointwise=1000.0)).shares == {"pointwise": 0.9}
    # a problem made of movement (a cache copy): the copies are judged, and arithmetic moves data too
    assert compare(1, _work(pointwise=50.0, movement=50.0), _work(movement=100.0)).shares == {"movement": 1.0}
    # a problem that computes: its casts and copies are not the answer
    assert compare(1, _work(movement=1000.0), _work(pointwise=10.0, movement=1000.0)).shares == {"pointwise": 0.0}


def test_on_element_work_the_problem_s_useful_flops_are_a_floor_no_formulation_escapes() -> None:
    """Where the reference makes no products, eager code doing ``USEFUL_SHARE`` of the problem's useful FLOPs
    (its ``cost()``) with known operators covers it, whatever its passes and the reference's amounts; an unknown
    operator's bound is no measure of work and does not count; a problem with products is not judged so (the
    study's partial plans do the GEMM eagerly: 100% of it)."""

    def muls(n: int) -> Work:
        return work_of([(("aten.mul.Tensor", ((1000,), (1000,)), ((1000,),)), n)])

    reference = muls(19)  # a wasteful reference: 19 passes where the problem needs 13 element operations each
    reference.useful = reference.necessary = 13000.0
    found = compare(1, muls(9), reference)  # a cheaper formulation: 9 of them
    assert found.shares == {"pointwise": pytest.approx(9 / 19)} and found.passes == pytest.approx(9 / 19)
    assert found.useful == pytest.approx(9 / 13) and found.covers
    assert "69% of the problem's useful arithmetic" in _eagerwork.explain(found)
    assert "passes over the data" in _eagerwork.explain(compare(1, muls(19), reference))  # both: the reference's
    assert not compare(1, muls(8), reference).covers
    # a cost model counting work a correct formulation skips declares what every formulation does: the floor's basis
    reference.necessary = 10000.0
    assert compare(1, muls(7), reference).useful == pytest.approx(0.7) and compare(1, muls(7), reference).covers
    unknown = work_of([(("mylib.scan.default", ((1000,), (1000,)), ((1000,),)), 1)])
    assert unknown.amounts["pointwise"] >= 3000 and compare(1, unknown, reference).useful == 0.0
    products = work_of([(("aten.mm.default", ((10, 10), (10, 10)), ((10, 10),)), 1)])
    products.useful = 2000.0
    assert compare(1, products, products).useful == 0.0


def test_covering_needs_most_of_every_kind_and_most_of_the_passes() -> None:
    reference = work_of([(("aten.mm.default", ((64, 64), (64, 64)), ((64, 64),)), 1),
                         (("aten.mul.Tensor", ((64, 64), (64, 64)), ((64, 64),)), 6)])  # fmt: skip
    everything = compare(1, reference, reference)
    assert everything.shares == {"matmul": 1.0, "pointwise": 1.0} and everything.passes == 1.0 and everything.covers
    # p56's partial plan: the GEMM and most element operations eager, a small final stage of several passes in the DSL
    gemm_and_one = work_of([(("aten.mm.default", ((64, 64), (64, 64)), ((64, 64),)), 1),
                            (("aten.mul.Tensor", ((64, 64), (64, 64)), ((64, 64),)), 1)])  # fmt: skip
    partial = compare(1, gemm_and_one, reference)
    assert partial.shares["matmul"] == 1.0 and partial.passes == pytest.approx(2 / 7) and not partial.covers


def _vault_records(
    fn: Any, inputs: list[torch.Tensor], inplace: tuple[int, ...] = (), kernels: dict[str, Any] | None = None
) -> list[Any]:
    """The eager operators the vault prices on an audited call of ``fn`` (``kernels``: a module's namespace whose TVM
    modules are launched through the counted gate, as the worker's are: eager work counts where it reaches them)."""
    control = _control.ControlPage()
    registry = Registry()
    send = registry.open(
        _provenance.provenance_vault, control.buf, _provenance.provenance_lib(torch.device("cpu")),
        _provenance.page_layout(), [], [], {},
    )  # fmt: skip
    serial = _thread.RLock()
    for name, kernel in list((kernels or {}).items()):
        if type(kernel).__name__ in ("Executable", "Module"):
            send((0, kernel, "launch"))
            kernels[name] = registry.protect(  # type: ignore[index]
                _provenance.gate, _send=send, _original=kernel, _count=True, _serial=serial
            )
    op = registry.protect(
        _provenance.dispatch, _send=send, _serial=_thread.RLock(), **dispatch_hooks(registry, torch.device("cpu"))
    )

    class Audit(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return op(self, func, types, args, kwargs)

    registry.protect(_provenance.report_harness, _send=send)(inputs)  # the harness's arena, as a block holds it
    control.begin_call(suppress=False, audit=True)
    registry.protect(_provenance.report_inputs, _send=send)(inputs, inplace)
    with Audit():
        returned = fn(*inputs)
    # what it returned is the call's outputs: eager work is priced where it reaches them (``priced_trail``)
    outputs = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    registry.protect(_provenance.report_result, _send=send)([t for t in outputs if isinstance(t, torch.Tensor)])
    records = control.report()["records"]
    control.close()
    return next(r[1] for r in records if r[0] == "eager_ops")


def _placeless(records: Any) -> list[Any]:
    """Records without their ``PLACES`` marks, sorted: which storage a read chose is known by its address, and the
    vault keeps what the call made alive where the recorder lets torch reuse it (``offset_reads``)."""
    merged: dict[Any, int] = {}
    for (name, ins, outs), count in records:
        key = (re.sub(r"\+pyplaces\d+", "", name), ins, outs)
        merged[key] = merged.get(key, 0) + count
    return sorted(merged.items())


def _padded_by(values: list[float]) -> Any:
    """Red team rt68 F1's way back in: one Python number per element, as ``F.pad``'s ``value`` of a one-element slice of
    a copy of the input (a run of views of what the call made: its stride, one value in), joined by ``cat``."""

    def run(x: torch.Tensor) -> torch.Tensor:
        made = x.clone()
        return torch.cat([F.pad(made[k : k + 1], (1, 0), value=v) for k, v in enumerate(values)])

    return run


@pytest.mark.parametrize("distinct", [True, False])
def test_python_numbers_past_the_first_sixteen_distinct_of_a_call_are_values_in(distinct: bool) -> None:
    """``_eagerwork.SCALARS``: 100 pads by 100 distinct numbers count 86 values in (8 bytes each) beside the 16 free
    (the pads' widths, 1 and 0, two of them: integer arguments are values too), and the choice among the values the
    pad's ``value`` took so far at each pad (log2 of 2, 3, ... 100 bits: red team rt73 G5); by one number repeated,
    none; the vault and the reference's recorder mark alike. (The slices' stride: a byte more.)"""
    x = torch.randn(128)
    values = [k / 7 for k in range(100)] if distinct else [0.5] * 100
    found = _vault_records(_padded_by(values), [x])
    chosen = int(sum(math.log2(k) for k in range(2, 101)) // 8)
    assert work_of(found).from_python == (86 * _eagerwork.SCALAR_BYTES + chosen if distinct else 0) + 1
    assert _placeless(found) == _placeless(reference_ops(_padded_by(values), [x]))


@pytest.mark.parametrize("value", [torch.tensor(-4611686018427375559), torch.arange(6.0).reshape(2, 3)])
def test_a_tensor_s_text_reports_its_elements_leaving_for_python(value: torch.Tensor) -> None:
    """Red team rt69 F0: torch makes a tensor's text with the dispatch modes popped and reads a 0-dim one by ``item()``;
    the worker's hook on ``torch._tensor_str._str`` reports the tensor leaving for Python, then makes the same text."""
    sent: list[Any] = []
    marker = torch.ops.aten._local_scalar_dense.default
    hook = functools.partial(
        _eagerwork.to_python_text_hook, _send=lambda m: sent.append(m), _original=torch._tensor_str._str, _marker=marker
    )
    assert hook(value) == torch._tensor_str._str(value)
    assert [(m[0], m[2], m[3][0] is value) for m in sent] == [(3, _eagerwork.TO_PYTHON, True)]


def test_a_generator_s_state_set_from_a_tensor_reports_its_bytes_leaving_for_python() -> None:
    """Red team rt69 F1: ``Generator.set_state`` reads a tensor's bytes in C++ with no operator and ``initial_seed()``
    hands 8 of them back; so does unpickling (``__setstate__``, the state in a tuple). The hook reports each state
    tensor as the values Python can read back from it (``GENERATOR_VALUES``: the seed, the offset), then sets the state
    as torch does."""
    sent: list[Any] = []
    marker = torch.ops.aten._local_scalar_dense.default
    generator = torch.Generator()
    state = generator.get_state()
    state[:8].view(torch.int64).fill_(0x1234_5678_9ABC)
    for name, given in (("set_state", state), ("__setstate__", (*generator.__reduce__()[2][:2], state))):
        sent.clear()
        hook = functools.partial(
            _eagerwork.generator_state_hook, _send=sent.append, _original=vars(torch._C.Generator)[name],
            _marker=marker, _tensor=torch.Tensor, _values=_eagerwork.GENERATOR_VALUES,
        )  # fmt: skip
        fresh = torch.Generator()
        hook(fresh, given)
        assert fresh.initial_seed() == 0x1234_5678_9ABC, name
        assert [(m[0], m[2], m[3][0] is state) for m in sent] == [(3, "aten._local_scalar_dense.default", True)] * 2


def test_the_vault_records_eager_operators_as_the_verifier_records_the_reference_s() -> None:
    problem = load_problem(next(problems_root().glob("quantization/52_*.py")))
    inputs = list(problem.make_inputs(problem.smoke, seed=1))
    recorded = _vault_records(problem.reference, [x.clone() for x in inputs])
    assert _placeless(recorded) == _placeless(reference_ops(problem.reference, inputs))
    assert work_of(recorded).amounts["matmul"] > 0 and work_of(recorded).amounts["pointwise"] > 0


def _glue_of_p26(starts: torch.Tensor, counts: torch.Tensor, rows: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    """p26's reference glue: per group, each new block's update (``owner``) looked up in tables of one entry per update
    (48 updates, 768 blocks: 16x, by the positions all of the call's lookups into a table read together); each token's
    request slot from a cast of an input, by a repeat of ``arange`` (32 tokens a request)."""
    found = []
    upd = torch.arange(counts.shape[1])
    for g in range(counts.shape[0]):
        owner = torch.repeat_interleave(upd, counts[g])
        first = torch.cumsum(counts[g], 0) - counts[g]
        found.append(starts[g, owner] + torch.arange(owner.numel()) - first[owner])
    row = rows.to(torch.int64)[torch.repeat_interleave(torch.arange(lens.numel()), lens)]
    return torch.cat([*found, row])


def _lookup_into_an_updated_input(table: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    table[0] = 7  # no longer the input as given: judged by the positions read (16 of them, 4096 times)
    return table[codes]


def _copy_through_complex(caches: torch.Tensor) -> torch.Tensor:
    """p25's block copy through complex128 views of the uint8 cache (red team rt28): 16 bytes an element."""
    wide = caches.view(torch.complex128)
    torch.where(torch.ones(1, dtype=torch.bool), wide[:, 0], torch.zeros((), dtype=wide.dtype), out=wide[:, 3])
    return caches


def _norm_of_complex_pairs(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm on a complex64 view of the upcast rows (red team rt28): two elements squared and scaled an element."""
    pairs = torch.view_as_complex(x.float().view(x.shape[0], -1, 2))
    scale = torch.rsqrt((pairs.abs() ** 2).sum(-1, keepdim=True) / x.shape[1] + 1e-6)
    return torch.view_as_real(pairs * scale).reshape(x.shape)


def _one_table_twice(x: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    table = x * 2  # 512 entries looked up 4096 times, twice: the second lookup makes 16x
    return table[codes] + table[codes.flip(0)]


@pytest.mark.parametrize(
    ("glue", "make"),
    [
        (_glue_of_p26, lambda: [torch.randint(0, 64, (2, 48)), torch.full((2, 48), 16), torch.randperm(1024)[:256],
                                torch.full((256,), 32)]),
        (lambda table, codes: table[codes], lambda: [torch.randn(4096), torch.randint(0, 4096, (4096,))]),
        (lambda table, codes: table.float()[codes], lambda: [torch.randn(256).half(), torch.randint(0, 256, (8192,))]),
        (_lookup_into_an_updated_input, lambda: [torch.randn(4096), torch.randint(0, 16, (4096,))]),
        (_one_table_twice, lambda: [torch.randn(512), torch.randint(0, 512, (4096,))]),
        (_copy_through_complex, lambda: [torch.randint(0, 256, (4, 6, 256), dtype=torch.uint8)]),
        (_norm_of_complex_pairs, lambda: [torch.randn(64, 128, dtype=torch.bfloat16)]),
        (lambda x: (x.view(torch.int64).clone() ^ 1).view(torch.uint8), lambda: [torch.randint(0, 256, (64, 64),
                                                                                            dtype=torch.uint8)]),
        (_float64_lanes, lambda: [torch.randn(8, 32), torch.randn(16, 32)]),
    ],
    ids=["p26_glue", "input_as_given", "cast_of_an_input", "updated_input", "one_table_twice", "copy_through_complex",
         "norm_of_complex_pairs", "int64_view_cloned", "float64_lanes"],
)  # fmt: skip
def test_the_reference_s_lookups_are_judged_as_the_vault_judges_a_submission_s(glue: Any, make: Any) -> None:
    """The same glue costs the same on both sides (red team rt27b: the vault judged a submission's lookups by what
    the call's lookups read together, the reference's recorder by each one's table size: an honest hybrid doing the
    reference's own glue could be priced above the reference's share of it). The reference's tables are not followed
    to the roots they were made from (``_ReferenceLookups``): none of these is judged by its roots."""
    inputs = make()
    reference = reference_ops(glue, inputs)
    assert _placeless(_vault_records(glue, [x.clone() for x in inputs], (0,))) == _placeless(reference)
    kinds = {name.split("+", 1)[1] for (name, _, _), _ in reference if "+" in name}
    assert kinds, "every case looks something up that one of the rules judges, or sees data through a wider dtype"


@pytest.fixture
def relabelled_mul() -> Iterator[Any]:
    """``aten.mul.Tensor`` wearing the view's labels (schema, name, overload, native callable), restored after."""
    mul, view = torch.ops.aten.mul.Tensor, torch.ops.aten.view.default
    saved = dict(mul.__dict__)
    for attr in ("_schema", "_name", "__name__", "__qualname__", "_overloadname", "_op"):
        setattr(mul, attr, getattr(view, attr))
    try:
        yield mul
    finally:
        mul.__dict__.clear()
        mul.__dict__.update(saved)


def test_a_relabelled_operator_runs_and_is_priced_as_what_its_schema_names(relabelled_mul: Any) -> None:
    """forged_operator_schemas: an operator object relabelled a view is run as the view its schema names, so
    a product can no longer pass for a free view (before, the object was called and priced by its label)."""
    resolve = Registry().protect(_operators.resolve_operator, **_operators.operator_lib())
    name, native, _, composite = resolve(relabelled_mul)
    assert not composite
    assert name == "aten.view.default" and native(torch.ones(6), [2, 3]).shape == (2, 3)
    x = torch.arange(6.0)
    with pytest.raises(RuntimeError, match="view"):
        _vault_records(lambda a: a * a, [x])  # the product, run as the view its schema names, cannot take a tensor
    assert (x * x).equal(x.square())  # outside the audit the relabelled object still multiplies


def test_composite_operators_are_priced_as_their_parts_in_inference_mode_too() -> None:
    """Red team rt31a: under ``torch.inference_mode`` autograd is skipped, and a composite operator (``matmul``,
    ``rnn_relu``, ``group_norm``, ``to``) reached the mode whole, priced by rules meant for its parts: p32's GEMMs as
    ``matmul`` of one-column batches (a full plan at 0.24%) or as ``rnn_relu`` (tagged random: one pass, a full plan at
    4.2%), p31's whole ``group_norm`` as one pass (partial 0.125, its twin decorative), and a ``to`` cast taken for a
    view whose result no writer left (an honest p36 failed). The mode decomposes them itself: the same operators are
    recorded with and without inference mode."""
    resolve = Registry().protect(_operators.resolve_operator, **_operators.operator_lib())
    assert resolve(torch.ops.aten.matmul.default)[3] and resolve(torch.ops.aten.rnn_relu.input)[3]
    assert not resolve(torch.ops.aten.mm.default)[3] and not resolve(torch.ops.aten.add.Tensor)[3]
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)

    def glue(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        batched = torch.matmul(x, w[:, :, None])
        norm = F.group_norm(x.float().reshape(2, 4, 4), 2)
        cell = torch.rnn_relu(x.float()[None], torch.zeros(1, 4, 6), [w.float(), torch.zeros(6, 6)], False, 1, 0.0,
                              False, False, True)[0]  # fmt: skip
        return batched.sum() + norm.sum() + cell.sum()

    def inferred(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return glue(x, w)

    plain = {name for (name, _, _), _ in _vault_records(glue, [x.clone(), w.clone()])}
    decomposed = {name for (name, _, _), _ in _vault_records(inferred, [x.clone(), w.clone()])}
    assert {"aten.bmm.default+x5", "aten.native_group_norm.default", "aten.mm.default"} <= decomposed
    assert not {"aten.matmul.default", "aten.rnn_relu.input", "aten.group_norm.default"} & decomposed
    assert plain <= decomposed | {"aten.lift_fresh.default"}, plain - decomposed


def test_an_operator_whose_labels_are_not_torch_s_does_not_run() -> None:
    resolve = Registry().protect(_operators.resolve_operator, **_operators.operator_lib())
    fake = types.SimpleNamespace(_schema=torch.ops.aten.view.default._schema)
    with pytest.raises(RuntimeError, match="not torch's OpOverload"):
        resolve(fake)
    mul = torch.ops.aten.mul.Tensor
    saved = mul.__dict__["_schema"]
    mul._schema = types.SimpleNamespace(name="aten::view", overload_name="")
    try:
        with pytest.raises(RuntimeError, match="schema was replaced"):
            resolve(mul)
    finally:
        mul._schema = saved


PARTIAL_PLANS = sorted(p for p in problems_root().glob("*/solutions/*eager*_tirx.py"))


@pytest.mark.parametrize("path", PARTIAL_PLANS, ids=[p.stem for p in PARTIAL_PLANS])
def test_the_study_s_partial_plans_leave_the_dsl_real_work(path: Path) -> None:
    """Their eager code, priced with the kernels stubbed (benchmarks/eager_work_shares.py), at SMOKE; what they
    read into Python (counts, scalars) is far from the plain-Python rule's share."""
    shares = shares_module()
    with shares._stubbed_dsls():
        found = shares.shares(path, "smoke")
    passes, useful = found.pop("passes"), found.pop("useful")
    # in: elements lifted, and the launches' values (by value, in their tensor arguments' layouts) as the vault counts
    python = max(found.pop("py_out"), found.pop("py_in") + found.pop("py_byval") + found.pop("py_layout"))
    amounts = min(found.values())
    assert amounts < _eagerwork.EAGER_SHARE - 0.1 or passes < _eagerwork.PASS_SHARE - 0.1, found
    assert useful < _eagerwork.USEFUL_SHARE - 0.1, useful
    assert python < _eagerwork.PYTHON_SHARE / 4, python


#: eagerwork_* cases whose eager answer the coverage test rejects too: a seed the answer is computed beside
#: (not from) earns it no derived credit, and the returned bytes are not what a launch left.
# a seed of one value (or a copy) derives nothing since the provenance asks DSL operands to vary: these are
# rejected by both rules
ALSO_BY_PROVENANCE = frozenset((
    "eagerwork_block_copy_seeded", "eagerwork_lookup_squares", "eagerwork_vector_norm", "eagerwork_answer_times_one",
    "eagerwork_decode_unpadded", "eagerwork_fp8_gemm_seeded", "eagerwork_gemm_as_bilinear",
    "eagerwork_gemm_as_embedding_bag", "eagerwork_renamed_operators", "eagerwork_rows_in_chunks",
    "eagerwork_scatter_arithmetic", "eagerwork_wkv_unstabilised",
))  # fmt: skip
#: eagerwork_* cases whose kernel only decodes the eager answer element by element (or reads it permuted: the order-free
#: fit): the decode rule (``_decode``)
#: withdraws the DSL's credit for them too
ALSO_BY_DECODE = frozenset(("eagerwork_answer_encoded", "eagerwork_chunks_renamed", "eagerwork_experts_batched"))
#: eagerwork_* cases that change a class the harness watches (``_worker.WATCHED_CLASSES``): tampering first
ALSO_BY_WATCH = frozenset(("eagerwork_renamed_operators",))


def _timing_skipped(v: Any) -> Failure:
    """What a test judging the bypass test alone puts in place of the timing rounds: no calls timed."""
    return Failure("timeout", "not timed: the test judges the bypass test alone")


@pytest.mark.parametrize("path", case_params(EAGER_CASES))
def test_without_the_rule_the_eager_answers_pass(
    cpu_session: VerifierSession, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adversarial eagerwork_* cases are correct and, but for those the byte-exact provenance also rejects
    (an eager answer a DSL seed derives nothing for: ``ALSO_BY_PROVENANCE``) or the decode rule does
    (``ALSO_BY_DECODE``), pass the coverage test: the
    eager-work rule is what rejects them (what follows, timing, is judged by itself and not run here)."""
    problem = next(line.split()[-1] for line in path.read_text().splitlines() if line.startswith("# problem:"))
    monkeypatch.setattr(_eagerwork, "EAGER_SHARE", math.inf)
    monkeypatch.setattr(_eagerwork, "USEFUL_SHARE", math.inf)
    monkeypatch.setattr(_phases, "timing", _timing_skipped)
    report = cpu_session.verify(path, problem, "tirx")
    if path.stem in ALSO_BY_WATCH:
        assert report.failure == "harness_tamper" and "a class the harness uses" in report.feedback, report.feedback
        return
    assert report.correct, report.feedback
    if path.stem in ALSO_BY_PROVENANCE:
        assert not report.bypass_ok and "existed outside the DSL" in report.feedback, report.feedback
        return
    if path.stem in ALSO_BY_DECODE:
        assert not report.bypass_ok and "decodes an answer computed outside the DSL" in report.feedback, report.feedback
        return
    assert report.bypass_ok, report.feedback
    assert report.failure != "decorative_dsl" and report.details["eager_work"]["shares"], report.feedback


#: eagerwork_* cases whose eager answer the rule priced at next to nothing before (red team 8a, finding 3): the
#: arithmetic written as stores (``reduce=``, ``accumulate=True``), and a formulation cheaper than the reference's
#: (p66's scan in float64 without the stabilisation: covered by the problem's useful FLOPs alone until float64 element
#: work was priced at its precision, ``test_p66_s_float64_scans_are_priced_like_the_reference``).
#: Their seed derives nothing, so a whole verification rejects them by provenance first (``ALSO_BY_PROVENANCE``);
#: red team 8a's hacks combining them with provenance gaps passed it (verifier README, "Eager work")
PRICED_SINCE_ROUND_8 = {"eagerwork_scatter_arithmetic": "p36", "eagerwork_wkv_unstabilised": "p66"}
#: eagerwork_* cases cheaper than the problem's cost model by more than a third (session 9): covered by the floor only
#: against the FLOPs every formulation does (``Cost.necessary_flops``), not against ``cost()``'s (p66's
#: eagerwork_wkv_hoisted was one until float64 element work was priced at its precision)
CHEAPER_THAN_THE_COST_MODEL = {"eagerwork_topk_of_logits": "p45"}


def _case_priced(case: str, problem_id: str, necessary: bool = True) -> _eagerwork.EagerWork:
    """The case's run() (its kernel compiled and launched), recorded by the worker's vault and priced as the verifier
    does at SMOKE; without ``necessary``, the floor against the cost model's FLOPs (main before session 9)."""
    problem = load_problem(next(problems_root().glob(f"*/{problem_id[1:]}_*.py")))
    inputs = list(problem.make_inputs(problem.smoke, seed=2))
    spec = importlib.util.spec_from_file_location(case, ADVERSARIAL / f"{case}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    eager = work_of(_vault_records(module.run, [x.clone() for x in inputs], kernels=vars(module)))
    cost = problem.cost(problem.smoke)
    floor = cost.floor_flops if necessary else cost.total_flops
    return compare(1, eager, reference_work(problem.reference, inputs, cost.total_flops, (), floor))


@pytest.mark.parametrize("case", sorted(PRICED_SINCE_ROUND_8))
def test_arithmetic_in_stores_and_cheaper_formulations_cover_the_problem(case: str) -> None:
    """The case's run() (its kernel compiled and launched), recorded by the worker's vault and priced as the
    verifier does: its eager code covers the problem."""
    found = _case_priced(case, PRICED_SINCE_ROUND_8[case])
    assert found.covers, found.as_dict()


@pytest.mark.parametrize("case", ["eagerwork_wkv_unstabilised", "eagerwork_wkv_hoisted"])
def test_p66_s_float64_scans_are_priced_like_the_reference(case: str) -> None:
    """Red team 8a's WKV scan in float64 without the stabilisation, and the same with its exponentials hoisted, were
    cheaper than the reference's float32 operators (0.57 and 0.35 of its element work), caught by the floor on the
    problem's FLOPs alone; float64 element work is now priced at float64's precision (``_widths.PRECISION``, red team
    rt28b F1): both are like the reference by its own operators, and the floor holds as well."""
    found = _case_priced(case, "p66")
    assert found.like_the_reference and found.useful >= _eagerwork.USEFUL_SHARE, found.as_dict()


def test_what_crosses_between_tensors_and_python_is_counted_in_bytes() -> None:
    """Elements at their width (recorded with the name, ``WIDE``), a Python value at 64 bits."""
    w = _eagerwork.WIDTHS
    records = [
        (("aten._local_scalar_dense.default" + w[4], ((),), ()), 7),  # item() of an int32, seven times
        ((_eagerwork.TO_PYTHON + w[2], ((4, 8),), ()), 2),  # tolist() of 32 bf16 elements, twice
        (("aten.lift_fresh.default" + w[8], ((10,),), ((10,),)), 1),  # torch.tensor(a list of 10 int64)
        (("aten.fill_.Scalar", ((4, 8),), ((4, 8),)), 3),  # one value each, whatever the size
        (("aten.full.default", (), ((64,),)), 1),
        (("aten.add_.Tensor", ((),), ((),)), 4),  # out[i].add_(v): one Python value each
        (("aten.mul.Tensor", ((4, 8), (4, 8)), ((4, 8),)), 5),  # no crossing
    ]
    work = work_of(records)
    assert (work.to_python, work.from_python) == (7 * 4 + 64 * 2, 10 * 8 + (3 + 1 + 4) * 8)
    assert op_work(_eagerwork.TO_PYTHON + w[2], ((4, 8),), ()) == []  # counted as a crossing, not as eager work
    assert op_work("aten.lift_fresh_copy.default" + w[8], ((10,),), ((10,),)) == [("movement", 10.0, 1)]
    passes: dict[str, list[Any]] = {"matmul": [], "pointwise": [("mul", 1000.0, 1)], "movement": []}
    reference = Work({"matmul": 0.0, "pointwise": 1000.0, "movement": 0.0}, passes)
    reference.informative = (624, 576)
    found = compare(1, work, reference)
    assert found.python == {"out": 156 / 624, "in": 144 / 576} and found.through_python and found.covers
    reference.informative = (625, 577)
    assert not compare(1, work, reference).covers
    # a range carries its start: torch.arange(v, v + 1) is a value lifted
    assert _eagerwork.crossing("aten.arange.start", (), ((1,),)) == (0, 8)
    # triu_indices(1, v + 1, v) is [[0], [v]]: its int arguments are a value in (red team rt70 F1)
    assert _eagerwork.crossing("aten.triu_indices.default", (), ((2, 1),)) == (0, 8)
    assert _eagerwork.crossing("aten.tril_indices.default", (), ((2, 3),)) == (0, 8)
    # a crossing recorded without its width (a tensor subclass the vault does not describe) is taken at 64 bits
    assert _eagerwork.crossing(_eagerwork.TO_PYTHON, ((4, 8),), ()) == (32 * 8, 0)
    # marks after the width (a wider view's, red team rt66 F1: "+w8+x4" read as no width, so 0 bytes) keep it
    marked = _eagerwork.TO_PYTHON + w[8] + _eagerwork.WIDER + "4"
    assert _eagerwork.crossing(marked, ((6,),), ()) == (6 * 8, 0)
    assert _eagerwork.crossed_values(marked, ((6,),)) == 6
    # an operator that raised hands Python one value in its message (rt66 F0)
    assert _eagerwork.crossing(_eagerwork.RAISED, ((1,), (2,)), ()) == (8, 0)
    assert _eagerwork.crossed_values(_eagerwork.RAISED, ((1,), (2,))) == 1
    # a view the vault marked (at offsets Python gave) brings the bits that chose each piece's place, at least a byte
    # a piece (rt67, rt68 F0); unmarked, a view is free and brings none
    offset = _eagerwork.OFFSET
    assert _eagerwork.crossing("aten.slice.Tensor" + offset, ((65536,),), ((1,),)) == (0, 2)
    assert _eagerwork.crossing("aten.select.int" + offset, ((150, 8192),), ((8192,),)) == (0, 1)
    assert _eagerwork.crossing("aten.split.Tensor" + offset + w[2], ((12,),), ((4,), (4,), (4,))) == (0, 3)
    assert _eagerwork.crossing("aten.slice.Tensor", ((65536,),), ((1,),)) == (0, 0)
    assert op_work("aten.slice.Tensor" + offset, ((65536,),), ((1,),)) == []


def test_a_wider_view_carries_what_it_holds() -> None:
    """rt10 F4 read p21's bf16 keys through an int64 view and lifted its fp8 codes packed eight to an int64: a
    quarter and an eighth of the elements. Recorded as the worker's vault and the reference's recorder do (the
    width with the name), the same bytes cross whatever the view."""
    keys = torch.randn(6, 8).bfloat16()

    def read(view: torch.Tensor) -> Any:
        return lambda x: torch.tensor(view.tolist(), dtype=view.dtype)  # out and back in

    direct = work_of(reference_ops(read(keys), [keys]))
    packed = work_of(reference_ops(read(keys.view(torch.int64)), [keys]))
    assert direct.to_python == packed.to_python == keys.nbytes
    assert direct.from_python == packed.from_python == keys.nbytes
    assert _eagerwork.recorded_name("aten.lift_fresh.default", (keys,), {}) == "aten.lift_fresh.default+w2"


@pytest.mark.parametrize("step", [7, _eagerwork._CHANGED_STEP])
def test_the_answer_is_what_the_operator_changes_not_the_state(step: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """rt10 F1/F4: with in-place inputs counted whole, a whole answer lifted from Python was 0.4% of p26's outputs
    (its 8.4M-entry block table) and 12.5% of p21's (its caches). The answer is the returned outputs and the elements
    the reference changes in the in-place inputs (a NaN left alone is no change); what it reads, its other inputs
    and those elements (compared a chunk at a time: ``step``)."""
    monkeypatch.setattr(_eagerwork, "_CHANGED_STEP", step)
    cache = torch.randn(64, 16)
    cache[5, 3] = float("nan")
    rows, index = torch.randn(4, 16), torch.tensor([7, 9, 11, 13])

    def append(cache: torch.Tensor, rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        cache[index] = rows
        return rows.sum(dim=1)

    work = reference_work(append, [cache, rows, index], inplace=[0])
    assert work.informative == (rows.nbytes + index.nbytes + 4 * 16 * 4, 4 * 4 + 4 * 16 * 4)
    assert _eagerwork.answer_bytes([cache], (), {0: cache.clone()}) == (0, 0)
    codes = torch.zeros(8, dtype=torch.float8_e4m3fn)
    after = codes.clone()
    after[:3] = torch.tensor([1.0, 2.0, -0.5]).to(torch.float8_e4m3fn)
    assert _eagerwork.answer_bytes([codes], (), {0: after}) == (3, 3)


def _decoded(report: Any) -> bool:
    """Whether the decode rule (``_decode``) rejected a case whose kernel decodes an encoded eager (or Python,
    or threaded) answer: it does, before the rule the test is about is reached."""
    decoded = "decodes an answer computed outside the DSL" in (report.feedback or "")
    assert not decoded or (report.correct and not report.bypass_ok), report.feedback
    return decoded


#: python_answer_* cases the crossing rule rejects (the others cross in bulk, which the guards refuse), and the one
#: whose Python runs in another thread (it reads with tolist(), run() lifts its list)
PYTHON_CASES = [
    *sorted(p for p in ADVERSARIAL.glob("python_answer_*.py") if "# expect: decorative_dsl" in p.read_text()),
    ADVERSARIAL / "thread_python_tolist.py",
]


@pytest.mark.parametrize("path", case_params(PYTHON_CASES))
def test_without_the_rule_the_python_answers_pass(
    cpu_session: VerifierSession, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The python_answer_* cases are correct, every output element is written by the DSL, and their eager
    operators compute nothing: only what crosses between tensors and Python shows the answer. The calls are not
    timed: a Python answer that costs more than the host-time rule's floor fails that rule too
    (``thread_python_tolist``: 2.6 ms of host work a scored call, which no draw's eager operator took)."""
    monkeypatch.setattr(_eagerwork, "PYTHON_SHARE", math.inf)
    monkeypatch.setattr(_phases, "timing", _timing_skipped)
    report = cpu_session.verify(path, "p36", "tirx")
    if _decoded(report):
        return
    assert report.correct and report.bypass_ok, report.feedback
    found = report.details["eager_work"]
    assert not found["covers"] and min(found["python"].values()) >= 1.0, found


#: Answers computed in Python whose crossings were diluted by whole in-place states, read and lifted through wide
#: views (rt10 F1/F4's classes): each case's problem
THROUGH_STATES = {"python_slots_stored_by_element_p26": "p26", "python_quant_packed_words_p21": "p21"}


@pytest.mark.parametrize("case", sorted(THROUGH_STATES))
def test_python_answers_through_in_place_states_cross_in_bytes(
    cpu_session: VerifierSession, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Correct, every element written by the DSL with a key of its position no decode map holds: only what crosses
    shows the answer, at least all of it in bytes against the answer (about a tenth of the state's elements before:
    passed)."""
    monkeypatch.setattr(_eagerwork, "PYTHON_SHARE", math.inf)
    monkeypatch.setattr(_phases, "timing", _timing_skipped)  # p21's Python takes ~0.4 s a call
    report = cpu_session.verify(ADVERSARIAL / f"{case}.py", THROUGH_STATES[case], "tirx")
    if _decoded(report):  # a decode rule that follows position keys (branch poskey) rejects them first
        return
    assert report.correct and report.bypass_ok, report.feedback
    found = report.details["eager_work"]
    assert not found["covers"] and found["python"]["in"] >= 1.0, found


def test_a_thread_s_tolist_is_counted_as_the_calling_thread_s(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """adversarial/thread_python_tolist.py with what enters the tensors not counted: the input elements its thread
    (started at import, woken by run()) read with tolist() reject it alone, as the calling thread's would (the
    hook reports to the vault whichever thread calls it)."""
    crossing = _eagerwork.crossing
    monkeypatch.setattr(_eagerwork, "crossing", lambda name, ins, outs: (crossing(name, ins, outs)[0], 0))
    report = cpu_session.verify(ADVERSARIAL / "thread_python_tolist.py", "p36", "tirx")
    assert report.failure == "decorative_dsl", report.feedback
    found = report.details["eager_work"]
    assert found["python"]["in"] == 0 and found["python"]["out"] >= 1.0, found


def test_without_the_thread_check_an_answer_computed_in_a_thread_is_erased(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """adversarial/thread_answer_during_draw.py: the audit cannot see a thread's eager work, which is why a thread
    started during a correctness draw fails it. Without that check the answer passed (until 2026-12-03); now what the
    thread wrote is memory no recorded writer left, erased before the launch reads it (README, "Memory no recorded
    writer left"): the draw's output is the sentinel decoded."""
    monkeypatch.setattr(_phases, "_audited_threads", lambda normal: None)
    report = cpu_session.verify(ADVERSARIAL / "thread_answer_during_draw.py", "p36", "tirx")
    assert not report.correct and report.failure in ("nan", "wrong_output"), report.feedback


def test_a_launch_s_arguments_given_by_value_cross_from_python() -> None:
    """rt9a F4: an eager answer read out with one ``tolist`` and stored by launches taking floats passed the
    plain-Python rule (no element lifted into a tensor). The vault records how many arguments a counted launch took
    by value, and each crosses into the DSL's memory as 64 bits lifted would."""
    assert _eagerwork.category(_eagerwork.LAUNCH_SCALARS) == "none"
    assert _eagerwork.crossing(_eagerwork.LAUNCH_SCALARS, (), ((16,),)) == (0, 16 * 8)
    found = _eagerwork.work_of([((_eagerwork.LAUNCH_SCALARS, (), ((16,),)), 80)])
    assert found.from_python == 80 * 16 * 8 and sum(found.amounts.values()) == 0.0


@pytest.mark.parametrize("case", sorted(CHEAPER_THAN_THE_COST_MODEL))
def test_formulations_cheaper_than_the_cost_model_are_priced_against_the_necessary_work(case: str) -> None:
    """A selection (p45: the top-k of the logits, a softmax over the k kept) and a scan (p66: float64 without the
    stabilisation, exponentials hoisted), each with a small real DSL stage, written more cheaply than the cost model
    counts: under every measure against the reference and under the floor against ``cost()`` (they passed every
    rule), most of the work every formulation does (``Cost.necessary_flops``)."""
    found = _case_priced(case, CHEAPER_THAN_THE_COST_MODEL[case])
    assert found.covers and not found.like_the_reference and found.useful >= _eagerwork.USEFUL_SHARE, found.as_dict()
    before = _case_priced(case, CHEAPER_THAN_THE_COST_MODEL[case], necessary=False)
    assert not before.covers and before.useful < _eagerwork.USEFUL_SHARE, before.as_dict()
    assert "the FLOPs every formulation of it does" in _eagerwork.explain(found)


def test_a_cost_model_declares_necessary_work_only_below_its_useful_flops() -> None:
    """``Cost.necessary_flops`` lowers the floor's basis, never raises it (an honest plan's share would grow)."""
    from problems._common import Cost

    assert Cost(bytes=1, flops={"fp32": 19.0}).floor_flops == 19.0
    assert Cost(bytes=1, flops={"fp32": 19.0}, necessary_flops=10.0).floor_flops == 10.0
    with pytest.raises(ValueError, match="necessary_flops"):
        Cost(bytes=1, flops={"fp32": 19.0}, necessary_flops=20.0)


def _gemm_by_linear_algebra() -> dict[str, Any]:
    """x [T, K] @ w[E, K].T written with operators that are not products by name (red team rt20 F1): each a
    function of (x, w) returning the [T, E] product, checked against ``x @ w.T``."""

    def triangular_solve(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        # [[I, 0], [-W, I]] · [X; Y] = [x^T; 0]  gives  Y = W · x^T
        k, e = x.shape[1], w.shape[0]
        system = torch.eye(k + e, dtype=x.dtype)
        system[k:, :k] = -w
        rhs = torch.cat([x.t(), torch.zeros(e, x.shape[0], dtype=x.dtype)])
        return torch.triangular_solve(rhs, system, upper=False).solution[k:].t()

    def solve_from_the_right(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        # solved from the right: [Z1, Z2] · [[I, W^T], [0, I]] = [x, 0]  gives  Z2 = -x · W^T
        k, e = x.shape[1], w.shape[0]
        system = torch.eye(k + e, dtype=x.dtype)
        system[:k, k:] = w.t()
        rhs = torch.cat([x, torch.zeros(x.shape[0], e, dtype=x.dtype)], dim=1)
        return -torch.linalg.solve_triangular(system, rhs, upper=True, left=False)[:, k:]

    def pairwise_distances(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        # x·w = (|x|^2 + |w|^2 - |x - w|^2) / 2, the norms from the distances to a zero row
        t, e = x.shape[0], w.shape[0]
        d = torch.pdist(torch.cat([x, w, torch.zeros(1, x.shape[1], dtype=x.dtype)])) ** 2
        n = t + e + 1

        def at(i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:  # condensed index of the pair i < j
            return i * n - i * (i + 1) // 2 + (j - i - 1)

        rows, cols = torch.arange(t)[:, None], t + torch.arange(e)[None, :]
        last = n - 1
        return (
            d[at(rows, torch.full_like(rows, last))] + d[at(cols, torch.full_like(cols, last))] - d[at(rows, cols)]
        ) / 2

    return {f.__name__: f for f in (triangular_solve, solve_from_the_right, pairwise_distances)}


@pytest.mark.parametrize("how", [*_gemm_by_linear_algebra()])
def test_a_product_through_linear_algebra_is_priced_as_the_product(how: str) -> None:
    """A GEMM embedded in a triangular solve, a factorisation or pairwise distances is priced at least at its
    products (red team rt20 F1: a triangular solve priced as a product of its right-hand side, ``pdist`` at an
    unknown operator's contraction of distinct operands, made 94% of p49's gate GEMM at 2.5-4% of its FLOPs)."""
    x, w = torch.randn(48, 64, dtype=torch.float64), torch.randn(24, 64, dtype=torch.float64)
    gemm = _gemm_by_linear_algebra()[how]
    assert torch.allclose(gemm(x, w), x @ w.t(), atol=1e-6)
    products = work_of(reference_ops(lambda a, b: a @ b.t(), [x, w])).amounts["matmul"]
    assert products == 2.0 * 48 * 64 * 24 * _widths.PRECISION["product", torch.float64]
    assert work_of(reference_ops(gemm, [x, w])).amounts["matmul"] >= products


def test_numbers_an_operator_hands_back_are_values_out_unless_they_describe_a_tensor() -> None:
    """Red team rt71 F0: ``q_scale()`` of quantized tensors whose scales were the answer's words handed each back as a
    float, read by ``quantize_per_tensor``'s C++ with no ``item()``. Every operator returning Python numbers read from
    data counts them (``python_values``); one describing a tensor (its sizes, layout, a flag) does not."""
    returned: dict[str, int] = {}

    class Counting(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            base = str(func).split(".")[1]
            returned[base] = returned.get(base, 0) + _eagerwork.python_values(base, out)
            return out

    x = torch.randn(4, 4)
    words = torch.randn(3, dtype=torch.float64)
    with pytest.warns(UserWarning, match="deprecated"):
        quantized = torch.quantize_per_tensor([torch.zeros(0)] * 3, words, torch.zeros(3, dtype=torch.int64),
                                              torch.qint32)  # fmt: skip
    sparse = x.to_sparse()
    with Counting():
        scales = [q.q_scale() for q in quantized]
        points = [q.q_zero_point() for q in quantized]
        torch.equal(x, x.clone())
        torch.allclose(x, x)
        sparse._nnz()
        x.is_set_to(x), x.is_same_size(x), sparse.sparse_dim(), sparse.dense_dim(), sparse.is_coalesced()
    assert scales == words.tolist() and points == [0, 0, 0]
    assert returned["q_scale"] == 3 and returned["q_zero_point"] == 3
    assert returned["equal"] == returned["allclose"] == returned["_nnz"] == 1
    assert all(returned.get(name, 0) == 0 for name in ("is_set_to", "is_same_size", "sparse_dim", "dense_dim",
                                                       "is_coalesced", "clone"))  # fmt: skip
    # a sparse tensor made without a size takes it from its indices' largest (rt71 F2): a size the data decides
    assert {"_sparse_coo_tensor_with_dims_and_tensors", "sparse_compressed_tensor"} <= _eagerwork.DATA_SIZED
    assert op_work("aten._sparse_coo_tensor_with_dims_and_tensors.default", ((2, 2), (2,)), ((1 << 31, 1 << 31),)) == []


def test_an_answer_put_together_from_an_inputs_own_bytes_is_a_value_in_a_byte() -> None:
    """Red team rt68 F0's way back in, the one every full pass of rt68-rt71 used whatever its way out: each byte of an
    answer known to Python taken as a one-byte slice of the problem input where it holds that byte, joined by one
    ``cat``. Each slice's offset is Python's value: two bytes in a slice (one of 4096 places), twice the answer's
    bytes; so is a piece picked by list index from an even split of the input. A loop over the input's rows counts
    its stride only."""
    x = torch.randn(64, 16)
    answer = torch.randint(0, 256, (96,), dtype=torch.uint8).tolist()  # the bytes Python holds, from a way out

    def sliced(t: torch.Tensor) -> torch.Tensor:
        raw = t.view(torch.uint8).view(-1)
        where = {int(b): k for k, b in enumerate(raw.tolist())}
        return torch.cat([raw[where[b] : where[b] + 1] for b in answer if b in where])

    def picked(t: torch.Tensor) -> torch.Tensor:
        raw = t.view(torch.uint8).view(-1)
        where = {int(b): k for k, b in enumerate(raw.tolist())}
        pieces = raw.split(1)
        return torch.cat([pieces[where[b]] for b in answer if b in where])

    def rows(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t[k] * 2 for k in range(t.shape[0])])

    for way in (sliced, picked):
        found = _vault_records(way, [x])
        assert work_of(found).from_python >= 2 * 90, way.__name__
        # the recorder marks alike (the vault's tolist() comes from the worker's hook, not installed here)
        recorded = [r for r in reference_ops(way, [x]) if not r[0][0].startswith(_eagerwork.TO_PYTHON)]
        assert sorted(found) == sorted(recorded)
    assert work_of(_vault_records(rows, [x])).from_python == 1


_KEPT_TABLE = torch.arange(256, dtype=torch.uint8)  # (at import: before any call)
_KEPT_PIECES = _KEPT_TABLE.split(1)
_KEPT_SINGLES = [torch.tensor([v], dtype=torch.uint8) for v in range(256)]  # (each its own storage)
_KEPT_STRIDED = [torch.empty_strided((1,), (v + 1,), dtype=torch.uint8).fill_(v) for v in range(256)]
_KEPT_SIZED = [torch.full((v + 1,), v, dtype=torch.uint8) for v in range(256)]


def test_a_piece_kept_from_before_the_call_and_picked_by_python_is_a_value_in() -> None:
    """Red team rt72: pieces of a table made at import and picked by list index (F1: no view operator in the call),
    a tensor ``set_`` on the table's storage at Python's offset (F2), ``roll`` by Python's shift (F3) and a pad's value
    from few distinct numbers, again and again, each brought a whole answer back in at 0 bytes: each is a byte in or
    more now (``offset_reads``; integer arguments and repeated values in ``scalars_mark``), the vault and the
    reference's recorder alike. Kept pieces read in order count their start and stride only."""
    x = torch.randn(64, 16)
    answer = torch.randint(0, 256, (96,), dtype=torch.uint8, generator=torch.Generator().manual_seed(3)).tolist()
    changes = sum(a != b for a, b in itertools.pairwise(answer)) + 1

    def picked(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([_KEPT_PIECES[b] for b in answer])

    def placed(t: torch.Tensor) -> torch.Tensor:
        storage = _KEPT_TABLE.untyped_storage()
        return torch.cat([torch.empty(0, dtype=torch.uint8).set_(storage, b, (1,), (1,)) for b in answer])

    def rolled(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.roll(_KEPT_TABLE, -b)[:1] for b in answer])

    def padded(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([F.pad(_KEPT_TABLE[:0], (1, 0), value=b) for b in answer])

    def own_storages(t: torch.Tensor) -> torch.Tensor:  # rt73 G1: each piece its own storage, read at its start
        return torch.cat([_KEPT_SINGLES[b] for b in answer])

    def own_strides(t: torch.Tensor) -> torch.Tensor:  # rt74 H1: and each its own stride
        return torch.cat([_KEPT_STRIDED[b] for b in answer])

    def own_sizes(t: torch.Tensor) -> torch.Tensor:  # and each its own size (a stream a kernel can decode)
        return torch.cat([_KEPT_SIZED[b] for b in answer])

    nibbles = [n for b in answer for n in (b & 15, b >> 4)]

    def split_here(t: torch.Tensor) -> torch.Tensor:  # rt73 G4: a split's 16 places counted once, read 192 times
        pieces = _KEPT_TABLE[:16].split(1)
        return torch.cat([pieces[n] for n in nibbles])

    def scalar_list(t: torch.Tensor) -> torch.Tensor:  # rt73 G5: 16 values, among the call's 16 free, in one list
        return torch.cat(torch._foreach_add([_KEPT_SINGLES[0]] * len(nibbles), nibbles))

    # (a byte 0 is at the table's start, and a few reads continue a run by chance: 90% of the answer's changes; the
    # first reads of kept storages choose among fewer; a nibble brings half a byte)
    for way, least in ((picked, changes), (placed, changes), (rolled, len(answer) - 16), (padded, len(answer) - 16),
                       (own_storages, changes * 0.7), (own_strides, changes * 0.7), (own_sizes, changes * 0.6),
                       (split_here, changes * 0.8),
                       (scalar_list, changes * 0.8)):  # fmt: skip
        found = _vault_records(way, [x])
        assert work_of(found).from_python >= 0.9 * least, way.__name__
        # (which storage a read chose is known by its address: the recorder's count may differ by a few reads' bits)
        assert abs(work_of(found).from_python - work_of(reference_ops(way, [x])).from_python) <= 2, way.__name__

    def in_order(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([_KEPT_PIECES[k] for k in range(96)])

    assert work_of(_vault_records(in_order, [x])).from_python == 1  # its stride


@pytest.mark.parametrize(
    ("operator", "make", "by_data"),
    [
        (torch.ops.aten._ctc_loss.Tensor, lambda: (torch.zeros(1, 1, 2), torch.ones(1, 8, dtype=torch.int64),
                                                   torch.ones(1, dtype=torch.int64), torch.tensor([3])), True),
        (torch.ops.aten.nonzero.default, lambda: (torch.arange(4),), True),
        (torch.ops.aten.mm.default, lambda: (torch.randn(2, 3), torch.randn(3, 4)), False),
        (torch.ops.aten.index.Tensor, lambda: (torch.randn(5), [torch.tensor([1, 3])]), False),
        (torch.ops.aten.index.Tensor, lambda: (torch.randn(5), [torch.tensor([True, False] * 2 + [True])]), True),
        # rt74 H2: an operand of a Tensor subclass went to the real kernel, which sized its result from the data
        (torch.ops.aten.unique_dim_consecutive.default,
         lambda: (torch.nn.Parameter(torch.arange(8.0), requires_grad=False), 0), True),
    ],
    ids=["ctc_loss", "nonzero", "mm", "index_by_positions", "index_by_mask", "parameter_operand"],
)
def test_a_result_sized_by_its_operands_data_is_found_by_its_meta_kernel(
    operator: Any, make: Any, by_data: bool
) -> None:
    """Red team rt73 G2: ``_ctc_loss``'s C++ reads its target lengths and sizes ``log_alpha`` by their largest, a byte
    out per call through ``.shape``, and no list named it. An operator whose meta kernel cannot size its results (it
    would need the data) hands Python a value by their sizes (``sized_by_data``)."""
    assert _eagerwork.sized_by_data(operator, make(), {}) is by_data
