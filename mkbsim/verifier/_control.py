"""The control page: memory the verifier shares with the worker's vaults, and with nothing else there.

The verifier creates it (an anonymous memfd) and hands it to the worker at start; the worker's vaults
map it and close the descriptor, so no file descriptor and no Python object outside a vault leads to
it. Through it flow the facts a verdict rests on and the submission must neither read nor forge:

* verifier → vaults: the call's nonce, whether DSL launches are suppressed on this call (never sent
  on the channel the worker's Python reads), whether this is a correctness draw (audit), whether this
  timed-protocol call is an unscored evidence call (never sent on the channel either);
* vaults → verifier: the launches counted, the call's timing marks, the acknowledgement that the
  timer stopped this very call, the time the call spent inside DSL launches (and the gate's
  acknowledgement of this very call), the work its launches did (evidence calls and draws), the
  violations the guards refused, and the provenance records of
  a correctness draw (``_provenance``).

Layout (little-endian): a fixed header, then two regions, each a length-prefixed pickle written by
one vault: violations (``VIOLATIONS``) and provenance records (``RECORDS``).
"""

from __future__ import annotations

import _pickle
import functools
import mmap
import os
import pickle
import struct
from collections.abc import Sequence
from typing import Any

from mkbsim.verifier import _schema
from mkbsim.verifier._channel import UntrustedMessage, decode_untrusted
from mkbsim.verifier._mapping import map_shared

#: Header fields: offset, struct format.
NONCE = (0, "<Q")  # verifier: a fresh value per call
LAUNCHES = (8, "<Q")  # gate vault: DSL launches of the current call (the verifier zeroes it)
SUPPRESS = (16, "<B")  # verifier: skip the effect of every DSL launch of this call
AUDIT = (17, "<B")  # verifier: correctness draw (snapshots, provenance records)
EVIDENCE = (18, "<B")  # verifier: an evidence call (the gate times launches and lists their signatures)
ACK = (24, "<Q")  # timer vault: the nonce of the last call it stopped
CALL_MS = (32, "<d")  # timer vault: the protocol's measure of the call
HOST_MS = (40, "<d")  # timer vault: host clock around the call
PENDING_MS = (48, "<d")  # timer vault: device work left after the timed stream finished (cuda)
STARTS = (56, "<Q")  # timer vault: calls started (a START after the first of a nonce does nothing)
VIOLATION_COUNT = (64, "<Q")  # guards vault: violations recorded so far
RECORDS_FLAG = (72, "<Q")  # provenance vault: records written for this nonce (0 if none)
DSL_MS = (80, "<d")  # gate vault: time inside the call's DSL launches (cpu: host clock; cuda: launch events)
DSL_ACK = (88, "<Q")  # gate vault: the nonce of the last call whose DSL time it wrote
#: Gate vault, with DSL_MS: the call's distinct launch signatures (kernel and argument shapes), as numbers
#: the vault assigns in order of first appearance: a count, then that many little-endian u32.
SIGNATURES = (96, 64)  # offset, capacity (signatures beyond it are not listed)
#: Gate vault, on an evidence call or a correctness draw, once run() returned (``_provenance``, "work"): the bytes
#: the call's launches changed in their tensor arguments, the vault's own time spent measuring it (cpu: its
#: thread's CPU time; cuda: host time inside the call), and each returned output's share of elements that still
#: hold what a launch wrote there: a count, then that many little-endian f64.
WORK_ACK = (384, "<Q")  # the nonce of the last call whose work the vault wrote
WORK_BYTES = (392, "<Q")
WORK_MS = (400, "<d")
WORK_SHARES = (408, 16)  # offset, capacity (outputs beyond it are not listed)

HEADER_BYTES = 4096
VIOLATIONS = (HEADER_BYTES, 1 << 20)  # offset, capacity
RECORDS = (HEADER_BYTES + (1 << 20), 31 << 20)
SIZE = RECORDS[0] + RECORDS[1]


def put(buf: Any, field: tuple[int, str], value: Any) -> None:
    struct.pack_into(field[1], buf, field[0], value)


def get(buf: Any, field: tuple[int, str]) -> Any:
    return struct.unpack_from(field[1], buf, field[0])[0]


def write_region(buf: Any, region: tuple[int, int], blob: bytes) -> bool:
    """Write ``blob`` into ``region`` (8-byte length first); False (and nothing written) if it does not fit."""
    offset, capacity = region
    if len(blob) + 8 > capacity:
        return False
    buf[offset + 8 : offset + 8 + len(blob)] = blob
    struct.pack_into("<Q", buf, offset, len(blob))
    return True


