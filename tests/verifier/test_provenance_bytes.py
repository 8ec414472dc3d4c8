"""Provenance judged on the bytes the launches left (DESIGN §5, the bypass test as coverage).

Each case drives the provenance vault directly: a Python "kernel" behind a counted gate stands for native
code (its own tensor operations are not reported, as a native launch's are not), ``op`` reports an eager
operator as the dispatch mode would, and anything neither reports is a write the mode never saw (a thread,
``redispatch``, the modes popped). A tensor the test makes outside the vault stands for an eager operator's result
(in a worker every allocation is one): it is reported as lifted, once per storage, before an operator or launch
reads it (``Audit.recorded``; the vault erases memory no recorded writer left). The share of the output that existed
outside the DSL is then computed by the verifier's own ``apply_provenance``.

The cases marked "passed before" were judged 0% eager by the range taint this replaced (the first..last
changed byte of a launch counted as the DSL's; an eager write strictly inside a DSL range stayed derived;
any DSL operand made an eager result derived; only floating launch arguments that eager code made during
the call were held): run against commit 091cfca, each of them fails.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from mkbsim.verifier import _control, _coverage, _provenance
from mkbsim.verifier._compare import OutputRef
from mkbsim.verifier._operators import dispatch_hooks
from mkbsim.verifier._provenance import gate, page_layout, provenance_lib, provenance_vault
from mkbsim.verifier._vault import Registry

N = 256  # output elements (16 x 16)
ROWS = 16


@dataclass
class Audit:
    control: _control.ControlPage
    send: Any
    op: Callable[..., Any]
    registry: Registry
    serial: Any  # the launch lock the gate and the mode share, as the worker's do
    made: set[int] = field(default_factory=set)  # the storages (by address) a reported operator made or lifted

    def recorded(self, *given: Any, lift: bool = True) -> None:
        """The tensors in ``given`` whose storage no reported operator made: reported as lifted (eager-made)."""
        for t in given:
            if isinstance(t, (list, tuple)):
                self.recorded(*t, lift=lift)
            elif isinstance(t, dict):
                self.recorded(*t.values(), lift=lift)
            elif isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.made:
                self.made.add(t.untyped_storage().data_ptr())
                if lift:
                    self.send((3, torch.ops.aten.lift_fresh.default, "aten.lift_fresh.default", (t,), {}, t))

    def launch(self, kernel: Callable[..., Any], *args: Any) -> None:
        self.recorded(args)
        self.send((0, kernel, "launch"))
        self.registry.protect(gate, _send=self.send, _original=kernel, _count=True, _serial=self.serial)(*args)

    def eager(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> Any:
        """An eager operator, run and reported as the provenance mode does."""
        self.recorded(args, kwargs or {})
        func = functools.reduce(getattr, name.split("."), torch.ops)
        out = self.op(None, func, (), args, kwargs)
        self.recorded(out, lift=False)  # made by the operator
        return out

    def outside_share(self, out: torch.Tensor) -> float:
        """The share of ``out`` the verifier judges to have existed outside the DSL."""
        self.registry.protect(_provenance.report_result, _send=self.send)([out])
        records = self.control.report([N])["records"]
        assert not [r for r in records if r[0] == "fault"], records
        anchor = out.detach().double().clone()
        ref = OutputRef("out", anchor, anchor, out.dtype, out.is_floating_point(), 0.0, 0.0, 0.0)
        found = [_coverage.OutputCoverage("out", N, 1.0)]
        mask = torch.ones(N, dtype=torch.bool)
        _coverage.apply_provenance(found, records, [ref], [mask], [torch.arange(N)], "test")
        return found[0].eager_match


@contextlib.contextmanager
def _opened(positions: torch.Tensor, numel: int) -> Iterator[Audit]:
    """An audited call of one output of ``numel`` elements, sampled at ``positions``."""
    control = _control.ControlPage()
    registry = Registry()
    send = registry.open(
        provenance_vault, control.buf, provenance_lib(torch.device("cpu")), page_layout(), [positions], [numel], {}
    )
    serial = _thread.RLock()
    op = registry.protect(
        _provenance.dispatch, _send=send, _serial=serial, **dispatch_hooks(registry, torch.device("cpu"))
    )
    control.begin_call(suppress=False, audit=True)
    yield Audit(control, send, op, registry, serial)
    control.close()


@pytest.fixture
def audit() -> Iterator[Audit]:
    torch.manual_seed(0)
    with _opened(torch.arange(N), N) as opened:
        yield opened


def _answer() -> torch.Tensor:
    return torch.randn(ROWS, N // ROWS)


def _halves() -> list[torch.Tensor]:
    """An eager answer in two row halves: no eager tensor of the output's size (whose values the vault samples)."""
    return list(_answer().split(ROWS // 2))


def zero_fill(s: torch.Tensor) -> None:
    s.zero_()


def mark_ends(s: torch.Tensor) -> None:
    s[0] = 1.0
    s[-1] = 2.0


def test_an_unseen_write_over_what_a_launch_left_is_not_the_dsls(audit: Audit) -> None:
    """A thread, ``redispatch`` or popped modes: the write is never reported, the bytes say it (passed before)."""
    s = audit.eager("aten.empty.memory_format", ([N + 2],), {"dtype": torch.float32})
    audit.launch(zero_fill, s)
    s[1 : N + 1].copy_(_answer().reshape(-1))  # not reported: the mode never saw it
    assert audit.outside_share(s[1 : N + 1].view(ROWS, -1)) == 1.0


def test_an_eager_write_inside_a_range_a_launch_wrote_is_not_the_dsls(audit: Audit) -> None:
    """Reported, but strictly inside the launch's range: the range taint kept it derived (passed before)."""
    s = audit.eager("aten.empty.memory_format", ([N + 2],), {"dtype": torch.float32})
    audit.launch(mark_ends, s)
    for k, half in enumerate(_halves()):
        audit.eager("aten.mul.out", (half, 1.0), {"out": s[1 + k * N // 2 : 1 + (k + 1) * N // 2].view(ROWS // 2, -1)})
    assert audit.outside_share(s[1 : N + 1].view(ROWS, -1)) == 1.0


def test_an_answer_written_before_a_launch_that_leaves_it_alone_is_not_the_dsls(audit: Audit) -> None:
    """The launch's argument spans the answer, changes only the ends (passed before: first..last byte)."""
    s = audit.eager("aten.empty.memory_format", ([N + 2],), {"dtype": torch.float32})
    for k, half in enumerate(_halves()):
        audit.eager("aten.mul.out", (half, 1.0), {"out": s[1 + k * N // 2 : 1 + (k + 1) * N // 2].view(ROWS // 2, -1)})
    audit.launch(mark_ends, s)
    assert audit.outside_share(s[1 : N + 1].view(ROWS, -1)) == 1.0


def test_a_later_launch_reading_an_overwritten_buffer_does_not_vouch_for_it(audit: Audit) -> None:
    """DSL bytes overwritten unseen, then passed (unchanged) to another launch: still not the DSL's."""
    s = audit.eager("aten.empty.memory_format", ([N],), {"dtype": torch.float32})
    audit.launch(zero_fill, s)
    s.copy_(_answer().reshape(-1))  # unseen
    flag = audit.eager("aten.empty.memory_format", ([1],), {"dtype": torch.float32})
    audit.launch(lambda buf, f: f.fill_(1.0), s, flag)
    assert audit.outside_share(s.view(ROWS, -1)) == 1.0


def test_what_a_launch_wrote_is_the_dsls_and_zeros_left_in_zeroed_memory_say_nothing(audit: Audit) -> None:
    """An honest kernel writing half its output nonzero and leaving the other half's zeros as they were."""
    out = audit.eager("aten.zeros.default", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    values = _answer().abs() + 1.0

    def kernel(o: torch.Tensor) -> None:
        o[: ROWS // 2] = values[: ROWS // 2]

    audit.launch(kernel, out)
    assert audit.outside_share(out) == 0.0


def test_a_one_element_dsl_seed_does_not_make_an_eager_answer_the_dsls(audit: Audit) -> None:
    """The taint seed (passed before): a DSL value added into an eager answer."""
    seed = audit.eager("aten.empty.memory_format", ([1],), {"dtype": torch.float32})
    audit.launch(zero_fill, seed)
    seeded = [audit.eager("aten.add.Tensor", (half, seed)) for half in _halves()]
    out = audit.eager("aten.cat.default", (seeded,))
    assert audit.outside_share(out) == 1.0


def test_a_dsl_operand_as_large_as_an_eager_answer_does_not_make_their_sum_the_dsls(audit: Audit) -> None:
    """DSL zeros of the output's size added to an eager answer (passed before)."""
    zeros = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    audit.launch(zero_fill, zeros)
    halves = [audit.eager("aten.mul.Tensor", (half, 1.0)) for half in _halves()]
    sums = [audit.eager("aten.add.Tensor", (half, z)) for half, z in zip(halves, zeros.split(ROWS // 2), strict=True)]
    out = audit.eager("aten.cat.default", (sums,))
    assert audit.outside_share(out) == 1.0


def test_an_eager_gemm_on_dsl_activations_is_the_dsls(audit: Audit) -> None:
    """p52's partial plan: a DSL quantisation, an eager GEMM against a weight eager code scaled."""
    weight = torch.randn(N // ROWS, 64)
    act = audit.eager("aten.empty.memory_format", ([ROWS, 64],), {"dtype": torch.float32})
    x = torch.randn(ROWS, 64)
    audit.launch(lambda a: a.copy_(x.round()), act)
    scaled = audit.eager("aten.mul.Tensor", (weight, 0.5))  # eager-made, larger than the activations
    gemm = audit.eager("aten.mm.default", (act, audit.eager("aten.t.default", (scaled,))))
    out = audit.eager("aten._to_copy.default", (gemm,), {"dtype": torch.bfloat16})
    assert audit.outside_share(out) == 0.0


def test_an_eager_epilogue_on_a_dsl_result_is_the_dsls(audit: Audit) -> None:
    """A DSL result rescaled by a small eager-computed vector (a dequantisation epilogue)."""
    acc = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    values = _answer()
    audit.launch(lambda a: a.copy_(values), acc)
    scale = audit.eager("aten.mul.Tensor", (torch.rand(ROWS, 1), 2.0))
    out = audit.eager("aten.mul.Tensor", (acc, scale))
    assert audit.outside_share(out) == 0.0


def test_an_eager_answer_passed_as_integer_bits_from_memory_made_before_the_call_is_a_copy(audit: Audit) -> None:
    """A bf16 answer, transposed into a pool allocated before the call, handed over as int16 (passed
    before: only floating arguments in memory eager code made during the call were held)."""
    pool = torch.zeros(4 * N, dtype=torch.bfloat16)
    answer = _answer().to(torch.bfloat16)
    pool[:N].view(N // ROWS, ROWS).copy_(answer.t())  # unseen: made before the audited call
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.bfloat16})

    def untranspose(bits: torch.Tensor, o: torch.Tensor) -> None:
        o.view(torch.int16).copy_(bits.t())

    audit.launch(untranspose, pool[:N].view(torch.int16).view(N // ROWS, ROWS), out)
    assert audit.outside_share(out) == 1.0


def test_problem_inputs_are_never_held(audit: Audit) -> None:
    """A gather out of an input copies the input's values legitimately (an embedding, a cache read)."""
    table = torch.randn(4 * N)
    audit.registry.protect(_provenance.report_inputs, _send=audit.send)([table])
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    audit.launch(lambda t, o: o.copy_(t[N : 2 * N].view(ROWS, -1)), table, out)
    assert audit.outside_share(out) == 0.0


def test_a_per_row_dsl_reduction_broadcast_over_the_cast_input_is_the_dsls(audit: Audit) -> None:
    """``honest/light_kernel_row_scale.py``: the DSL computes one inverse RMS per row (1/16 of the output's
    elements here, 1/128 at SMOKE), eager code scales the cast input by it: the cast input is no eager-made
    operand (a copy of a problem input), so the product is the DSL's."""
    x = torch.randn(ROWS, N // ROWS).to(torch.bfloat16)
    weight = torch.randn(N // ROWS).to(torch.bfloat16)
    audit.registry.protect(_provenance.report_inputs, _send=audit.send)([x, weight])
    inv = audit.eager("aten.empty.memory_format", ([ROWS],), {"dtype": torch.float32})
    audit.launch(lambda a, o: o.copy_(torch.rsqrt(a.float().pow(2).mean(-1) + 1e-6)), x, inv)
    wide = audit.eager("aten._to_copy.default", (x,), {"dtype": torch.float32})
    scaled = audit.eager("aten.mul.Tensor", (wide, audit.eager("aten.unsqueeze.default", (inv, 1))))
    weighted = audit.eager(
        "aten.mul.Tensor", (scaled, audit.eager("aten._to_copy.default", (weight,), {"dtype": torch.float32}))
    )
    out = audit.eager("aten._to_copy.default", (weighted,), {"dtype": torch.bfloat16})
    assert audit.outside_share(out) == 0.0


def test_arguments_whose_layout_has_no_view_at_another_width_are_held_at_their_own(audit: Audit) -> None:
    """A bf16 argument with an odd row stride (129 elements) has no int32 view: the vault must not fault on
    it (a fault fails the draw), and still finds the answer it holds at its own width."""
    padded = torch.zeros(ROWS, N // ROWS + 1, dtype=torch.bfloat16)
    padded[:, 1:] = _answer().to(torch.bfloat16)  # unseen: made before the audited call
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.bfloat16})
    audit.launch(lambda p, o: o.copy_(p), padded[:, 1:], out)
    assert audit.outside_share(out) == 1.0


def test_a_large_integer_table_is_no_copy_of_a_small_integer_output(audit: Audit) -> None:
    """Expert ids (a small value domain) computed by the DSL from an eager-made index table many times their
    size: the table holds every id with any multiplicity by chance, which is no copy."""
    table = audit.eager("aten.arange.default", (8,), {"dtype": torch.int32})
    table = audit.eager("aten.repeat.default", (table, [4 * N]))
    ids = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.int32})
    chosen = torch.randint(1, 8, (ROWS, N // ROWS), dtype=torch.int32)
    audit.launch(lambda tab, o: o.copy_(chosen), table, ids)
    assert audit.outside_share(ids) == 0.0


def test_an_integer_answer_padded_by_eager_code_is_a_copy(audit: Audit) -> None:
    """Eager ids, padded by one column so that no eager tensor has the output's size, gathered by the DSL."""
    padded = audit.eager("aten.randint.low", (1, 8, [ROWS, N // ROWS + 1]), {"dtype": torch.int32})
    ids = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.int32})
    audit.launch(lambda p, o: o.copy_(p[:, 1:]), padded, ids)
    assert audit.outside_share(ids) == 1.0


def test_a_cast_input_overwritten_unseen_is_erased(audit: Audit) -> None:
    """``x.float()`` counts as a problem input only while its bytes are those the cast made: an eager answer
    written into it where the mode cannot see (a thread), then scaled by a per-row DSL value, derived nothing
    (one column wider than the output, so that no tensor of the output's size is sampled before the slice); since
    2026-12-03 the write is no recorded writer's and is erased before the product reads it."""
    x = torch.randn(ROWS, N // ROWS + 1).to(torch.bfloat16)
    audit.registry.protect(_provenance.report_inputs, _send=audit.send)([x])
    rows = audit.eager("aten.empty.memory_format", ([ROWS, 1],), {"dtype": torch.float32})
    audit.launch(lambda o: o.copy_(torch.rand(ROWS, 1) + 0.5), rows)  # varied: a constant derives nothing anyway
    wide = audit.eager("aten._to_copy.default", (x,), {"dtype": torch.float32})
    wide[:, 1:].copy_(_answer())  # unseen
    scaled = audit.eager("aten.mul.Tensor", (wide, rows))
    out = audit.eager("aten.slice.Tensor", (scaled, 1, 1, N // ROWS + 1))
    assert bool(out.isnan().all())


def test_a_cast_made_where_a_freed_cast_was_is_still_a_copy_of_its_input(audit: Audit) -> None:
    """``h.float()`` freed, then ``r.float()`` made at its address: the stale record of the first cast (other bytes)
    must not decide that the second is eager-made, or the honest per-row plan loses its credit (failed before:
    the first record containing the range decided)."""
    h = torch.randn(ROWS, N // ROWS).to(torch.bfloat16)
    r = torch.randn(ROWS, N // ROWS).to(torch.bfloat16)
    audit.registry.protect(_provenance.report_inputs, _send=audit.send)([h, r])
    inv = audit.eager("aten.empty.memory_format", ([ROWS, 1],), {"dtype": torch.float32})
    audit.launch(lambda o: o.copy_(torch.rand(ROWS, 1) + 0.5), inv)
    first = audit.eager("aten._to_copy.default", (h,), {"dtype": torch.float32})
    scaled_h = audit.eager("aten.mul.Tensor", (first, inv))
    # the allocator hands the freed cast's memory to the next one: reported as the mode reports a fresh result
    first.copy_(r.float())  # unseen: the cast itself
    cast = torch.ops.aten._to_copy.default
    assert audit.send((3, cast, str(cast), (r,), {"dtype": torch.float32}, first)) is None
    scaled_r = audit.eager("aten.mul.Tensor", (first, inv))
    out = audit.eager("aten.add.Tensor", (scaled_h, scaled_r))
    assert audit.outside_share(out) == 0.0


def _routing_rows(rows: int) -> torch.Tensor:
    """Expert ids as a router picks them: 8 distinct ids of 64 per token, in order of score."""
    return torch.stack([torch.randperm(64)[:8] for _ in range(rows)]).to(torch.int32)


def test_an_integer_output_copied_from_the_first_rows_of_a_large_eager_table_is_a_copy(audit: Audit) -> None:
    """The eager routing run on the tokens three times over (its ids exist only as a table 3x the output), a kernel
    copying the first rows out (passed before: a table more than twice the output's size was exempt)."""
    answer = _routing_rows(ROWS * N // ROWS // 8)
    table = audit.eager("aten.mul.Tensor", (torch.cat([answer] * 3), 1))  # no eager tensor of the output's size
    ids = audit.eager("aten.empty.memory_format", (list(answer.shape),), {"dtype": torch.int32})
    audit.launch(lambda tab, o: o.copy_(tab[: o.shape[0]]), table, ids)
    assert audit.outside_share(ids) == 1.0


def test_an_integer_output_gathered_from_every_third_row_of_an_eager_table_one_element_off_is_a_copy(
    audit: Audit,
) -> None:
    """The same answer interleaved with junk rows and shifted by one element: found at another alignment."""
    answer = _routing_rows(ROWS * N // ROWS // 8)
    junk = [_routing_rows(answer.shape[0]) for _ in range(2)]
    rows = torch.stack([answer, *junk], 1).reshape(-1)
    table = audit.eager("aten.cat.default", ([torch.zeros(1, dtype=torch.int32), rows],))
    ids = audit.eager("aten.empty.memory_format", (list(answer.shape),), {"dtype": torch.int32})
    audit.launch(lambda tab, o: o.copy_(tab[1:].view(-1, 3, 8)[:, 0]), table, ids)
    assert audit.outside_share(ids) == 1.0


def test_a_large_table_of_few_values_holds_a_small_domain_output_s_runs_only_by_chance(audit: Audit) -> None:
    """Flags of a few bits each (16 possible runs of 8): a table 8x the output's size holds every run by chance,
    and as often rotated, so none of it is a copy."""
    table = audit.eager("aten.randint.low", (0, 2, [8 * N]), {"dtype": torch.int32})
    table = audit.eager(
        "aten.mul.Tensor", (table, audit.eager("aten.randint.low", (0, 2, [8 * N]), {"dtype": torch.int32}))
    )
    flags = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.int32})
    chosen = (torch.rand(ROWS, N // ROWS) < 0.25).to(torch.int32)
    audit.launch(lambda tab, o: o.copy_(chosen), table, flags)
    assert audit.outside_share(flags) == 0.0


def test_an_integer_output_copied_from_an_eager_table_stored_column_by_column_is_a_copy(audit: Audit) -> None:
    """The answer's rows as the columns of a table three times its size."""
    answer = _routing_rows(ROWS * N // ROWS // 8)
    table = audit.eager("aten.mul.Tensor", (torch.cat([answer] * 3).t().contiguous(), 1))
    ids = audit.eager("aten.empty.memory_format", (list(answer.shape),), {"dtype": torch.int32})
    audit.launch(lambda tab, o: o.copy_(tab[:, : o.shape[0]].t()), table, ids)
    assert audit.outside_share(ids) == 1.0


def test_an_integer_output_copied_from_an_eager_table_of_its_rows_reversed_and_their_rotations_is_a_copy(
    audit: Audit,
) -> None:
    """Each row's ids stored reversed, with every rotation of every row beside them (decoys a fixed chance estimate
    would count as chance): runs are compared in any order, against decoys the submission cannot know."""
    answer = _routing_rows(ROWS * N // ROWS // 8)
    rows = [answer.flip(1)] + [answer.roll(k, 1) for k in range(1, 8)]
    table = audit.eager("aten.mul.Tensor", (torch.cat(rows), 1))
    ids = audit.eager("aten.empty.memory_format", (list(answer.shape),), {"dtype": torch.int32})
    audit.launch(lambda tab, o: o.copy_(tab[: o.shape[0]].flip(1)), table, ids)
    assert audit.outside_share(ids) == 1.0


# Copies in any layout (``COPY_RUNS``): runs of the output found in eager-made launch arguments, pooled over
# arguments and launches, only the positions found taken from the DSL. Each of the first three was judged 0% eager
# before (no argument held 95% of the output).


def copy_rows(dst: torch.Tensor, src: torch.Tensor, first: int) -> None:
    dst[first : first + src.shape[0]] = src


def test_an_answer_in_two_halves_copied_by_two_launches_is_not_the_dsls(audit: Audit) -> None:
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    for k, half in enumerate(_halves()):
        audit.launch(copy_rows, out, audit.eager("aten.mul.Tensor", (half, 1.0)), k * ROWS // 2)
    # the copy checks' chance correction draws decoys from a system-seeded generator: now and then (2 in ~40 runs)
    # it withholds about 1% of the positions, once (clean-clone CI, 2026-12-02) 3.9%; the decorative line is at 50%
    assert audit.outside_share(out) >= 0.9


def test_an_answer_split_by_columns_into_two_arguments_is_not_the_dsls(audit: Audit) -> None:
    answer = _answer()
    left, right = (audit.eager("aten.mul.Tensor", (part, 1.0)) for part in answer.split(N // ROWS // 2, 1))
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    audit.launch(lambda o, a, b: o.copy_(torch.cat([a, b], 1)), out, left, right)
    assert audit.outside_share(out) == 1.0


def test_a_padded_argument_holding_most_of_the_answer_takes_only_those_positions(audit: Audit) -> None:
    """7/8 of the answer in a padded, transposed buffer; the kernel computes the last 2 of 16 columns itself."""
    answer = _answer()
    held = audit.eager("aten.zeros.default", ([N // ROWS, ROWS + 3],), {"dtype": torch.float32})
    audit.eager("aten.copy_.default", (held[:14, 3:], audit.eager("aten.mul.Tensor", (answer[:, :14].t(), 1.0))))
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    audit.launch(lambda o, h: (o[:, :14].copy_(h[:14, 3:].t()), o[:, 14:].copy_(answer[:, 14:] * 1.0)), out, held)
    assert audit.outside_share(out) == pytest.approx(14 / 16)


def _uniform(levels: int) -> Callable[[int, torch.Generator], torch.Tensor]:
    return lambda n, drawn: torch.randint(0, levels, (n,), generator=drawn)


def _skewed(ratio: float) -> Callable[[int, torch.Generator], torch.Tensor]:
    """16 values, each ``ratio`` times as likely as the one before (0.3: 70% zeros, 21% ones, ...)."""
    weights = ratio ** torch.arange(16, dtype=torch.float64)
    return lambda n, drawn: torch.multinomial(weights, n, replacement=True, generator=drawn)


def _sparse(n: int, drawn: torch.Generator) -> torch.Tensor:
    """1% ones."""
    return (torch.rand(n, generator=drawn) < 0.01).long()


def _in_runs(n: int, drawn: torch.Generator) -> torch.Tensor:
    """Two values in runs of 10 on average (a mask of a smooth signal's sign)."""
    return (torch.rand(n, generator=drawn) < 0.1).long().cumsum(0) % 2


def _normal(n: int, drawn: torch.Generator) -> torch.Tensor:
    """A smooth spread of values: at bf16, a buffer 64 times an output's size holds nearly all its values, each as
    often as the output does (a gathered V beside a decode kernel's output)."""
    return torch.randn(n, generator=drawn)


def _found_by_chance(
    draw: Callable[[int, torch.Generator], torch.Tensor], dtype: torch.dtype, rows: int, cols: int, seeds: int
) -> list[int]:
    """The seeds for which a kernel writing a draw of its own is found, at any of its sampled positions, in an eager
    buffer of the same process 64 times its size."""
    found = []
    for seed in range(seeds):
        drawn = torch.Generator().manual_seed(seed)
        positions = torch.randperm(rows * cols, generator=drawn)[: _provenance.SAMPLES].sort()[0]
        with _opened(positions, rows * cols) as audit:
            pool = audit.eager("aten._to_copy.default", (draw(64 * rows * cols, drawn),), {"dtype": dtype})
            values = draw(rows * cols, drawn).reshape(rows, cols).to(dtype)
            out = audit.eager("aten.empty.memory_format", ([rows, cols],), {"dtype": dtype})
            audit.launch(lambda o, p, v=values: o.copy_(v), out, pool)
            audit.registry.protect(_provenance.report_result, _send=audit.send)([out])
            if [r for r in audit.control.report([positions.numel()])["records"] if r[0] == "contains"]:
                found.append(seed)
    return found


@pytest.mark.parametrize(
    ("draw", "dtype", "rows", "cols", "seeds"),
    [
        (_uniform(4), torch.int8, 16, 16, 200),
        (_uniform(4), torch.float8_e4m3fn, 16, 16, 50),
        (_skewed(0.3), torch.int8, 16, 16, 100),
        (_uniform(2), torch.bool, 32, 64, 50),
        (_in_runs, torch.bool, 16, 16, 30),
        (_sparse, torch.bool, 32, 64, 20),
        (_normal, torch.bfloat16, 32, 64, 10),
    ],
    ids=["int8 of 4 values", "fp8 codes of 4 values", "int8 70% zeros", "bool", "bool in runs", "bool 1% ones",
         "bf16 normal"],  # fmt: skip
)
def test_outputs_of_few_values_are_not_found_by_chance(
    draw: Callable[[int, torch.Generator], torch.Tensor], dtype: torch.dtype, rows: int, cols: int, seeds: int
) -> None:
    """A kernel writing its own values next to an eager buffer of the same process, 64 times the output's size, on
    many draws: found for none (main before RUN_FALSE: the int8 of 4 values for 1-3 of 120 draws, by the table
    check; 70% zeros for 13 of 100; bools for 5 of 40 by windows of 32; runs for every draw; bf16 normal values for
    every draw before the copy check took its chance from the values' neighbours)."""
    assert _found_by_chance(draw, dtype, rows, cols, seeds) == []


@pytest.mark.parametrize(
    ("draw", "dtype"),
    [(_uniform(4), torch.int8), (_uniform(2), torch.bool), (_skewed(0.3), torch.int8), (_in_runs, torch.bool),
     (_normal, torch.bfloat16)],
    ids=["int8 of 4 values", "bool", "int8 70% zeros", "bool in runs", "bf16 normal"],
)  # fmt: skip
def test_an_output_of_few_values_copied_from_an_eager_buffer_64_times_its_size_is_a_copy(
    audit: Audit, draw: Callable[[int, torch.Generator], torch.Tensor], dtype: torch.dtype
) -> None:
    """The same buffer, the output copied from a part of it: the windows long enough not to match by chance (32 of
    4 values, 64 of a bool or of 70% zeros, 128 of runs) still find it."""
    pool = audit.eager("aten._to_copy.default", (draw(64 * N, torch.Generator().manual_seed(0)),), {"dtype": dtype})
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": dtype})
    audit.launch(lambda o, p: o.copy_(p[1000 : 1000 + N].reshape(ROWS, N // ROWS)), out, pool)
    assert audit.outside_share(out) == 1.0


# Copies in any order (``COPY_ELEMENTS``): output values found among the eager-made arguments' elements, pooled, more
# often than their neighbouring bit patterns are (the chance). Each "passed before" case was judged 0% eager by the
# windowed check and the 95% check alone (run against this branch with ``found_as_elements`` not called).


def _shuffled(values: torch.Tensor, seed: int) -> torch.Tensor:
    flat = values.reshape(-1)
    return flat[torch.randperm(flat.numel(), generator=torch.Generator().manual_seed(seed))]


def test_an_answer_shuffled_element_by_element_in_two_halves_is_not_the_dsls(audit: Audit) -> None:
    """Passed before: each half holds half of the values, and no two neighbours of the output are neighbours in it."""
    answer = _answer()
    order = torch.randperm(N, generator=torch.Generator().manual_seed(3))
    held = [audit.eager("aten.mul.Tensor", (answer.reshape(-1)[part], 1.0)) for part in order.split(N // 2)]
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})

    def gather(o: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
        o.reshape(-1)[order] = torch.cat([a, b])

    audit.launch(gather, out, *held)
    assert audit.outside_share(out) == 1.0


def test_a_shuffled_third_of_the_answer_takes_only_those_positions(audit: Audit) -> None:
    """Passed before: a third of the answer shuffled into an argument; the kernel computes the rest itself."""
    answer = _answer().reshape(-1)
    third = N // 3
    held = audit.eager("aten.mul.Tensor", (answer[:third].flip(0)[torch.randperm(third)].contiguous(), 1.0))
    out = audit.eager("aten.empty.memory_format", ([N],), {"dtype": torch.float32})

    def kernel(o: torch.Tensor, h: torch.Tensor) -> None:
        o[:third] = answer[:third]  # as the shuffle undone
        o[third:] = answer[third:] * 1.0

    audit.launch(kernel, out, held)
    assert audit.outside_share(out) == pytest.approx(third / N)


def test_a_bfloat16_answer_shuffled_whole_in_two_arguments_is_not_the_dsls(audit: Audit) -> None:
    """Passed before. bf16 values repeat: the answer's values are found with their multiplicity."""
    answer = _answer().to(torch.bfloat16)
    shuffled = _shuffled(answer, 4)
    held = [audit.eager("aten.mul.Tensor", (part, 1)) for part in shuffled.split(N // 2)]
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.bfloat16})
    audit.launch(lambda o, a, b: o.copy_(answer), out, *held)
    assert audit.outside_share(out) == 1.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_kernels_own_answer_beside_an_eager_tensor_of_its_distribution_is_not_a_copy(
    audit: Audit, dtype: torch.dtype
) -> None:
    """An eager intermediate of the output's distribution, 4 times its size, holds many of a bf16 output's values (and
    their neighbours as often: chance); the output's relu zeros, half of it, are in an eager zero-filled buffer (a
    value that common says nothing)."""
    pool = audit.eager("aten._to_copy.default", (torch.randn(4 * N),), {"dtype": dtype})
    zeros = audit.eager("aten.zeros.default", ([N],), {"dtype": dtype})
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": dtype})
    values = torch.randn(ROWS, N // ROWS).relu().to(dtype)
    audit.launch(lambda o, p, z: o.copy_(values), out, pool, zeros)
    assert audit.outside_share(out) == 0.0


@pytest.mark.parametrize("seed", range(16))
def test_a_bf16_output_beside_float32_states_256_times_its_size_is_not_a_copy(seed: int) -> None:
    """Red team rt43 F1 (p69: eager fp32 recurrence states, 256 times the size of the bf16 readout a kernel made from
    them): rounded to bf16 the states hold all but a fraction of an element of the output's values and of their
    neighbours alike, and (share - chance) / (1 - chance) read 1.0 on that fraction: the readout was "held" (here for
    2 of these 16 draws before). Its misses are as few as chance leaves, which is no evidence."""
    drawn = torch.Generator().manual_seed(seed)
    rows, cols = 32, 64
    positions = torch.randperm(rows * cols, generator=drawn)[: _provenance.SAMPLES].sort()[0]
    with _opened(positions, rows * cols) as audit:
        states = audit.eager("aten.mul.Tensor", (torch.randn(256 * rows * cols, generator=drawn), 1.0))
        out = audit.eager("aten.empty.memory_format", ([rows, cols],), {"dtype": torch.bfloat16})
        values = torch.randn(rows, cols, generator=drawn).to(torch.bfloat16)
        audit.launch(lambda o, s: o.copy_(values), out, states)
        audit.registry.protect(_provenance.report_result, _send=audit.send)([out])
        assert not [r for r in audit.control.report([positions.numel()])["records"] if r[0] == "contains"]


def test_an_answer_shuffled_into_a_buffer_of_its_distribution_four_times_its_size_is_a_copy(audit: Audit) -> None:
    """The buffer holds the output's neighbours too (chance about 0.8), but every one of the output's values, which
    chance would leave a fifth of unheld: on 256 elements that is no fluke (the shuffle keeps no window)."""
    answer = _answer()
    buffer = torch.cat([answer.reshape(-1), torch.randn(3 * N) * answer.std()])
    held = audit.eager("aten.mul.Tensor", (_shuffled(buffer, 5).to(torch.bfloat16), 1))
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.bfloat16})
    audit.launch(lambda o, h: o.copy_(answer), out, held)
    assert audit.outside_share(out) == 1.0


def test_an_answer_with_its_rows_reversed_in_a_padded_argument_takes_those_positions(audit: Audit) -> None:
    """Passed before (windows were read forwards only): 14 of 16 columns in a padded buffer, each row last element
    first; the kernel computes the last 2 columns itself."""
    answer = _answer().to(torch.bfloat16)
    held = audit.eager("aten.zeros.default", ([ROWS + 1, N // ROWS],), {"dtype": torch.bfloat16})
    audit.eager("aten.copy_.default", (held[1:, 2:], audit.eager("aten.mul.Tensor", (answer[:, :14].flip(1), 1))))
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.bfloat16})
    audit.launch(lambda o, h: (o[:, :14].copy_(h[1:, 2:].flip(1)), o[:, 14:].copy_(answer[:, 14:] * 1)), out, held)
    # the order-free check finds these 256 sparse values too, and a few of the kernel's own by their values
    assert audit.outside_share(out) == pytest.approx(14 / 16, abs=0.05)


def _fp8_codes_in_fill_table(fill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An fp8 answer's codes (a quantised row of N values), and where each lies in a table of ``fill`` codes three
    times its size (positions i·K mod 3N, K odd: no run of the answer survives)."""
    answer = (torch.randn(N) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
    return answer, (torch.arange(N) * 1000003) % (3 * N)


@pytest.mark.parametrize("fill", [0x00, 0x38], ids=["zeros", "ones"])
def test_fp8_codes_parked_in_a_table_of_one_fill_value_are_a_copy(audit: Audit, fill: int) -> None:
    """rt9a's F5: the codes of an eager fp8 answer scattered into a table of one fill value three times the output's
    size, un-scattered by the DSL; the table less its fill's excess copies holds the output's codes with their
    multiplicity (passed before: a one-byte output's table more than twice its size was read only by runs)."""
    answer, places = _fp8_codes_in_fill_table(fill)
    table = audit.eager("aten.full.default", ([3 * N], fill), {"dtype": torch.uint8})
    table = audit.eager("aten.index_put.default", (table, [places], answer.view(torch.uint8)))
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float8_e4m3fn})
    audit.launch(lambda tab, o: o.view(torch.uint8).view(-1).copy_(tab[places]), table, out)
    assert audit.outside_share(out) == 1.0


def test_fp8_codes_next_to_a_table_of_fill_holding_other_codes_are_the_dsl_s(audit: Audit) -> None:
    """The same table holding another quantised row: less its fill it is of the output's size and distribution,
    and holds the output's codes only by chance (no copy)."""
    _, places = _fp8_codes_in_fill_table(0)
    other = (torch.randn(N) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
    table = audit.eager("aten.zeros.default", ([3 * N],), {"dtype": torch.uint8})
    table = audit.eager("aten.index_put.default", (table, [places], other.view(torch.uint8)))
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float8_e4m3fn})
    mine = (torch.randn(N) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
    audit.launch(lambda tab, o: o.view(torch.uint8).view(-1).copy_(mine.view(torch.uint8)), table, out)
    assert audit.outside_share(out) == 0.0


def _report_inputs(audit: Audit, inputs: list[torch.Tensor], inplace: tuple[int, ...] = ()) -> None:
    audit.registry.protect(_provenance.report_inputs, _send=audit.send)(inputs, inplace)
    audit.recorded(inputs, lift=False)  # the harness's


def _divide_by_3(e: torch.Tensor, o: torch.Tensor) -> None:
    o.copy_((e / 3).view(o.shape))


@pytest.mark.parametrize("where", ["chunks", "last_partial_chunk"])
def test_an_answer_parked_in_an_input_kept_as_digests_and_restored_is_erased(audit: Audit, where: str) -> None:
    """``adversarial/decode_parked_in_input_bytes.py`` on an input kept as one digest per ``INPUT_CHUNK`` bytes (not a
    copy, since session 9): an encoded answer parked in its bytes unseen, decoded by a launch, the input restored.
    The changed chunks (or the exact bytes of the last partial chunk) are no recorded writer's: erased before the
    launch reads them (until 2026-12-03 they were judged eager-made, and the decode found the answer: >= 95%)."""
    weight = torch.randn(4 * _provenance.INPUT_CHUNK + 100)  # 16 chunks of 4 KiB and 400 bytes
    _report_inputs(audit, [weight])
    saved = weight.clone()
    parked = weight[:N] if where == "chunks" else weight[-N:]
    parked.copy_(_answer().reshape(-1) * 3)  # unseen
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    audit.launch(_divide_by_3, parked, out)
    weight.copy_(saved)  # unseen
    assert bool(out.isnan().all())


def test_an_in_place_input_a_launch_updates_keeps_its_other_bytes_as_the_input_s(audit: Audit) -> None:
    """An in-place cache keeps a copy, compared byte by byte: a launch writing 4 slots leaves the rest of their chunk
    the input's, so a later launch reading rows beside them copies input values, no eager answer (judged by chunks,
    the chunk's other 1020 elements would be eager-made: a copy)."""
    cache = torch.randn(4 * _provenance.INPUT_CHUNK)
    _report_inputs(audit, [cache], (0,))
    audit.launch(lambda c: c[:4].copy_(torch.randn(4)), cache)
    out = audit.eager("aten.empty.memory_format", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    audit.launch(lambda c, o: o.copy_(c[4 : 4 + N].view(ROWS, -1)), cache, out)
    assert audit.outside_share(out) == 0.0


#: Accumulating scatters of ``rows`` (int64 row numbers) of ``source`` into ``out``, in place, as eager code calls them.
SCATTERS: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[str, tuple[Any, ...]]]] = {
    "index_add_": lambda out, rows, source: ("aten.index_add_.default", (out, 0, rows, source)),
    "scatter_add_": lambda out, rows, source: (
        "aten.scatter_add_.default", (out, 0, rows[:, None].expand(source.shape).contiguous(), source)
    ),
    "index_put_ accumulating": lambda out, rows, source: ("aten.index_put_.default", (out, [rows], source, True)),
    "scatter_reduce_ sum": lambda out, rows, source: (
        "aten.scatter_reduce_.two", (out, 0, rows[:, None].expand(source.shape).contiguous(), source, "sum")
    ),
}  # fmt: skip


def _dsl_rows(audit: Audit, count: int) -> torch.Tensor:
    """``count`` rows of the output's width a launch computed."""
    rows = audit.eager("aten.empty.memory_format", ([count, N // ROWS],), {"dtype": torch.float32})
    values = torch.randn(count, N // ROWS)
    audit.launch(lambda t: t.copy_(values), rows)
    return rows


def _scatter(audit: Audit, how: str, out: torch.Tensor, rows: torch.Tensor, source: torch.Tensor) -> Any:
    name, args = SCATTERS[how](out, rows, source)
    return audit.eager(name, args)


@pytest.mark.parametrize("how", sorted(SCATTERS))
def test_dsl_rows_scatter_added_into_zeros_are_the_dsls(audit: Audit, how: str) -> None:
    """A MoE's combine (red team rt13 FP1): two experts' DSL rows added into eager zeros, overlapping on half the rows
    (the second adds into the first's): every element is zeros plus DSL rows. Before: 100% existed outside the DSL."""
    out = audit.eager("aten.zeros.default", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    order = torch.randperm(ROWS)
    _scatter(audit, how, out, order[: 3 * ROWS // 4], _dsl_rows(audit, 3 * ROWS // 4))
    _scatter(audit, how, out, order[ROWS // 4 :], _dsl_rows(audit, 3 * ROWS // 4))
    assert audit.outside_share(out) == 0.0


def test_dsl_rows_scatter_added_out_of_place_are_the_dsls(audit: Audit) -> None:
    """``index_add`` out of place: the result's rows are the zeros' plus the DSL rows (before: all outside the DSL)."""
    zeros = audit.eager("aten.zeros.default", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    out = audit.eager("aten.index_add.default", (zeros, 0, torch.randperm(ROWS), _dsl_rows(audit, ROWS)))
    assert audit.outside_share(out) == 0.0


@pytest.mark.parametrize("how", sorted(SCATTERS))
def test_eager_rows_scatter_added_are_not_the_dsls(audit: Audit, how: str) -> None:
    """Rows eager code computed, added into zeros (all of them) or into the DSL's rows (on half of them): wherever an
    eager row lands, the element is eager."""
    out = audit.eager("aten.zeros.default", ([ROWS, N // ROWS],), {"dtype": torch.float32})
    order = torch.randperm(ROWS)
    _scatter(audit, how, out, order[: ROWS // 2], _dsl_rows(audit, ROWS // 2))
    eager = audit.eager("aten.mul.Tensor", (torch.randn(ROWS, N // ROWS), 1.0))
    _scatter(audit, how, out, order, eager)
    assert audit.outside_share(out) == 1.0


def test_dsl_rows_added_into_an_eager_answer_are_not_the_dsls(audit: Audit) -> None:
    """An eager answer as the destination (no constant fill): the DSL rows added into it do not make it the DSL's."""
    out = audit.eager("aten.mul.Tensor", (_answer(), 1.0))
    audit.eager("aten.index_add_.default", (out, 0, torch.randperm(ROWS), _dsl_rows(audit, ROWS)))
    assert audit.outside_share(out) == 1.0
