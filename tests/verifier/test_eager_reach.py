"""Eager work priced by what it reaches (``_provenance.priced_trail``; verifier README, "Eager work"): the vault driven
directly as in ``test_provenance_bytes.py``. An input check whose result leaves only for Python (red team rt58 FP0:
``if not torch.isfinite(x).all(): raise``, 125% of p36's reference pointwise work, the honest kernel
``decorative_dsl``) or for nothing is no work on the answer; an answer a launch reads, through an alias or not, is
priced whatever else reads it, and so, where kernels take raw pointers (cuda: ``raw_pointers``), is one the submission
holds while a kernel runs."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import pytest
import torch

from mkbsim.verifier import _eagerwork, _provenance
from tests.verifier import test_provenance_bytes
from tests.verifier.test_provenance_bytes import Audit, N, _opened

Body = Callable[[Audit, torch.Tensor, torch.Tensor], None]


def _priced(body: Body, x: torch.Tensor | None = None) -> set[str]:
    """The operators priced on an audited call of problem input ``x`` whose ``body`` (given the vault, ``x`` and the
    output) makes eager work and a launch that writes the output."""
    x = torch.randn(N) if x is None else x
    with _opened(torch.arange(N), N) as audit:
        audit.registry.protect(_provenance.report_inputs, _send=audit.send)([x], ())
        out = audit.eager("aten.empty.memory_format", ([N],), {"dtype": torch.float32})
        body(audit, x, out)
        audit.registry.protect(_provenance.report_result, _send=audit.send)([out])
        records = audit.control.report([N])["records"]
    found = next(r for r in records if r[0] == "eager_ops")[1]
    return {key[0].split("+")[0] for key, _ in found}


@pytest.fixture
def raw_pointers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The vault as on cuda, where a kernel reads memory through a raw pointer (CuTe's ``make_ptr``)."""

    def lib(device: torch.device) -> object:
        found = _provenance.provenance_lib(device)
        found.raw_pointers = True
        return found

    monkeypatch.setattr(test_provenance_bytes, "provenance_lib", lib)


def _kernel(source: torch.Tensor | None = None) -> Callable[[object, torch.Tensor], None]:
    """A kernel writing the output: from ``source`` (read through no argument: a raw pointer), else its own values."""

    def kernel(_: object, o: torch.Tensor) -> None:
        o.copy_(source if source is not None else torch.ones(N))

    return kernel


def _checked(audit: Audit, x: torch.Tensor) -> torch.Tensor:
    """``torch.isfinite(x).all()`` as its operators (NaN is not itself), to one bool in Python."""
    ok = audit.eager("aten.all.default", (audit.eager("aten.eq.Tensor", (x, x)),))
    audit.eager("aten._local_scalar_dense.default", (ok,))
    return ok


def test_an_input_check_that_leaves_for_python_is_not_priced() -> None:
    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        _checked(audit, x)
        audit.launch(_kernel(), None, out)

    priced = _priced(body)
    assert "aten._local_scalar_dense.default" in priced  # (its crossing is)
    assert not priced & {"aten.eq.Tensor", "aten.all.default"}


@pytest.mark.parametrize("raw", [False, True])
def test_an_input_check_held_while_the_kernel_runs_is_priced_where_kernels_take_raw_pointers(
    raw: bool, request: pytest.FixtureRequest
) -> None:
    """``ok = torch.isfinite(x).all(); if not ok: raise`` keeps ``ok`` while the kernel runs (red team rt60 FP2)."""
    if raw:
        request.getfixturevalue("raw_pointers")

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        ok = _checked(audit, x)
        audit.launch(_kernel(), None, out)
        del ok  # (run() returns)

    assert ({"aten.eq.Tensor", "aten.all.default"} <= _priced(body)) == raw


def test_an_unread_result_dropped_before_the_launch_is_not_priced() -> None:
    """A disabled debug log's statistic, ``len(torch.nonzero(...))`` (red team rt60 FP0, FP1)."""

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        audit.eager("aten.amax.default", (audit.eager("aten.abs.default", (x,)),))
        audit.launch(_kernel(), None, out)

    assert not _priced(body) & {"aten.abs.default", "aten.amax.default"}


def test_an_unread_result_held_when_the_call_ends_is_priced() -> None:
    """A cache for a later call."""
    cache: list[torch.Tensor] = []

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        cache.append(audit.eager("aten.mul.Tensor", (x, 2.0)))
        audit.launch(_kernel(), None, out)

    assert "aten.mul.Tensor" in _priced(body)


