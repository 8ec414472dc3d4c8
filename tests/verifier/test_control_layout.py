"""The control page's header: every field has bytes of its own (a field written over another's corrupts both)."""

from __future__ import annotations

import itertools
import struct

from mkbsim.verifier import _control

# fields holding a count then up to `capacity` items of this size
_LISTS = {"SIGNATURES": 4, "WORK_SHARES": 8, "WORK_COPIED": 8, "WORK_CARRIED": 8}
# the slot's own stamps reuse the block fields' offsets inside a slot, never the header's
_SLOT_ONLY = {"SLOT_START_T", "SLOT_START_CPU", "SLOT_START_THREAD_CPU"}


def _extents() -> dict[str, tuple[int, int]]:
    found = {}
    for name, value in vars(_control).items():
        if not name.isupper() or name in _SLOT_ONLY or type(value) is not tuple or len(value) != 2:
            continue
        offset, form = value
        if type(offset) is not int:
            continue
        if name in _LISTS:
            found[name] = (offset, offset + 8 + _LISTS[name] * form)
        elif type(form) is str:
            found[name] = (offset, offset + struct.calcsize(form))
    return found


def test_no_two_header_fields_share_a_byte() -> None:
    fields = _extents()
    assert {"FOOTPRINT", "CALL_CPU_MS", "SIGNATURES", "WORK_CARRIED", "END_THREAD_CPU"} <= set(fields)
    for (a, (a0, a1)), (b, (b0, b1)) in itertools.combinations(sorted(fields.items()), 2):
        assert a1 <= b0 or b1 <= a0, f"{a} {a0}..{a1} overlaps {b} {b0}..{b1}"
    assert max(end for _, end in fields.values()) <= _control.HEADER_BYTES


def test_a_slot_holds_every_per_call_field_and_no_block_field() -> None:
    fields = _extents()
    per_call = [range(lo, hi) for lo, hi in _control.PER_CALL]
    block = {"BLOCK_CALLS", "BLOCK_NEXT", "BLOCK_FAULT", "END_T", "END_CPU", "BLOCK_NONCE", "END_THREAD_CPU",
             "VIOLATION_COUNT", "VAULT_WORK", "TIMED", "VIOLATIONS", "RECORDS"}  # fmt: skip
    for name, (lo, hi) in fields.items():
        inside = any(lo in r and hi - 1 in r for r in per_call)
        if name in block:
            assert not any(lo < r.stop and r.start < hi for r in per_call), name
        elif name not in ("SUPPRESS", "AUDIT", "EVIDENCE", "NULL"):  # the verifier's orders: per call too
            assert inside, name
    assert all(hi <= _control.SLOT_BYTES for _, hi in _control.PER_CALL)