class ControlPage:
    """The verifier's side: owns the memory, writes the call's orders, reads the vaults' reports."""

    def __init__(self) -> None:
        self.fd: int | None = os.memfd_create("mkbsim-control", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, SIZE)
        self.buf = mmap.mmap(self.fd, SIZE)
        self.nonce = 0

    def take_fd(self) -> int:
        """The descriptor to send to the worker once; closed here after sending (``release_fd``)."""
        assert self.fd is not None
        return self.fd

    def release_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def begin_call(self, *, suppress: bool, audit: bool, evidence: bool = False) -> int:
        """Arm the page for the next call and return its nonce."""
        self.nonce += 1
        put(self.buf, LAUNCHES, 0)
        put(self.buf, RECORDS_FLAG, 0)
        put(self.buf, SUPPRESS, int(suppress))
        put(self.buf, AUDIT, int(audit))
        put(self.buf, EVIDENCE, int(evidence))
        put(self.buf, NONCE, self.nonce)
        return self.nonce

    def end_call(self) -> None:
        """Nothing is suppressed between calls (the worker may run library code meanwhile)."""
        put(self.buf, SUPPRESS, 0)
        put(self.buf, AUDIT, 0)
        put(self.buf, EVIDENCE, 0)

    def report(self, samples: Sequence[int] = ()) -> dict[str, Any]:
        """What the vaults wrote about the last call, each field of the form the vaults write (``_schema``:
        ``Malformed`` otherwise); ``samples``: how many positions of each output a correctness draw samples."""
        dsl_acked = get(self.buf, DSL_ACK) == self.nonce
        found = {
            "launches": get(self.buf, LAUNCHES),
            "acked": get(self.buf, ACK) == self.nonce,
            "ms": get(self.buf, CALL_MS),
            "host_ms": get(self.buf, HOST_MS),
            "pending_ms": get(self.buf, PENDING_MS),
            "dsl_ms": get(self.buf, DSL_MS) if dsl_acked else None,
            "signatures": self._signatures() if dsl_acked else None,
            "records": None,
            "work": self._work() if get(self.buf, WORK_ACK) == self.nonce else None,
        }
        _schema.times(found, ("ms", "host_ms", "pending_ms", "dsl_ms"))
        if found["work"] is not None:
            _schema.work(found["work"])
        if get(self.buf, RECORDS_FLAG) == self.nonce:
            found["records"] = _schema.provenance_records(self._region(RECORDS), samples)
        return found

    def _signatures(self) -> frozenset[int]:
        offset, capacity = SIGNATURES
        (count,) = struct.unpack_from("<Q", self.buf, offset)
        return frozenset(struct.unpack_from(f"<{min(count, capacity)}I", self.buf, offset + 8))

    def _work(self) -> dict[str, Any]:
        offset, capacity = WORK_SHARES
        (count,) = struct.unpack_from("<Q", self.buf, offset)
        shares = list(struct.unpack_from(f"<{min(count, capacity)}d", self.buf, offset + 8))
        return {"bytes": get(self.buf, WORK_BYTES), "ms": get(self.buf, WORK_MS), "shares": shares}

    def guard_records(self) -> tuple[list[str], list[str]]:
        """(violations, inline CUDA sites) the guards recorded so far (whole lists, newest last); ``Malformed``
        if the region holds anything else."""
        offset, _ = VIOLATIONS
        if get(self.buf, (offset, "<Q")) == 0:
            return [], []
        return _schema.guard_records(self._region(VIOLATIONS))

    def _region(self, region: tuple[int, int]) -> Any:
        """The pickle a vault wrote into ``region``, decoded as plain data (``Malformed`` if it is not)."""
        offset, capacity = region
        (length,) = struct.unpack_from("<Q", self.buf, offset)
        if length + 8 > capacity:
            raise _schema.Malformed(f"a region of the control page claims {length} bytes, beyond its {capacity}")
        try:
            return decode_untrusted(bytes(self.buf[offset + 8 : offset + 8 + length]))
        except UntrustedMessage as exc:
            raise _schema.Malformed(f"a region of the control page does not decode: {exc}") from None

    def close(self) -> None:
        self.release_fd()
        self.buf.close()


def map_control(fd: int) -> mmap.mmap:
    """The worker's side: map the page, leaving no descriptor of it open (no path leads to it afterwards)."""
    return map_shared(fd, SIZE)


#: Pickles a vault's records: the C pickler itself (a Python wrapper's code could be replaced).
dumps = functools.partial(_pickle.dumps, protocol=pickle.HIGHEST_PROTOCOL)
