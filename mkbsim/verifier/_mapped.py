"""The worker's side of a block's memory (DESIGN §5, timing; verifier README, "Blocks"): mapping the block the
verifier laid out (``_arena.BlockArenas``), and the copies of what each call delivered.

Every function here runs as a hook (``_vault``: isolated, every step it takes bound as a keyword-only default
before the submission loads, ``bound_steps``), so a module global, a class's method or an object's attribute the
submission rebinds (a frame below run() leads to them) changes nothing it does; an arena is a tuple of two lists
(the call's arguments, its output slots), no object of the harness's classes. The copies of each call's outputs
and in-place inputs, taken right after the call and put back before the verifier reads them, live in a vault
(``delivered_vault``): no frame holds them, and the vault copies only the call the timer's vault has loaded
(its cursor in the control page), once.
"""

from __future__ import annotations

import mmap
import struct
import types
from collections.abc import Callable, Generator
from typing import Any

import torch

from mkbsim.verifier import _control
from mkbsim.verifier._arena import cuda_pages, lock_pages, unlock_pages
from mkbsim.verifier._mapping import _descriptors_of, map_shared

_Base = torch._C.TensorBase
# captured when the harness is imported: the worker's guards replace torch.frombuffer for submissions
_frombuffer, _empty = torch.frombuffer, torch.empty
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux
_PYTHON_KEYS = (torch._C.DispatchKey.Python, torch._C.DispatchKey.PythonTLSSnapshot)


def python_excluded(
    *, _excluded: Any = torch._C._dispatch_tls_is_dispatch_key_excluded,
    _exclude: Any = torch._C._dispatch_tls_set_dispatch_key_excluded, _keys: Any = _PYTHON_KEYS,
) -> tuple[bool, bool]:  # fmt: skip
    """torch's Python dispatch keys excluded on this thread, through torch's C functions (``_ExcludeDispatchKeyGuard``
    is a pybind11 class, whose ``__enter__`` a submission can replace: red team rt33 F1); what was excluded before."""
    before = (_excluded(_keys[0]), _excluded(_keys[1]))
    _exclude(_keys[0], True)
    _exclude(_keys[1], True)
    return before


def python_restored(
    before: tuple[bool, bool], *, _exclude: Any = torch._C._dispatch_tls_set_dispatch_key_excluded,
    _keys: Any = _PYTHON_KEYS,
) -> None:  # fmt: skip
    """The Python dispatch keys as ``python_excluded`` found them."""
    _exclude(_keys[0], before[0])
    _exclude(_keys[1], before[1])


#: torch functions off (a C class, whose attributes cannot be set), then torch's Python dispatch excluded and put back:
#: the harness's own tensor operations run no code of the submission's (its modes, its tensor subclasses). Used as
#: ``with ops[0](): excluded = ops[1](); try: ... finally: ops[2](excluded)``.
HARNESS_OPS = (torch._C.DisableTorchFunction, python_excluded, python_restored)


def harness_ops(protect: Callable[..., Any]) -> tuple[Any, Any, Any]:
    """``HARNESS_OPS`` with its functions made hooks (``_vault.Registry.protect``)."""
    return HARNESS_OPS[0], protect(python_excluded), protect(python_restored)


#: The harness's requests to ``delivered_vault``.
OPEN, ARENA, KEEP, RESTORE, AUDITED = 1, 2, 3, 4, 5


def view(slot: Any, base: Any, *, _dtypes: Any, _getitem: Any, _slice: Any, _as_dtype: Any, _as_strided: Any,
         _len: Any, _range: Any) -> Any:  # fmt: skip
    """The tensor ``slot`` (an ``_arena.Slot``'s fields) lays out over ``base``, through the C base class."""
    dtype = _dtypes[slot["dtype"]]
    shape, stride = slot["shape"], slot["stride"]
    extent = 1  # elements of storage the view spans (0 for an empty tensor)
    for i in _range(_len(shape)):
        if shape[i] == 0:
            extent = 0
            break
        extent += (shape[i] - 1) * stride[i]
    start = slot["offset"]
    flat = _as_dtype(_getitem(base, _slice(start, start + extent * dtype.itemsize)), dtype)
    return _as_strided(flat, shape, stride)