def test_an_answer_written_through_an_alias_of_a_kept_buffer_is_priced() -> None:
    """Red team rt60 F1: the answer's last operator writes through ``torch.from_dlpack(kept[OFF:])`` (a storage of its
    own at another address), one element is read to Python and the alias dropped; the kernel reads ``kept``."""
    kept = torch.zeros(2 * N)

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        audit.recorded(kept)
        alias = torch.from_dlpack(kept[N:])
        audit.eager("aten.mul.out", (x, 2.0), {"out": alias})
        audit.eager("aten._local_scalar_dense.default", (audit.eager("aten.select.int", (alias, 0, 0)),))
        del alias
        audit.launch(lambda _, k, o: o.copy_(k[N:]), None, kept, out)

    assert "aten.mul.out" in _priced(body)


def test_an_answer_read_by_a_launch_is_priced_whatever_else_reads_it() -> None:
    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        answer = audit.eager("aten.mul.Tensor", (x, 2.0))
        audit.eager("aten._local_scalar_dense.default", (audit.eager("aten.sum.default", (answer,)),))
        audit.launch(lambda _, a, o: o.copy_(a), None, answer, out)

    assert "aten.mul.Tensor" in _priced(body)


@pytest.mark.usefixtures("raw_pointers")
def test_an_answer_a_kernel_reads_through_a_raw_pointer_is_priced() -> None:
    """Read by no launch's argument, and by a crossing to Python: held while the kernel runs."""

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        answer = audit.eager("aten.mul.Tensor", (x, 2.0))
        audit.eager("aten._local_scalar_dense.default", (audit.eager("aten.sum.default", (answer,)),))
        audit.launch(_kernel(answer), None, out)

    priced = _priced(body)
    assert "aten.mul.Tensor" in priced and "aten.sum.default" not in priced  # (the check of it is no work)


def test_an_answer_dropped_before_a_kernel_reads_it_through_a_raw_pointer_is_erased() -> None:
    """Unpriced (dropped, its check sent to Python), and so erased before the next launch: the kernel copying it from
    its address (the vault's record keeps the storage from being freed) copies the erased bytes."""
    copied: list[torch.Tensor] = []
    x = torch.randn(N)

    def body(audit: Audit, given: torch.Tensor, out: torch.Tensor) -> None:
        answer = audit.eager("aten.mul.Tensor", (given, 2.0))
        audit.eager("aten._local_scalar_dense.default", (audit.eager("aten.sum.default", (answer,)),))
        address = answer.data_ptr()
        del answer

        def kernel(_: object, o: torch.Tensor) -> None:
            ctypes.memmove(o.data_ptr(), address, o.numel() * o.element_size())
            copied.append(o.clone())

        audit.launch(kernel, None, out)

    assert "aten.mul.Tensor" not in _priced(body, x)
    assert torch.isnan(copied[0]).all() and not torch.equal(copied[0], x * 2.0)


def test_an_answer_copied_into_the_output_eagerly_is_priced() -> None:
    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        audit.launch(_kernel(), None, out)
        answer = audit.eager("aten.mul.Tensor", (x, 2.0))
        audit.eager("aten.copy_.default", (out, answer))

    assert {"aten.mul.Tensor", "aten.copy_.default"} <= _priced(body)


def test_a_random_operator_reaches_every_operator_before_it() -> None:
    """Red team rt61 F0: ``Generator.set_state`` reads a tensor's bytes with no operator, and the next random operator
    writes them back (mt19937 words set so that ``randint`` wrote an eager result): a reached random operator's
    generator may hold anything made before it."""

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor, fill: str) -> None:
        audit.eager("aten.mul.Tensor", (x, 2.0))  # the state's words, handed to the generator unseen
        audit.eager(fill, (out,))
        audit.launch(lambda _, o: o.add_(1.0), None, out)

    assert "aten.mul.Tensor" in _priced(lambda a, x, o: body(a, x, o, "aten.random_.default"))
    assert "aten.mul.Tensor" not in _priced(lambda a, x, o: body(a, x, o, "aten.zero_.default"))


@pytest.mark.parametrize("given", ["default", "keyword", "position"])
def test_attention_without_dropout_reaches_only_what_it_reads(given: str) -> None:
    """SDPA is tagged random, but draws only where it drops: given ``dropout_p`` = 0 (or its default), it reaches what
    it reads and no earlier operator (rt62's note: an honest plan's eager attention priced everything before it)."""

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        audit.eager("aten.mul.Tensor", (x, 2.0))  # read by nothing after it
        q = audit.eager("aten.view.default", (x, [1, 1, 16, 16]))
        args, kwargs = {"default": ((q, q, q), {}), "keyword": ((q, q, q), {"dropout_p": 0.0}),
                        "position": ((q, q, q, 0.0), {})}[given]  # fmt: skip
        found = audit.eager("aten._scaled_dot_product_flash_attention_for_cpu.default", args, kwargs)
        audit.eager("aten.copy_.default", (out, audit.eager("aten.view.default", (found[0], [N]))))
        audit.launch(lambda _, o: o.add_(1.0), None, out)

    priced = _priced(body)
    assert "aten._scaled_dot_product_flash_attention_for_cpu.default" in priced
    assert "aten.mul.Tensor" not in priced


