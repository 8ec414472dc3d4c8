"""The integers a launch's tensor arguments carry in their layouts cross from Python as by-value arguments do.

A kernel binds a tensor argument's sizes, strides and data-pointer offset to variables as it binds a number given
by value: the red team's rt10 F3 passed 160 answer values of p26 as the strides of one-element views
(``zeros(2).as_strided((1,), (v + 1,))``), counted nowhere. The vault now counts, per launch of a correctness
draw, each layout integer neither the argument's own sizes nor the problem's imply (``_provenance.layout_values``) as
one value given by value (``_eagerwork.LAUNCH_SCALARS``, 64 bits each). Each case drives the vault
directly (a Python "kernel" behind a counted gate, as in ``test_provenance_bytes``); the channels counted here
were counted as nothing before (0 values: checked against main 5082941, see the branch's report).
"""

from __future__ import annotations

import _thread
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from mkbsim.verifier import VerifierSession, _control, _coverage, _eagerwork, _provenance
from mkbsim.verifier._provenance import gate, page_layout, provenance_lib, provenance_vault
from mkbsim.verifier._vault import Registry

ADVERSARIAL = Path(__file__).with_name("adversarial")
ROWS, COLS = 16, 24  # the problem's input: a (16, 24) matrix; its output: 16 elements
N = ROWS


class Draw:
    """One correctness draw of a problem whose input is ``x`` (ROWS, COLS), a vault watching it."""

    def __init__(self) -> None:
        self.control = _control.ControlPage()
        self.registry = Registry()
        lib = provenance_lib(torch.device("cpu"))
        layout = page_layout()
        self.send = self.registry.open(provenance_vault, self.control.buf, lib, layout, [torch.arange(N)], [N], {})
        self.control.begin_call(suppress=False, audit=True)
        self.x = torch.randn(ROWS, COLS)
        self.registry.protect(_provenance.report_inputs, _send=self.send)((self.x,))

    def launch(self, *args: Any) -> None:
        kernel = _kernel
        self.send((0, kernel, "launch"))
        # the first argument stands for the TVM function a launch is a call of (``launch_signature``)
        self.registry.protect(gate, _send=self.send, _original=kernel, _count=True, _serial=_thread.RLock())(
            kernel, *args
        )

    def values_given(self) -> int:
        """The values the draw's launches took from Python (by value or in their layouts)."""
        self.registry.protect(_provenance.report_result, _send=self.send)([torch.zeros(N)])
        records = self.control.report([N])["records"]
        ops = next(r[1] for r in records if r[0] == "eager_ops")
        return sum(outs[0][0] * count for (name, _, outs), count in ops if name == _eagerwork.LAUNCH_SCALARS)


def _kernel(*args: Any) -> None:
    """Native code's stand-in: reads nothing, writes nothing."""


@pytest.fixture
def draw() -> Iterator[Draw]:
    made = Draw()
    yield made
    made.control.close()


HONEST: dict[str, Callable[[torch.Tensor], tuple[Any, ...]]] = {
    "contiguous operands": lambda x: (x, torch.empty(N)),
    "a transposed operand": lambda x: (x.t(),),
    "a row broadcast (stride 0)": lambda x: (x[0].expand(ROWS, COLS),),
    "the first column as a one-element-wide view": lambda x: (x[:, :1],),
    "the second row (an offset of the problem's row length)": lambda x: (x[1],),
    "a reshape into the problem's sizes": lambda x: (x.reshape(-1), x.view(ROWS * COLS, 1)),
}


@pytest.mark.parametrize("case", sorted(HONEST))
def test_views_of_the_problem_s_tensors_carry_no_value(draw: Draw, case: str) -> None:
    """Slices, transposes, broadcasts and reshapes of a problem input: every size, stride and offset one of the
    problem's (or compact): nothing counted."""
    draw.launch(*HONEST[case](draw.x))
    assert draw.values_given() == 0


def test_a_slice_at_the_plan_s_own_position_and_length_counts_as_the_arguments_that_would_say_them(
    draw: Draw,
) -> None:
    """Columns 8 to 16: neither the offset (8) nor the length (8) is one of the problem's sizes; a kernel taking the
    whole matrix would take them by value, and they count the same (an honest chunked plan pays 64 bits a
    slice per launch: ``honest/many_small_launches.py``)."""
    draw.launch(draw.x[:, 8:16])
    assert draw.values_given() == 2