def arena(layout: Any, base: Any, *, _view: Any, _len: Any, _range: Any, _error: Any) -> tuple[list[Any], list[Any]]:
    """(the call's arguments, its output slots: None where an output is no tensor) as ``layout`` lays them over
    ``base``."""
    scalars, inputs = layout["scalars"], layout["inputs"]
    args = []
    taken = 0
    for i in _range(layout["n_args"]):
        if i in scalars:
            args.append(scalars[i])
        else:
            args.append(_view(inputs[taken], base))
            taken += 1
    positions, slots = layout["out_positions"], layout["outputs"]
    if taken != _len(inputs) or _len(positions) != _len(slots):
        raise _error("an arena's layout does not match its slots")
    outputs = [None] * layout["n_outputs"]
    for j in _range(_len(slots)):
        outputs[positions[j]] = _view(slots[j], base)
    return args, outputs


def block_memory(desc: Any, fds: Any, device: Any, *, _map_shared: Any, _frombuffer: Any, _empty: Any, _uint8: Any,
                 _flags: int, _lock: Any, _len: Any, _error: Any) -> tuple[Any, Any, Any, int, Any]:  # fmt: skip
    """(each call's memory in this process, a storage of its own; the memfd a staged block's bytes travel through or
    None; what keeps the mapping alive; the address of the memfd's pages locked for the copy engines or 0; each
    call's (offset, bytes) in the block): mapped once, with no descriptor left behind (``_mapping``). MAP_POPULATE
    faults the whole mapping in now, before the timed calls: otherwise the first touch of every page (a minor fault
    each) would be timed as the submission's work, which a plain process reusing its own memory never pays.

    No tensor of a call reaches another call's memory through its storage (``untyped_storage()`` and a view past
    the call's own bytes: red team rt12 F0, later calls' answers computed early): cpu, a storage over the call's
    bytes of the one mapping; staged, a device allocation per call; CUDA IPC, the verifier's allocation per call."""
    nbytes = desc["nbytes"]
    spans = []
    for layout in desc["arenas"]:
        offset, size = layout["offset"], layout["nbytes"]
        if offset < 0 or size <= 0 or offset + size > nbytes:
            raise _error("an arena of the block lies outside its memory")
        spans.append((offset, size))
    bases = []
    if "cuda_ipc" in desc:  # an unsandboxed cuda worker: the verifier's allocations themselves
        if _len(desc["cuda_ipc"]) != _len(spans):
            raise _error("a block's shared allocations do not match its arenas")
        for rebuild, rebuild_args in desc["cuda_ipc"]:
            bases.append(rebuild(*rebuild_args))
        return bases, None, bases, 0, spans
    mapped = _map_shared(fds[0], nbytes, _flags)
    if desc.get("staged"):
        host = _frombuffer(mapped, dtype=_uint8)
        locked = _lock(host) if _lock is not None else 0
        for _, size in spans:
            bases.append(_empty(size, dtype=_uint8, device=device))
        return bases, host, mapped, locked, spans
    for offset, size in spans:  # torch.frombuffer's storage spans ``count`` bytes from ``offset``, no more
        bases.append(_frombuffer(mapped, dtype=_uint8, count=size, offset=offset))
    return bases, None, mapped, 0, spans


def map_block(desc: Any, fds: Any, device: Any, *, _memory: Any, _arena: Any, _getitem: Any, _slice: Any,
              _copy: Any, _sync: Any, _zip: Any) -> tuple[tuple[Any, Any, Any, int, Any], list[Any]]:  # fmt: skip
    """The block's memory (a staged block's bytes copied in before its first call) and every call's arena over its
    own memory."""
    memory = _memory(desc, fds, device)
    bases, host, spans = memory[0], memory[1], memory[4]
    if host is not None:
        for base, (offset, size) in _zip(bases, spans):
            _copy(base, _getitem(host, _slice(offset, offset + size)))
        if _sync is not None:
            _sync()
    arenas = []
    for layout, base in _zip(desc["arenas"], bases):
        arenas.append(_arena(layout, base))
    return memory, arenas


def stage_out(memory: Any, *, _copy: Any, _unlock: Any, _getitem: Any, _slice: Any, _zip: Any) -> None:
    """Staged: the outputs and in-place inputs back to the verifier (after the block's last call), then the memfd's
    pages unlocked (the mapping goes with the block)."""
    if memory[1] is not None:
        for base, (offset, size) in _zip(memory[0], memory[4]):
            _copy(_getitem(memory[1], _slice(offset, offset + size)), base)
    if memory[3] and _unlock is not None:
        _unlock(memory[3])