def test_a_random_operator_on_a_generator_of_its_own_reaches_every_operator_before_it() -> None:
    """One that draws from a generator it is given (whose state a tensor's bytes may have set) is priced as rt61's."""

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        audit.eager("aten.mul.Tensor", (x, 2.0))
        answer = audit.eager("aten.empty.memory_format", ([N],), {"dtype": torch.float32})
        audit.eager("aten.bernoulli_.float", (answer, 0.5), {"generator": torch.Generator().manual_seed(3)})
        audit.eager("aten.copy_.default", (out, answer))
        audit.launch(lambda _, o: o.add_(1.0), None, out)

    assert "aten.mul.Tensor" in _priced(body)


@pytest.mark.parametrize("how", ["nonzero", "mask", "uint8_mask", "packed"])
@pytest.mark.parametrize("counts", [1, 9])
def test_sizes_the_data_decides_are_values_out_to_python(counts: int, how: str) -> None:
    """A result whose size the data decides (``nonzero``) hands Python a value with no crossing (``len(...)``): each
    counts as 8 bytes out, and past ``CHECK_BYTES`` (64) in a call the operators behind them are reached (an answer read
    out so, a count per value, is data); one count is a check (rt60 FP0: ``len(torch.nonzero(...))``). A packed
    sequence's batch sizes too: ``_pack_padded_sequence`` reads its lengths in C++ (red team rt70); a uint8 mask's
    count as a boolean one's (rt72 F4)."""

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        scaled = audit.eager("aten.mul.Tensor", (x, 2.0))
        for k in range(counts):
            mask = audit.eager("aten.gt.Scalar", (scaled, k / 10))
            if how == "nonzero":
                audit.eager("aten.nonzero.default", (mask,))
            elif how == "mask":  # ``x[mask]``: the boolean index's count
                audit.eager("aten.index.Tensor", (x, [mask]))
            elif how == "uint8_mask":  # a uint8 index is a mask too (red team rt72 F4)
                as_bytes = audit.eager("aten._to_copy.default", (mask,), {"dtype": torch.uint8})
                audit.eager("aten.index.Tensor", (x, [as_bytes]))
            else:  # the lengths: a count of the mask, then at most 1, sorted by construction
                count = audit.eager("aten.sum.dim_IntList", (mask, [0], True))
                least = audit.eager("aten.clamp.default", (count, None, 1))
                lengths = audit.eager("aten.cat.default", ([count, least],))
                padded = audit.eager("aten.view.default", (x, [N, 1]))
                audit.eager("aten._pack_padded_sequence.default", (padded.expand(N, 2), lengths, False))
        audit.launch(lambda _, o: o.add_(1.0), None, out)

    assert ("aten.mul.Tensor" in _priced(body)) == (counts * 8 > _eagerwork.CHECK_BYTES)


@pytest.mark.parametrize("reads", [16, 17])
def test_single_values_read_from_one_storage_are_its_elements_not_checks(reads: int) -> None:
    """Red team rt67 FP0: a row's values read one ``item()`` at a time beside an input check made more than ``CHECKS``
    single values, the check's included, data, and the check's pass was priced. Single values read from one storage
    are that storage's elements (data past ``CHECK_BYTES``: its operators reached); the check's, the only one read
    from its storage, stays a check whatever else the call reads."""

    def body(audit: Audit, x: torch.Tensor, out: torch.Tensor) -> None:
        _checked(audit, x)
        scaled = audit.eager("aten.mul.Tensor", (x, 2.0))
        for k in range(reads):
            audit.eager("aten._local_scalar_dense.default", (audit.eager("aten.select.int", (scaled, 0, k)),))
        audit.launch(lambda _, o: o.add_(1.0), None, out)

    priced = _priced(body)
    assert "aten.eq.Tensor" not in priced and "aten.all.default" not in priced
    assert ("aten.mul.Tensor" in priced) == (reads * 4 > _eagerwork.CHECK_BYTES)  # (float32 values)


