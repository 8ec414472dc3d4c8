"""The control page: memory the verifier shares with the worker's vaults, and with nothing else there.

The verifier creates it (an anonymous memfd) and hands it to the worker at start; the worker's vaults
map it and close the descriptor, so no file descriptor and no Python object outside a vault leads to
it. Through it flow the facts a verdict rests on and the submission must neither read nor forge:

* verifier → vaults: the call's nonce, whether DSL launches are suppressed on this call (never sent
  on the channel the worker's Python reads), whether this is a correctness draw (audit), whether this
  timed-protocol call is an unscored evidence call or a null call (never sent on the channel either);
* vaults → verifier: the launches counted, the call's timing marks, the acknowledgement that the
  timer stopped this very call, the time the call spent inside DSL launches (and the gate's
  acknowledgement of this very call), the work its launches did (evidence calls and draws), the
  violations the guards refused, and the provenance records of
  a correctness draw (``_provenance``).

Layout (little-endian): a fixed header, then two regions, each a length-prefixed pickle written by
one vault: violations (``VIOLATIONS``) and provenance records (``RECORDS``), then the block's call slots.

A **block** (DESIGN §5, timing) runs many calls back to back with no message between them, so the
verifier cannot re-arm the header between calls. It writes every call's orders, as a copy of the header's
per-call fields, into a slot of ``BLOCK_SLOTS`` before it sends the block; the timer's vault moves from
one slot to the next when a call starts after the previous one stopped (``_timing.timer_vault``): it saves
the header's per-call fields into the finished call's slot, loads the next slot's orders into the header
(so every other vault reads the header as for a single call), and stamps the slot with its own clocks. The
verifier reads each slot as it reads the header of a single call.
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
#: verifier: of an evidence call, ``KEPT_EVIDENCE`` + j: its launches' arguments kept as the j-th the twin draws
#: compare (a secret choice among the evidence calls, made before the timing); of a correctness draw,
#: ``TWIN_DRAW`` + j: the j-th twin draw, on that call's inputs (the gate compares its launches' arguments with that
#: call's), ``STALE_DRAW``: the stale draw (on inputs of its own, its launches given the first kept call's bytes where
#: nothing in the draw wrote): ``_provenance.twin_fill``
TWIN = (20, "<B")
STALE_DRAW = 2
TWIN_DRAW = 16
KEPT_EVIDENCE = 32
#: kept evidence calls at most (each its own TWIN_DRAW + j and KEPT_EVIDENCE + j)
MAX_KEPT = 16
#: Evidence calls the twin draws repeat (``_phases.twin_draw``), chosen at random before the timing, a secret as the
#: evidence calls are: a submission that gives its kernels other work on a share s of the scored calls, whichever,
#: escapes all of them with probability (1 - s) ** TWIN_CALLS (a quarter: 0.42; three quarters: 0.016). One, the last
#: evidence call, let a submission do so on the first three quarters of the scored calls, whose order it can count,
#: and pass 96% of the time (red team rt58 F0).
TWIN_CALLS = 3
ACK = (24, "<Q")  # timer vault: the nonce of the last call it stopped
CALL_MS = (32, "<d")  # timer vault: the protocol's measure of the call
HOST_MS = (40, "<d")  # timer vault: host clock around the call
PENDING_MS = (48, "<d")  # timer vault: device work left after the timed stream finished (cuda)
STARTS = (56, "<Q")  # timer vault: calls started (a START after the first of a nonce does nothing)
VIOLATION_COUNT = (64, "<Q")  # guards vault: violations recorded so far
RECORDS_FLAG = (72, "<Q")  # provenance vault: records written for this nonce (0 if none)
DSL_MS = (80, "<d")  # gate vault: time inside the call's DSL launches (cpu: their threads' CPU; cuda: launch events)
DSL_ACK = (88, "<Q")  # gate vault: the nonce of the last call whose DSL time it wrote
#: Gate vault, with DSL_MS: the call's distinct launch signatures (kernel and argument shapes), as numbers
#: the vault assigns in order of first appearance: a count, then that many little-endian u32.
SIGNATURES = (96, 64)  # offset, capacity (signatures beyond it are not listed)
#: Gate vault, on an evidence call or a correctness draw, once run() returned (``_provenance``, "work"): the bytes
#: the call's launches changed in their tensor arguments, the vault's own time spent measuring it (cpu: its
#: thread's CPU time; cuda: host time inside the call), and each returned output's share of elements that still
#: hold what a launch wrote there: a count, then that many little-endian f64.
WORK_ACK = (360, "<Q")  # the nonce of the last call whose work the vault wrote
WORK_BYTES = (368, "<Q")
WORK_MS = (376, "<d")
WORK_SHARES = (384, 16)  # offset, capacity (outputs beyond it are not listed)
#: cuda: the vault's time on that work once the call's timer stopped (host clock, ms; inside the call's trusted
#: measure, outside its events); cpu: 0 (WORK_MS holds it)
WORK_AFTER_MS = (520, "<d")
#: Gate vault, with WORK_SHARES: each returned output's share of sampled elements that hold what a launch left there
#: and that launch copied from its other arguments' values before it (``_provenance.launch_copies``): a count, then that
#: many little-endian f64.
WORK_COPIED = (576, 16)  # offset, capacity, as WORK_SHARES
#: Gate vault, with WORK_BYTES on an evidence call: the bytes the decode rule took from the launches' work there (their
#: changed elements a simple map of values present before the launch recovers: ``_provenance.decode_later``)
WORK_DECODED = (712, "<Q")
#: Gate vault, with WORK_SHARES: each returned output's carried share, beyond chance, of sampled elements whose values
#: are among those the call's launches made, wherever the output's memory came from (``_provenance.carried_share``:
#: a launch's result eager code copied): a count, then that many little-endian f64.
WORK_CARRIED = (728, 16)  # offset, capacity, as WORK_SHARES (past END_THREAD_CPU, a block field)
#: Gate vault, on every call: the bytes its counted launches' tensor arguments spanned, summed over the launches
#: (the verifier zeroes it); a scored call's against the evidence calls' (``_judge.scored_footprint``)
FOOTPRINT = (864, "<Q")
#: Timer vault: the process's CPU clock over the call, from START to STOP's arrival (ms): every thread's work inside
#: the call, which a busy machine does not stretch (``_judge.scored_host_time``)
CALL_CPU_MS = (872, "<d")
#: Gate vault: the watched calls' requests it has served, all calls together (outside PER_CALL: never zeroed). The
#: verifier's wait for a block restarts at each (``progress``): the vault's own work over a large argument (a
#: production draw's copy checks on cpu: seconds a request) is not the submission's time to answer.
VAULT_WORK = (880, "<Q")
#: Timer vault: 1 from a call's first START to its STOP, 0 otherwise (outside PER_CALL). The gate's vault refuses a DSL
#: launch in a block outside it: a launch before START was counted and credited as the call's, its time outside the
#: call's measure (red team rt31b F1: code the submission bound into the harness's per-call lookups launched the kernel
#: before the timer started; run() returned the finished output at speedup 100).
TIMED = (888, "<B")
#: Gate vault, with DSL_MS: the time of the call's launches beyond ``_provenance.LAUNCH_FIXED_MS`` each (a launch's
#: fixed cost, a cold host path included), summed: the part of the DSL time a launch's fixed cost cannot explain, which
#: launches added to farm the share's allowance do not raise (``_coverage.dsl_time_check``).
DSL_LONG_MS = (896, "<d")
#: Gate vault, on an evidence call (with DSL_MS, and once run() returned with WORK_ACK): in the low byte 1 where a
#: launch was given another number or tensor layout than every correctness draw gave that argument of that launch
#: (``_provenance.fixed_by_draws``), 2 where a tensor argument held other bytes where every draw held the same bytes
#: constants made (``fixed_content``), and in bit 8 whether a byte alike on the draws by chance has differed on every
#: evidence call so far (``fixed_compare``); and the position (from 1) of the first such argument (low 32 bits), and
#: of the latter's (high 32 bits)
FIXED_CHANGED = (904, "<Q")
FIXED_CHANGED_AT = (912, "<Q")
NULL = (19, "<B")  # verifier: the harness times its own null function instead of run() (blocks only)
#: The per-call fields a block's slot holds (the header up to the end of CALL_CPU_MS, DSL_LONG_MS to FIXED_CHANGED_AT),
#: less the guards' cumulative VIOLATION_COUNT, which the slots never touch.
PER_CALL = (
    (0, VIOLATION_COUNT[0]), (VIOLATION_COUNT[0] + 8, WORK_AFTER_MS[0] + 8),
    (WORK_COPIED[0], WORK_DECODED[0] + 8),
    (WORK_CARRIED[0], CALL_CPU_MS[0] + 8), (DSL_LONG_MS[0], FIXED_CHANGED_AT[0] + 8),
)  # fmt: skip
#: Block fields (outside PER_CALL). Verifier: the block's calls (0: no block), the next slot (0), and the block's
#: own nonce, the one its answer is signed for (``_channel.answer_signer``); timer vault: the next slot to load,
#: a request out of the harness's order (FAULT), and its clocks at the block's end.
BLOCK_CALLS = (528, "<Q")
BLOCK_NEXT = (536, "<Q")
BLOCK_FAULT = (544, "<Q")
END_T = (552, "<d")  # timer vault: its host clock (perf_counter, s) when the block ended
END_CPU = (560, "<Q")  # timer vault: the process's CPU clock (ns) when the block ended
BLOCK_NONCE = (568, "<Q")
#: timer vault: the CPU clock of the thread that runs the calls (ns) when the block ended (past PER_CALL's fields)
END_THREAD_CPU = (720, "<Q")
#: Slot fields beyond the per-call ones: the timer vault's clocks when the slot's call started (the process's CPU
#: clock, and that of the thread running the calls: what the rest of the process spent ran beside it).
SLOT_START_T = (528, "<d")
SLOT_START_CPU = (536, "<Q")
SLOT_START_THREAD_CPU = (544, "<Q")

HEADER_BYTES = 4096
VIOLATIONS = (HEADER_BYTES, 1 << 20)  # offset, capacity
RECORDS = (HEADER_BYTES + (1 << 20), 31 << 20)
SLOT_BYTES = 1024
MAX_BLOCK_CALLS = 1024
BLOCK_SLOTS = RECORDS[0] + RECORDS[1]  # offset of slot 0
SIZE = BLOCK_SLOTS + MAX_BLOCK_CALLS * SLOT_BYTES


def put(buf: Any, field: tuple[int, str], value: Any) -> None:
    struct.pack_into(field[1], buf, field[0], value)


def get(buf: Any, field: tuple[int, str], base: int = 0) -> Any:
    return struct.unpack_from(field[1], buf, base + field[0])[0]


def slot_offset(index: int) -> int:
    return BLOCK_SLOTS + index * SLOT_BYTES


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

    def begin_call(self, *, suppress: bool, audit: bool, evidence: bool = False, twin: int = 0) -> int:
        """Arm the page for the next call and return its nonce."""
        self.nonce += 1
        put(self.buf, LAUNCHES, 0)
        put(self.buf, FOOTPRINT, 0)
        put(self.buf, RECORDS_FLAG, 0)
        put(self.buf, SUPPRESS, int(suppress))
        put(self.buf, AUDIT, int(audit))
        put(self.buf, EVIDENCE, int(evidence))
        put(self.buf, TWIN, twin)
        put(self.buf, NULL, 0)
        put(self.buf, NONCE, self.nonce)
        return self.nonce

    def begin_block(self, orders: Sequence[tuple[bool | int, ...]]) -> list[int]:
        """Arm one slot per call of a block, (evidence, null, audit, suppress[, twin: 1 the twin draw, 2 the stale
        draw]) each, and return their nonces.
        The header gets a nonce of its own, which no call has: the timer's vault loads slot 0 at the first ADVANCE."""
        if not 0 < len(orders) <= MAX_BLOCK_CALLS:
            raise ValueError(f"a block holds 1 to {MAX_BLOCK_CALLS} calls, not {len(orders)}")
        nonces = []
        for i, (evidence, null, audit, suppress, *twin) in enumerate(orders):
            base = slot_offset(i)
            self.buf[base : base + SLOT_BYTES] = bytes(SLOT_BYTES)
            self.nonce += 1
            put(self.buf, (base + NONCE[0], NONCE[1]), self.nonce)
            put(self.buf, (base + EVIDENCE[0], EVIDENCE[1]), int(evidence))
            put(self.buf, (base + NULL[0], NULL[1]), int(null))
            put(self.buf, (base + AUDIT[0], AUDIT[1]), int(audit))
            put(self.buf, (base + SUPPRESS[0], SUPPRESS[1]), int(suppress))
            put(self.buf, (base + TWIN[0], TWIN[1]), int(twin[0]) if twin else 0)
            nonces.append(self.nonce)
        put(self.buf, BLOCK_NONCE, self.begin_call(suppress=False, audit=False))
        for name in (BLOCK_NEXT, BLOCK_FAULT, END_T, END_CPU, END_THREAD_CPU):
            put(self.buf, name, 0)
        put(self.buf, BLOCK_CALLS, len(orders))  # last: the block exists once its slots do
        return nonces

    def block_state(self) -> dict[str, Any]:
        """What the timer's vault wrote about the block as a whole: how many slots it loaded, whether a request (or
        one to the copies of what the calls delivered, ``_mapped``) came out of the harness's order, whether it
        ended the block (it zeroes BLOCK_CALLS), and its clocks then."""
        found = {
            "loaded": get(self.buf, BLOCK_NEXT),
            "fault": bool(get(self.buf, BLOCK_FAULT)),
            "ended": get(self.buf, BLOCK_CALLS) == 0,
            "end_t": get(self.buf, END_T),
            "end_cpu_ns": get(self.buf, END_CPU),
            "end_thread_cpu_ns": get(self.buf, END_THREAD_CPU),
        }
        _schema.times(found, ("end_t",))
        return found

    def progress(self) -> tuple[int, int]:
        """Slots the timer's vault has loaded so far, and the gate vault's steps of work on watched calls (read while a
        block runs: ``WorkerHandle.wait``)."""
        return int(get(self.buf, BLOCK_NEXT)), int(get(self.buf, VAULT_WORK))

    def end_block(self) -> None:
        put(self.buf, BLOCK_CALLS, 0)
        self.end_call()

    def slot_report(self, index: int, nonce: int, samples: Sequence[int] = ()) -> dict[str, Any]:
        """``report`` of call ``index`` of the block (given ``nonce``), with the timer vault's clocks when it
        started (``loaded``: whether the vault loaded this slot for a call of this nonce). The provenance
        records are the region's, which holds the block's last audited call's (a block audits one call)."""
        base = slot_offset(index)
        found = self.report(samples, base=base, nonce=nonce)
        found["loaded"] = get(self.buf, NONCE, base) == nonce
        found["start_t"] = get(self.buf, SLOT_START_T, base)
        found["start_cpu_ns"] = get(self.buf, SLOT_START_CPU, base)
        found["start_thread_cpu_ns"] = get(self.buf, SLOT_START_THREAD_CPU, base)
        _schema.times(found, ("start_t",))
        return found

    def end_call(self) -> None:
        """Nothing is suppressed between calls (the worker may run library code meanwhile)."""
        put(self.buf, SUPPRESS, 0)
        put(self.buf, AUDIT, 0)
        put(self.buf, EVIDENCE, 0)
        put(self.buf, TWIN, 0)

    def report(self, samples: Sequence[int] = (), base: int = 0, nonce: int | None = None) -> dict[str, Any]:
        """What the vaults wrote about the last call, each field of the form the vaults write (``_schema``:
        ``Malformed`` otherwise); ``samples``: how many positions of each output a correctness draw samples.
        ``base``, ``nonce``: a block's slot instead of the header, and the nonce its call was given."""
        nonce = self.nonce if nonce is None else nonce
        dsl_acked = get(self.buf, DSL_ACK, base) == nonce
        found = {
            "launches": get(self.buf, LAUNCHES, base),
            "footprint": get(self.buf, FOOTPRINT, base),
            "acked": get(self.buf, ACK, base) == nonce,
            "ms": get(self.buf, CALL_MS, base),
            "host_ms": get(self.buf, HOST_MS, base),
            "cpu_ms": get(self.buf, CALL_CPU_MS, base),
            "pending_ms": get(self.buf, PENDING_MS, base),
            "dsl_ms": get(self.buf, DSL_MS, base) if dsl_acked else None,
            "dsl_long_ms": get(self.buf, DSL_LONG_MS, base) if dsl_acked else None,
            "signatures": self._signatures(base) if dsl_acked else None,
            "fixed_changed": self._fixed_changed(base) if dsl_acked else None,
            "records": None,
            "work": self._work(base) if get(self.buf, WORK_ACK, base) == nonce else None,
        }
        _schema.times(found, ("ms", "host_ms", "cpu_ms", "pending_ms", "dsl_ms", "dsl_long_ms"))
        if found["work"] is not None:
            _schema.work(found["work"])
        if get(self.buf, RECORDS_FLAG, base) == nonce:
            found["records"] = _schema.provenance_records(self._region(RECORDS), samples)
        return found

    def _signatures(self, base: int = 0) -> frozenset[int]:
        offset, capacity = SIGNATURES
        offset += base
        (count,) = struct.unpack_from("<Q", self.buf, offset)
        return frozenset(struct.unpack_from(f"<{min(count, capacity)}I", self.buf, offset + 8))

    def _fixed_changed(self, base: int = 0) -> tuple[int, int, int, int]:
        """Whether a launch was given a value no correctness draw gave it (0; 1: a number or a layout; 2: a tensor's
        bytes), the argument's position, whether a byte alike on the draws by chance has differed on every evidence
        call so far (0, 1), and its argument's position."""
        found, at = get(self.buf, FIXED_CHANGED, base), get(self.buf, FIXED_CHANGED_AT, base)
        return found & 0xFF, at & 0xFFFFFFFF, found >> 8 & 1, at >> 32

    def _work(self, base: int = 0) -> dict[str, Any]:
        offset, capacity = WORK_SHARES
        offset += base
        (count,) = struct.unpack_from("<Q", self.buf, offset)
        shares = list(struct.unpack_from(f"<{min(count, capacity)}d", self.buf, offset + 8))
        offset, capacity = WORK_COPIED
        offset += base
        (count,) = struct.unpack_from("<Q", self.buf, offset)
        copied = list(struct.unpack_from(f"<{min(count, capacity)}d", self.buf, offset + 8))
        offset, capacity = WORK_CARRIED
        offset += base
        (count,) = struct.unpack_from("<Q", self.buf, offset)
        carried = list(struct.unpack_from(f"<{min(count, capacity)}d", self.buf, offset + 8))
        return {"bytes": get(self.buf, WORK_BYTES, base), "ms": get(self.buf, WORK_MS, base), "shares": shares,
                "copied": copied, "carried": carried, "after_ms": get(self.buf, WORK_AFTER_MS, base),
                "decoded": get(self.buf, WORK_DECODED, base)}  # fmt: skip

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