def null_run(outputs: Any, *args: Any, _new_empty: Any, _size: Any, _len: Any, _tuple: Any) -> Any:
    """The harness's own trivial "kernel" (new outputs of the declared form, their bytes left as they are),
    timed like run() so that the verifier measures the harness around a call in this very process. It does
    not read the slots: the harness then copies its outputs into slots no one touched since the block was
    staged in, as it does a submission's (in a block every call's slots are its own)."""
    made = []
    for slot in outputs:
        made.append(_new_empty(slot, _size(slot)) if slot is not None else 0.0)
    return made[0] if _len(made) == 1 else _tuple(made)


def delivered_vault(page: Any, lib: Any, layout: Any, inplace: Any) -> Generator[Any, Any, None]:
    """The copies of what each call of a block delivered: its output slots and in-place inputs, copied aside right
    after the call (out of its timed window, every call alike, null calls too) and put back after the block's last
    call, before the verifier reads any of them, so that a later call (or code between calls) rewriting an earlier
    call's outputs or in-place results changes nothing.

    OPEN ((1, arenas, calls, memory)) takes the block's arenas and memory (``map_block``: every call's, which no frame
    below run() may hold) and the arena of each call, and copies every delivered tensor once (their memory made and
    touched before the first call: copies allocated per call left run() fresh pages to fault in); it answers the copies
    (the harness names them to the provenance vault). ARENA ((2,)) answers the arena of the call the timer's vault has
    loaded (its cursor, BLOCK_NEXT, in the control page); AUDITED ((5,)) answers, once, whether that call is a
    correctness draw (1) or not (0): the harness asks after the call, so that no frame below run() holds the flag, and
    learns it from here rather than from the dispatch stack, where its mode could have been popped; KEEP ((3,)) copies
    that call's delivered tensors, once; RESTORE ((4,)) puts every copy back and closes the block, answering what it
    held for the caller to drop and stage out (its last item, the memory; no object is freed here, so no finalizer runs
    in this frame). Any other request, or one out of that order (a second KEEP or AUDITED of a call, ARENA, AUDITED or
    KEEP while no call is loaded, OPEN of an open block, RESTORE of a closed one), is no harness's: the vault marks the
    block (BLOCK_FAULT, as the timer does) and answers None from then on, so a forged request fails the block it was
    made in or the next."""
    arenas: Any = None
    memory: Any = None
    order: Any = None
    delivered: Any = None
    kept: Any = None
    done: Any = None
    asked: Any = None
    faulty = False
    reply: Any = None
    while True:
        request = yield reply
        reply = None
        try:
            kind = request[0] if lib.type(request) is lib.tuple and lib.len(request) else 0
            if faulty or lib.type(kind) is not lib.int:
                kind = 0
            current = -1  # the call the timer's vault has loaded, in the block's order
            if arenas is not None and lib.u64.unpack_from(page, layout.BLOCK_CALLS)[0]:
                current = lib.u64.unpack_from(page, layout.BLOCK_NEXT)[0] - 1
            if kind == 1 and arenas is None and lib.len(request) == 4:  # OPEN
                arenas, order, memory = request[1], request[2], request[3]
                delivered, kept = [], []
                with lib.ops[0]():
                    excluded = lib.ops[1]()
                    try:
                        for args, outputs in arenas:
                            tensors, copies = [], []
                            for slot in outputs:
                                if slot is not None:
                                    tensors.append(slot)
                            for i in inplace:
                                tensors.append(args[i])
                            for tensor in tensors:
                                copies.append(lib.clone(tensor))
                            delivered.append(tensors)
                            kept.append(copies)
                    finally:
                        lib.ops[2](excluded)
                done = [False] * lib.len(order)
                asked = [False] * lib.len(order)
                reply = kept  # for the provenance vault's census, which leaves the harness's memory out
            elif kind == 5 and 0 <= current < lib.len(order) and not asked[current]:  # AUDITED
                asked[current] = True
                reply = 1 if page[layout.AUDIT] and not page[layout.NULL] else 0
            elif kind == 2 and 0 <= current < lib.len(order):  # ARENA
                reply = arenas[order[current]]
            elif kind == 3 and 0 <= current < lib.len(order) and not done[current]:  # KEEP
                done[current] = True
                with lib.ops[0]():
                    excluded = lib.ops[1]()
                    try:
                        for copy, slot in lib.zip(kept[order[current]], delivered[order[current]]):
                            lib.copy(copy, slot)
                    finally:
                        lib.ops[2](excluded)
            elif kind == 4 and arenas is not None:  # RESTORE
                with lib.ops[0]():
                    excluded = lib.ops[1]()
                    try:
                        for copies, slots in lib.zip(kept, delivered):
                            for copy, slot in lib.zip(copies, slots):
                                lib.copy(slot, copy)
                    finally:
                        lib.ops[2](excluded)
                reply = (arenas, delivered, kept, memory)
                arenas = order = delivered = kept = done = asked = memory = None
            else:
                faulty = True
                lib.u64.pack_into(page, layout.BLOCK_FAULT, 1)
        except lib.BaseException as exc:  # a malformed request: no harness's
            exc.__traceback__ = None
            exc.__context__ = None
            faulty = True
            lib.u64.pack_into(page, layout.BLOCK_FAULT, 1)
        request = None  # the caller holds its objects: dropping them here is never the last reference
        # nor its tensors left in this frame's loop variables (a closed block's memory: the next census's bytes)
        args = outputs = slots = tensor = copy = slot = None
        tensors, copies = [], []


