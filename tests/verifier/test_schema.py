"""Whatever the worker's side writes (its answers on the channel, the regions and times of the control page),
the verifier judges it, never fails on it (DESIGN §5): an exception in the verifier's code is an uncounted
``infra_error`` that campaigns retry, so a submission able to cause one could veto any verdict it dislikes.

The property: every answer, malformed or not, goes through the same funnel as a real call (decoded from a
socket by ``WorkerHandle.wait``, the control page read by ``Verification.receive``) and then through the rules
a call's answer is judged by; the outcome is a ``Failure`` or a judged call, never an exception.
"""

from __future__ import annotations

import math
import pickle
import socket
import struct
import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mkbsim.verifier import _control, _coverage, _phases, _schema
from mkbsim.verifier._blocks import Block
from mkbsim.verifier._channel import Channel
from mkbsim.verifier._compare import build_refs
from mkbsim.verifier._judge import Failure, call_error, structure
from mkbsim.verifier._process import Exchange, WorkerHandle
from mkbsim.verifier._trusted import Trusted
from mkbsim.verifier._verification import Call, Draw, Verification

torch.set_num_threads(1)

SAMPLES = 4
OK_REPLY: dict[str, Any] = {
    "ok": True,
    "left_mode": False,
    "background": [],
    "audit_threads": 0,
    "modes": 0,
    "structure": {
        "container": "single",
        "items": [{"kind": "tensor", "dtype": "float32", "shape": [16], "device": "cpu", "layout": "strided"}],
    },
    "alias": [],
    "copied": True,
    "tampered": [],
    "timer_tampered": [],
}
ERROR_REPLY: dict[str, Any] = {
    "ok": False,
    "error": {"type": "builtins.ValueError", "message": "no", "frames": [[3, "run", "raise"]], "memory": False},
    "left_mode": False,
    "tampered": [],
    "timer_tampered": [],
}
GUARDS: dict[str, Any] = {"violations": [], "inline": []}
RECORDS: list[Any] = [
    ("candidate", "a tensor", 0, [1.0, 2.0, 3.0, 4.0]),
    ("contains", "a tensor", 0, [True, False, True, False]),
    ("result", "returned output", 0, [1.0, 2.0, 3.0, 4.0], True),
    ("produced", "returned output: ...", 0, [1, 0, 2, 1]),
    ("eager_ops", [(("aten.add.Tensor", ((1,), (1,)), ((1,),)), 1)]),
    ("fed_ops", []),
]

_junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=1 << 62, max_value=1 << 4000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` a field could be replaced or removed."""
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*at, k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found += _paths(v, (*at, i))
    return found


def _mutated(value: Any, path: tuple[Any, ...], how: str, junk: Any) -> Any:
    if not path:
        return junk
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        copy = dict(value)
        if not rest and how == "drop":
            del copy[head]
        else:
            copy[head] = _mutated(value[head], rest, how, junk)
        if how == "add" and not rest:
            copy["unexpected"] = junk
        return copy
    items = list(value)
    if not rest and how == "drop":
        del items[head]
    else:
        items[head] = _mutated(value[head], rest, how, junk)
    return type(value)(items) if isinstance(value, tuple) else items


@st.composite
def _fuzzed(draw: st.DrawFn, base: Any) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(_junk)  # something else altogether
    path = draw(st.sampled_from(_paths(base)))
    return _mutated(base, path, draw(st.sampled_from(["replace", "drop", "add"])), draw(_junk))


class _Worker(WorkerHandle):
    """The verifier's handle on a worker whose answers are written into a socket by the test."""

    def __init__(self, chan: Channel) -> None:
        self.chan, self.memory_bytes, self.pid, self.answer_key = chan, 0, -1, None  # the test writes unsigned
        self.clock = SimpleNamespace(cpu_ns=lambda: None)  # type: ignore[assignment]
        self.thread_clock = SimpleNamespace(cpu_ns=lambda: None)  # type: ignore[assignment]

    def send(self, msg: dict[str, Any], fds: list[int] | None = None) -> None:
        pass

    def answer(self, timeout: float, progress: Any = None) -> Exchange:
        return Exchange(self.wait(timeout), Trusted(1.0, 1.0, 0.0))

    def kill(self) -> None:
        pass

    def output_tail(self, n: int = 2000) -> str:
        return ""

    def strays(self) -> list[str]:
        return []  # no zygote: no process of its own


def _write_region(page: _control.ControlPage, region: tuple[int, int], blob: bytes) -> None:
    if not _control.write_region(page.buf, region, blob):
        struct.pack_into("<Q", page.buf, region[0], len(blob))  # a length beyond the region


def _judged(reply: Any, guards: Any, records: Any, times: dict[str, float], raw: bytes | None) -> Any:
    """One call's answer through the verifier, as ``_phases`` takes it: the outcome, a ``Failure`` or the call."""
    ours, theirs = socket.socketpair()
    page = _control.ControlPage()
    try:
        v = Verification(*[None] * 8)  # type: ignore[arg-type]
        v.session = SimpleNamespace(limits=SimpleNamespace(call_timeout_s=5.0))  # type: ignore[assignment]
        v.report = SimpleNamespace(forbidden=[], details={})  # type: ignore[assignment]
        v.worker, v.control, v.positions = _Worker(Channel(ours)), page, [torch.arange(SAMPLES)]
        block = Block(["draw"], lambda seed: [torch.ones(16)], lambda: 1, [((16,), torch.float32)],
                      torch.device("cpu"), staged=False, distinct=False)  # fmt: skip

        def worker_runs_the_block() -> None:  # what the vaults and the harness write for a block of one call
            base = _control.slot_offset(0)
            nonce = _control.get(page.buf, _control.NONCE, base)
            for field, value in ((_control.ACK, nonce), (_control.DSL_ACK, nonce), (_control.RECORDS_FLAG, nonce),
                                 (_control.SLOT_START_T, time.perf_counter())):  # fmt: skip
                _control.put(page.buf, (base + field[0], field[1]), value)
            for name, value in times.items():
                field = getattr(_control, name.upper())
                _control.put(page.buf, (base + field[0], field[1]), value)
            _write_region(page, _control.VIOLATIONS, _control.dumps(guards))
            _write_region(page, _control.RECORDS, raw if raw is not None else _control.dumps(records))
            for field, value in (
                (_control.BLOCK_NEXT, 1),
                (_control.BLOCK_CALLS, 0),
                (_control.END_T, time.perf_counter()),
            ):
                _control.put(page.buf, field, value)
            payload = pickle.dumps({"ok": True, "calls": [reply]}, protocol=pickle.HIGHEST_PROTOCOL)
            theirs.sendall(struct.pack("!Q", len(payload)) + payload)

        answers = v.call_block(block, ["in a call"], meanwhile=worker_runs_the_block)
        if isinstance(answers, Failure):
            return answers
        answer = answers[0]
        return _rules(answer)
    finally:
        page.close()
        ours.close()
        theirs.close()


def _rules(answer: Call) -> Failure | None:
    """The rules ``_phases`` applies to an answer taken as the call's (``_checked``, ``coverage``)."""
    reply, where = answer.reply, "in a call"
    if not reply.get("ok"):
        return call_error(reply, where, first=True)
    draw = Draw(1, [torch.ones(16)], [], reply, answer.page)
    cost = SimpleNamespace(total_flops=16.0, floor_flops=16.0)
    problem = SimpleNamespace(reference=lambda x: x * 2, input_cost=lambda axes, inputs: cost)
    v = SimpleNamespace(
        shape=SimpleNamespace(problem=problem, axes={}, inplace=[]), details={}, report=SimpleNamespace()
    )
    failure = (
        structure(reply, where, ["output 'y'"], [((16,), torch.float32)], "cpu", ["x"])
        or _phases._background(reply, where)
        or _phases._audited_threads([draw])
        or _phases._eager_work(v, [draw])  # type: ignore[arg-type]
    )
    if failure is not None:
        return failure
    records = answer.page["records"] or []
    t = torch.arange(16, dtype=torch.float32)
    refs = build_refs(["output 'y'"], [t], [t.double()], [torch.float32], 1.0)
    found = [_coverage.OutputCoverage("output 'y'", 16)]
    _coverage.apply_provenance(found, records, refs, [torch.ones(16, dtype=torch.bool)], [torch.arange(SAMPLES)], "")
    return None


_TIMES = {"call_ms": 0.5, "host_ms": 0.6, "pending_ms": 0.0, "dsl_ms": 0.4}


def test_the_harness_forms_are_judged_as_the_calls_they_are() -> None:
    assert _judged(OK_REPLY, GUARDS, RECORDS, _TIMES, None) is None
    assert _judged(ERROR_REPLY, GUARDS, RECORDS, _TIMES, None) == call_error(ERROR_REPLY, "in a call", first=True)
    forbidden = _judged(OK_REPLY, {"violations": ["line 3: os.system"], "inline": []}, RECORDS, _TIMES, None)
    assert forbidden.code == "forbidden_api"


@pytest.mark.parametrize(
    ("reply", "guards", "records", "times", "raw"),
    [
        ({"ok": False, "error": 5}, GUARDS, RECORDS, _TIMES, None),  # an error that is no dict
        ({**OK_REPLY, "tampered": 5}, GUARDS, RECORDS, _TIMES, None),  # a list that is an int
        ({**OK_REPLY, "alias": [[7, 0]]}, GUARDS, RECORDS, _TIMES, None),  # an output that does not exist
        ({**OK_REPLY, "audit_threads": 10**5000}, GUARDS, RECORDS, _TIMES, None),  # beyond int -> str
        (OK_REPLY, {"violations": 5}, RECORDS, _TIMES, None),  # the guards' region forged
        (OK_REPLY, GUARDS, [("candidate", "x", 0, [1.0])], _TIMES, None),  # fewer samples than positions
        (OK_REPLY, GUARDS, [("eager_ops", [(("aten.mm.default", ((4, 4),), ()), 1)])], _TIMES, None),
        (OK_REPLY, GUARDS, RECORDS, _TIMES, b"\x80\x05garbage"),  # a region that does not decode
        (OK_REPLY, GUARDS, RECORDS, {**_TIMES, "call_ms": math.nan}, None),  # a time that is no time
    ],
    ids=["error", "tampered", "alias", "huge", "guards", "samples", "operands", "garbage", "nan"],
)
def test_a_malformed_answer_is_the_submissions_tampering(
    reply: Any, guards: Any, records: Any, times: dict[str, float], raw: bytes | None
) -> None:
    found = _judged(reply, guards, records, times, raw)
    # an operator record short of operands is priced as the work it could be (eager-work rule): the submission's
    # failure too
    assert isinstance(found, Failure) and found.code in ("harness_tamper", "output_alias", "decorative_dsl"), found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reply=st.one_of(_fuzzed(OK_REPLY), _fuzzed(ERROR_REPLY)),
    guards=st.one_of(st.just(GUARDS), _fuzzed({"violations": ["v"], "inline": ["i"]})),
    records=st.one_of(st.just(RECORDS), _fuzzed(RECORDS)),
    times=st.fixed_dictionaries({k: st.floats() for k in _TIMES}),
)
def test_no_answer_makes_the_verifier_fail(reply: Any, guards: Any, records: Any, times: dict[str, float]) -> None:
    """Fuzzed fields (wrong types, missing and unknown keys, huge and non-finite numbers, nested junk): judged,
    never an exception (which ``Verification.run`` would report as ``infra_error``)."""
    found = _judged(reply, guards, records, times, None)
    assert found is None or isinstance(found, Failure)


def test_a_second_answer_nobody_asked_for_is_seen() -> None:
    ours, theirs = socket.socketpair()
    chan = Channel(ours)
    assert not chan.pending()
    theirs.sendall(b"x")
    assert chan.pending()
    theirs.close()
    ours.recv(1)
    assert not chan.pending()  # an end of file is the worker's exit, not a message
    chan.close()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("WORK_MS", math.nan),
        ("WORK_MS", -1.0),
        ("WORK_AFTER_MS", math.inf),
        ("share", math.nan),
        ("share", 1.5),
        ("copied", -0.5),
        ("copied", math.nan),
        ("carried", 2.0),
        ("carried", math.nan),
    ],
)
def test_a_work_record_of_another_form_is_malformed(field: str, value: float) -> None:
    """The gate's work record (``_provenance``, evidence calls and draws): a finite time, shares within [0, 1]."""
    page = _control.ControlPage()
    try:
        nonce = page.begin_call(suppress=False, audit=False, evidence=True)
        _control.put(page.buf, _control.WORK_ACK, nonce)
        _control.put(page.buf, _control.WORK_BYTES, 4096)
        offset, _ = _control.WORK_SHARES
        struct.pack_into("<Qd", page.buf, offset, 1, value if field == "share" else 0.5)
        copied, _ = _control.WORK_COPIED
        struct.pack_into("<Qd", page.buf, copied, 1, value if field == "copied" else 0.25)
        carried, _ = _control.WORK_CARRIED
        struct.pack_into("<Qd", page.buf, carried, 1, value if field == "carried" else 0.75)
        _control.put(page.buf, _control.WORK_MS, value if field == "WORK_MS" else 0.01)
        _control.put(page.buf, _control.WORK_AFTER_MS, value if field == "WORK_AFTER_MS" else 0.0)
        with pytest.raises(_schema.Malformed):
            page.report()
        struct.pack_into("<Qd", page.buf, offset, 1, 0.5)
        struct.pack_into("<Qd", page.buf, copied, 1, 0.25)
        struct.pack_into("<Qd", page.buf, carried, 1, 0.75)
        _control.put(page.buf, _control.WORK_MS, 0.01)
        _control.put(page.buf, _control.WORK_AFTER_MS, 0.0)
        assert page.report()["work"] == {
            "bytes": 4096, "ms": 0.01, "shares": [0.5], "copied": [0.25], "carried": [0.75], "after_ms": 0.0,
            "decoded": 0,
        }  # fmt: skip
    finally:
        page.close()
