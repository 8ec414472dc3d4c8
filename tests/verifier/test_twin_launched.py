"""The twin draw against a kept evidence call (verifier README, "The twin draw"), the vault driven directly as in
``test_provenance_bytes.py``: what an earlier launch of the draw changed is the kernel's result, a function of its
arguments (compared before it ran), and another order of the same work there is no other work. On the H100 (session 42)
the twin draw failed three honest multi-kernel plans (p44 TIRx, p47 and p48 CuTe DSL), whose routing kernel hands each
routed token a slot by atomics: another order on every run, read by the next launch. Eager code writing over those
bytes, on the draw or on the evidence call alone (red team rt60 F0: a switch and an encoded answer written over a
launch's workspace on the timed calls), makes them compared again."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from mkbsim.verifier import _control, _provenance
from tests.verifier.test_provenance_bytes import Audit, N, _opened

Eager = Callable[[Audit, torch.Tensor, int], None]
#: the vault driven in-process: about a second a test, and the first one's imports (5 s under load) kept in the
#: ordinary run all the same (tests/conftest.py)
pytestmark = pytest.mark.ordinary


def _twin_record(rotations: tuple[int, int], between: Eager | None = None) -> list[int]:
    """A kept evidence call, then its twin draw, each on the same inputs: a routing kernel hands out the slots in an
    order rotated by ``rotations`` (the evidence call's, the draw's), the next kernel reads them; ``between`` (eager
    code, given the call's number) runs between the two launches. The twin draw's record: launches kept, compared,
    missed, unmatched, bytes differing, bytes compared, ..."""
    x = torch.randn(N)
    rotation = [0]

    # (the gate names a launch's kernel by its first argument, a TIRx module's function: here the kernel itself)
    def route(_: object, s: torch.Tensor) -> None:
        s.copy_(torch.arange(N).roll(rotation[0]))

    def combine(_: object, values: torch.Tensor, s: torch.Tensor, o: torch.Tensor) -> None:
        o[s] = values[s] * 2.0  # the same result whatever the slots' order

    with _opened(torch.arange(N), N) as audit:
        for number, (code, rotation[0]) in enumerate(
            ((_control.KEPT_EVIDENCE, rotations[0]), (_control.TWIN_DRAW, rotations[1]))
        ):
            audit.control.begin_call(suppress=False, audit=code == _control.TWIN_DRAW, evidence=True, twin=code)
            given = x.clone()  # the harness's inputs, reported before run() as the harness does
            audit.registry.protect(_provenance.report_inputs, _send=audit.send)([given], ())
            slots = audit.eager("aten.empty.memory_format", ([N],), {"dtype": torch.int64})
            out = audit.eager("aten.empty.memory_format", ([N],), {"dtype": torch.float32})
            audit.launch(route, route, slots)
            if between is not None:
                between(audit, slots, number)
            audit.launch(combine, combine, given, slots, out)
        audit.registry.protect(_provenance.report_result, _send=audit.send)([out])
        records = audit.control.report([N])["records"]
    return next(r for r in records if r[0] == "twin")[1:]


def test_slots_another_order_of_the_same_work_handed_out_are_not_compared() -> None:
    kept, compared, missed, unmatched, differing, bytes_compared, *_ = _twin_record((0, 7))
    assert (kept, compared, missed, unmatched) == (2, 2, 0, 0)
    assert differing == 0 and bytes_compared > 0


def test_the_same_slots_are_compared_alike() -> None:
    assert _twin_record((3, 3))[4] == 0


def test_eager_code_writing_over_what_a_launch_changed_is_compared_again() -> None:
    """A switch eager code writes on the evidence call into the routing kernel's bytes (a slot another than the
    draw's): the next launch's arguments differ."""

    def switch(audit: Audit, slots: torch.Tensor, number: int) -> None:
        audit.eager("aten.fill_.Scalar", (slots[:1], number))

    _, compared, _, _, differing, *_ = _twin_record((0, 0), switch)
    assert compared == 2 and differing > 0


def test_eager_code_writing_over_what_a_launch_changed_on_the_evidence_call_alone_is_compared() -> None:
    """Red team rt60 F0: on the timed calls only (the evidence call here), eager code writes a switch over the routing
    kernel's bytes; the draw's are the kernel's."""

    def switch(audit: Audit, slots: torch.Tensor, number: int) -> None:
        if number == 0:
            audit.eager("aten.fill_.Scalar", (slots[:4], 99))

    _, compared, _, _, differing, *_ = _twin_record((0, 5), switch)
    assert compared == 2 and differing > 0