def delivered_lib() -> types.SimpleNamespace:
    """What ``delivered_vault`` calls: C functions, bound when the worker opens it."""
    return types.SimpleNamespace(
        type=type, tuple=tuple, int=int, len=len, zip=zip, BaseException=BaseException, u64=struct.Struct("<Q"),
        clone=_Base.clone, copy=_Base.copy_, ops=HARNESS_OPS,
    )  # fmt: skip


def delivered_layout() -> types.SimpleNamespace:
    return types.SimpleNamespace(
        BLOCK_CALLS=_control.BLOCK_CALLS[0], BLOCK_NEXT=_control.BLOCK_NEXT[0], BLOCK_FAULT=_control.BLOCK_FAULT[0],
        AUDIT=_control.AUDIT[0], NULL=_control.NULL[0],
    )  # fmt: skip


def request(*, _kind: int, _send: Any) -> Any:
    """One of the harness's requests to ``delivered_vault`` (ARENA, AUDITED, KEEP, RESTORE): its answer."""
    return _send((_kind,))


def open_block(arenas: Any, calls: Any, memory: Any, *, _send: Any) -> Any:
    """The harness's OPEN of a block it mapped (``map_block``) to ``delivered_vault``: the copies it made."""
    return _send((1, arenas, calls, memory))


def bound_steps(protect: Callable[..., Any], device: torch.device, sync: Any) -> dict[str, Any]:
    """The block's steps as hooks, every function they call bound now (before the submission loads): ``map``,
    ``stage_out`` and ``null_run`` (``sync``: the device's synchronisation, a C function, or None)."""
    dtypes = {str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)}
    pages = cuda_pages() if device.type == "cuda" else None  # a staged block's page-locking for the copy engines
    lock = protect(lock_pages, _register=pages[0]) if pages is not None else None
    unlock = protect(unlock_pages, _unregister=pages[1]) if pages is not None else None
    copy = _Base.copy_
    slot_view = protect(
        view, _dtypes=dtypes, _getitem=_Base.__getitem__, _slice=slice, _as_dtype=_Base.view,
        _as_strided=_Base.as_strided, _len=len, _range=range,
    )  # fmt: skip
    shared = protect(map_shared, _descriptors=protect(_descriptors_of))
    memory = protect(
        block_memory, _map_shared=shared, _frombuffer=_frombuffer, _empty=_empty, _uint8=torch.uint8,
        _flags=mmap.MAP_SHARED | _MAP_POPULATE, _lock=lock, _len=len, _error=ValueError,
    )  # fmt: skip
    call_arena = protect(arena, _view=slot_view, _len=len, _range=range, _error=ValueError)
    mapping = protect(
        map_block, _memory=memory, _arena=call_arena, _getitem=_Base.__getitem__, _slice=slice, _copy=copy, _sync=sync,
        _zip=zip,
    )  # fmt: skip
    return {
        "map": mapping,
        "stage_out": protect(stage_out, _copy=copy, _unlock=unlock, _getitem=_Base.__getitem__, _slice=slice, _zip=zip),
        "null_run": protect(null_run, _new_empty=_Base.new_empty, _size=_Base.size, _len=len, _tuple=tuple),
    }


def vault_requests(protect: Callable[..., Any], send: Any) -> dict[str, Any]:
    """The harness's hooks to ``delivered_vault``."""
    return {
        "open": protect(open_block, _send=send),
        "arena": protect(request, _kind=ARENA, _send=send),
        "audited": protect(request, _kind=AUDITED, _send=send),
        "keep": protect(request, _kind=KEEP, _send=send),
        "restore": protect(request, _kind=RESTORE, _send=send),
    }