def test_a_view_at_offsets_python_gave_is_a_value_from_python_whatever_it_views() -> None:
    """Red teams rt65-rt67 brought whole eager answers back as one-element slices of a table whose values are their
    offsets, made at import; rt68-rt71 as one-byte slices of a problem input's own bytes, where it holds the byte
    wanted: each such view is marked (``_eagerwork.OFFSET``) and crosses a value in, whatever it views (a table kept
    from before the call, a problem input, what the call made); a split's pieces each (Python picks among them by list
    index); a copy at an offset (``narrow_copy``); not a view starting where what it views starts, nor one of the
    whole."""
    x = torch.randn(N)
    table = torch.arange(N, dtype=torch.float32)  # (at import: before the call)
    with _opened(torch.arange(N), N) as audit:
        audit.registry.protect(_provenance.report_inputs, _send=audit.send)([x], ())
        out = audit.eager("aten.empty.memory_format", ([N],), {"dtype": torch.float32})
        made = audit.eager("aten.mul.Tensor", (x, 2.0))
        pieces = [audit.eager("aten.slice.Tensor", (table, 0, v, v + 1)) for v in (3, 5)]
        whole = audit.eager("aten.slice.Tensor", (table, 0, 0, N))
        given = audit.eager("aten.slice.Tensor", (x, 0, 7, 8))
        own = audit.eager("aten.slice.Tensor", (made, 0, 9, 10))
        first = audit.eager("aten.slice.Tensor", (whole, 0, 0, 1))  # where what it views starts
        # a one-element view kept from before the call, strided anywhere in its storage (red team rt72 F0)
        strided = audit.eager("aten.as_strided.default", (table[:1], [1], [1], 6))
        split = audit.eager("aten.split.Tensor", (x, 4))
        copied = audit.eager("aten.narrow_copy.default", (x, 0, 11, 1))  # a copy: its offset is an argument
        joined = audit.eager("aten.cat.default", ([*pieces, given, own, first, split[2], copied, strided],))
        audit.launch(lambda _, o, j: o.add_(j.sum()), None, out, joined)
        audit.registry.protect(_provenance.report_result, _send=audit.send)([out])
        records = audit.control.report([N])["records"]
    found = next(r for r in records if r[0] == "eager_ops")[1]
    slices = {(key[0], key[1][0], key[2][0]): count for key, count in found if key[0].startswith("aten.slice")}
    assert slices[("aten.slice.Tensor" + _eagerwork.OFFSET, (N,), (1,))] == 4  # the table's two, the input's, made's
    assert slices[("aten.slice.Tensor", (N,), (1,))] == 1  # the one at its start
    assert slices[("aten.slice.Tensor", (N,), (N,))] == 1
    splits = [(key[0], len(key[2])) for key, _ in found if key[0].startswith("aten.split")]
    assert splits == [("aten.split.Tensor" + _eagerwork.OFFSET, N // 4)]
    assert [key[0] for key, _ in found if "narrow_copy" in key[0]] == ["aten.narrow_copy.default" + _eagerwork.OFFSET]
    assert [key[0] for key, _ in found if "as_strided" in key[0]] == ["aten.as_strided.default" + _eagerwork.OFFSET]
    assert _eagerwork.work_of(found).from_python >= 5 + N // 4


def test_a_run_of_views_at_a_constant_stride_counts_its_start_and_stride_only() -> None:
    """A loop over a kept buffer's rows (an honest p02 plan copying its pages one by one into staging kept across
    calls: 47% of its answer's bytes counted in) gives Python's start and stride, its first two pieces: the vault marks
    those, and every piece at an offset Python chose by its values (the run broken at each)."""
    x = torch.randn(N)
    kept = torch.zeros(N, 4)  # (at import, or an earlier call: before the call)
    with _opened(torch.arange(N), N) as audit:
        audit.registry.protect(_provenance.report_inputs, _send=audit.send)([x], ())
        out = audit.eager("aten.empty.memory_format", ([N],), {"dtype": torch.float32})
        rows = [audit.eager("aten.select.int", (kept, 0, k)) for k in range(8)]
        chosen = [audit.eager("aten.slice.Tensor", (kept, 0, v, v + 2)) for v in (9, 3, 14, 20, 21)]
        flat = [audit.eager("aten.view.default", (c, [-1])) for c in chosen]
        joined = audit.eager("aten.cat.default", ([*rows, *flat],))
        audit.launch(lambda _, o, j: o.add_(j.sum()), None, out, joined)
        audit.registry.protect(_provenance.report_result, _send=audit.send)([out])
        records = audit.control.report([N])["records"]
    found = next(r for r in records if r[0] == "eager_ops")[1]
    views = {(key[0], key[2][0]): count for key, count in found if key[0].startswith(("aten.select", "aten.slice"))}
    # its first row starts where the buffer does; its second gives the stride
    assert views[("aten.select.int" + _eagerwork.OFFSET, (4,))] == 1
    assert views[("aten.select.int", (4,))] == 7
    # 9, 3, 14, 20 break the run at each piece; 21 is 20's stride of 6 broken too
    assert views[("aten.slice.Tensor" + _eagerwork.OFFSET, (2, 4))] == 5