def test_answer_values_as_strides_of_one_element_views_are_values_given(draw: Draw) -> None:
    """rt10 F3 (h3): eight one-element int8 views per launch, each value + 1 as its stride (no operator, no
    lift, zeros as data); the output position in the output view's offset. Each stride is a value, and each
    offset that is none of the problem's sizes."""
    base = torch.zeros(2, dtype=torch.int8)
    out = torch.empty(64, dtype=torch.int64)
    values = [1000 + 37 * k for k in range(16)]
    for j in range(0, 16, 8):
        draw.launch(*(base.as_strided((1,), (v + 1,)) for v in values[j : j + 8]), out[40 + j : 48 + j])
    # the strides; the output views' offsets (40, 48) and length (8), none of the problem's (0, 1, 16, 24, 384)
    assert draw.values_given() == 16 + 2 * 2


def test_answer_values_as_sizes_are_values_given(draw: Draw) -> None:
    """A value as a size: one element broadcast to ``v`` (stride 0, no memory), the kernel binding ``n``."""
    one = torch.zeros(1, dtype=torch.int8)
    for v in (1000, 1001, 1002):
        draw.launch(one.expand(v))
    assert draw.values_given() == 3


def test_answer_values_as_offsets_are_values_given(draw: Draw) -> None:
    """A value as the offset of a one-element view of a larger buffer (``buf[v:v+1]``: a kernel taking the
    buffer's start too reads ``v`` as the difference of the two pointers)."""
    buf = torch.zeros(4096, dtype=torch.int8)
    for v in (1000, 1001, 1002):
        draw.launch(buf[:1], buf[v : v + 1])
    assert draw.values_given() == 3


def test_values_in_dimensions_past_the_problem_s_rank_are_values_given(draw: Draw) -> None:
    """Sizes and strides from the problem's own (free one by one) stacked in many one-element dimensions: each
    dimension past the problem's rank and two carries a value."""
    one = torch.zeros(1, dtype=torch.int8)
    draw.launch(one.as_strided((1,) * 10, (ROWS,) * 10))
    assert draw.values_given() == 10 - (2 + 2)


def test_a_launch_s_signature_includes_its_arguments_strides(draw: Draw) -> None:
    """Two launches of one kernel on views of one shape and different strides are two signatures: the evidence
    calls (fresh inputs) must launch the layouts a draw launched, so strides drawn from the data are seen there
    too (``_coverage.kernels_check``); before, both were one signature."""
    base = torch.zeros(128, dtype=torch.int8)
    for stride in (3, 5):
        draw.launch(base.as_strided((ROWS,), (stride,)))
    draw.registry.protect(_provenance.report_end, _send=draw.send)()
    assert len(draw.control.report()["signatures"]) == 2


def _kinds_listed(draw: Draw, *launches: tuple[Any, ...]) -> int:
    """How many launch kinds the draw lists after ``launches`` (each a tuple of arguments of one kernel)."""
    for args in launches:
        draw.launch(*args)
    draw.registry.protect(_provenance.report_end, _send=draw.send)()
    return len(draw.control.report()["signatures"])


def test_launches_sized_by_the_data_are_one_kind(draw: Draw) -> None:
    """One kernel launched over 3, then 5 of the input's rows (a size the data decides, as an expert's routed rows:
    red team rt13 FP2) is one kind (``_launchkind``): the evidence calls need not repeat a draw's counts. Before,
    two signatures, which most timed calls missed."""
    assert _kinds_listed(draw, (draw.x[:3].clone(),), (draw.x[:5].clone(),)) == 1


def test_launches_over_the_problem_s_sizes_and_over_others_are_two_kinds(draw: Draw) -> None:
    """A size the problem fixes stays in the kind: the kernel over all the input's rows and over one row (a token
    slice, ``audit_aware_sliced_launch``) are two kinds, and so are two widths the problem fixes."""
    assert _kinds_listed(draw, (draw.x,), (draw.x[:1],)) == 2
    assert _kinds_listed(draw, (draw.x.reshape(-1),), (draw.x[0],)) == 4  # two more, in the same call


@pytest.mark.parametrize("case", ["answer_in_view_strides_p26", "answer_in_view_sizes_p26"])
def test_answers_in_layouts_cross_from_python_whatever_the_signatures(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """The adversarial cases with the kernels check off (sizes were in the signature on main already, which the
    sizes case fails there, and strides are now): the layout values alone reject them, 65% of the outputs' elements
    crossing in. On main 5082941 so, 6.7% in (the gather's index only): the strides case passed, the sizes case
    failed the launch-footprint check only."""
    monkeypatch.setattr(_coverage, "kernels_check", lambda audited, timed: ({}, None))
    report = cpu_session.verify(ADVERSARIAL / f"{case}.py", "p26", "tirx")
    assert report.failure == "decorative_dsl", report.feedback
    assert report.details["eager_work"]["python"]["in"] >= _eagerwork.PYTHON_SHARE, report.details["eager_work"]
