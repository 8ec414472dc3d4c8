"""The launch gate and the provenance audit of a correctness draw, in one vault (DESIGN §5).

Every DSL launch passes the gate twice, before and after the call into native code:

* before: the launch is counted in the control page (the verifier reads the count there). On a
  correctness draw the storage of every tensor argument is copied aside;
* after: on a correctness draw the device is synchronised and each argument's storage is compared with
  its copy: what changed was written by the DSL. When the verifier ordered this call suppressed, the
  copies are written back, so no launch of the call leaves any effect. The kernels still run and fail
  or return as they would: from inside the call, a suppressed launch differs from a real one only in
  what it leaves behind, which is exactly what the bypass test measures.

On a correctness draw the harness also pushes a torch dispatch mode that reports every eager operator
(``op``), and hands over run()'s result (``result``). The vault follows which storages hold data a DSL
launch wrote or that was computed from it ("tainted"), and samples, at positions the verifier chose,
every tensor of an output's size that is not: eager results, eager inputs, launch arguments before the
launch, and the returned outputs. The verifier compares those samples with its anchors: an output whose
values existed without the DSL (a kernel copying or gating an eager answer) was not produced by it.
The records go to the control page; the harness's Python never holds them.

Every call counts its genuine launches (below). On an evidence call (an unscored timed-protocol call the
verifier flags in the control page, DESIGN §5 "audits cannot be told apart") and on a correctness draw,
the vault also lists the launches' signatures and times the DSL launches themselves: from the end of a
counted launch's BEFORE to the start of its AFTER, the native call and nothing of the harness's (cpu: the
host clock, the call is synchronous; cuda: events recorded on the current stream around the launch, read
once the call is over). The harness's END of the call writes the sum to the control page. A scored timed
call pays only the count: no clock, no event, no AFTER. Only a launch the vault knows is genuine is
counted and timed: its hook's original must be one registered before the submission loaded, and a TIRx
launch must be a function the gate itself took from a runtime module (its native handle unchanged since),
with plain arguments (tensors, numbers, strings, TVM FFI values: no object whose conversion runs the
submission's Python inside the window). Anything else runs unwatched by the count and the clock, which can
only cost the submission.
"""

from __future__ import annotations

import _struct
import importlib
import operator
import sys
import types
from collections.abc import Sequence
from typing import Any

import torch

from mkbsim.verifier import _control
from mkbsim.verifier._timing import _CudaEvent, _current_stream, _event_elapsed, _event_record, _perf_counter

#: Samples per output (positions drawn by the verifier among the output's elements).
SAMPLES = 512
#: An output at least this share of whose elements (values counted with their multiplicity) a DSL-free
#: tensor made by eager code during the call holds, whatever its layout, is a copy of that tensor.
COPY_SHARE = 0.95
#: Operators that hand out uninitialised memory: on a correctness draw floats hold NaN, so that an output
#: a suppressed launch left unwritten is never right by chance. Integers and booleans hold zero: they are
#: counts, offsets and indices that later kernels follow, and with launches suppressed they must send those
#: kernels over no data, never out of bounds (the largest integer made the H200's MoE pipelines fault). The
#: same on every correctness draw, so that the suppressed one is not told apart by it.
_EMPTY_OPS = frozenset(
    ("aten.empty.memory_format", "aten.empty_like.default", "aten.empty_strided.default", "aten.new_empty.default",
     "aten.new_empty_strided.default", "aten.empty_permuted.default")
)  # fmt: skip
#: The integer dtypes (unsigned 16/32/64-bit included: a NaN fill of them raised inside the audit).
_INTEGER_DTYPES = (
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32, torch.uint64,
)  # fmt: skip


def _getter(cls: type, name: str) -> Any:
    """The C getter of a property of ``cls`` (``cls.name.__get__``), immune to patches of subclasses."""
    return cls.__dict__[name].__get__


def provenance_lib(device: torch.device) -> types.SimpleNamespace:
    """The C functions the vault calls, bound before the submission exists."""
    base = torch._C.TensorBase
    python_keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | torch._C.DispatchKeySet(
        torch._C.DispatchKey.PythonTLSSnapshot
    )
    cuda_sync = getattr(torch._C, "_cuda_synchronize", None) if device.type == "cuda" else None
    try:  # TIRx's runtime (and the CuTe DSL's TVM FFI provider's): the zygote has imported it already
        ffi: Any = importlib.import_module("tvm_ffi")
    except ImportError:
        ffi = None
    # arguments whose conversion into a TVM FFI call runs no Python of the submission's
    plain: tuple[Any, ...] = (torch.Tensor, torch.dtype, torch.device, int, float, bool, complex, str, bytes)
    plain += (type(None),)
    if ffi is not None:
        names = ("Tensor", "Shape", "Device", "dtype", "String", "Bytes", "Function", "Module", "Object")
        plain += tuple(getattr(ffi, name) for name in names if isinstance(getattr(ffi, name, None), type))
    # TVM's own tensors (tvm.runtime.from_dlpack, tvm.runtime.empty): watched as torch views of their memory
    ffi_tensors = (ffi.core.Tensor, getattr(sys.modules.get("tvm.runtime"), "Tensor", None)) if ffi is not None else ()
    return types.SimpleNamespace(
        Tensor=torch.Tensor, OpOverload=torch._ops.OpOverload, type=type, len=len, id=id, str=str, tuple=tuple,
        list=list, dict=dict, range=range, any=any, reversed=reversed, min=min, max=max, sorted=sorted,
        first=operator.itemgetter(0), BaseException=BaseException, zip=zip,
        u64=_struct.Struct("<Q"), f64=_struct.Struct("<d"), dumps=_control.dumps,
        exclude=torch._C._ExcludeDispatchKeyGuard, python_keys=python_keys,
        no_torch_function=torch._C.DisableTorchFunction,
        data_ptr=base.data_ptr, storage_offset=base.storage_offset, element_size=base.element_size,
        numel=base.numel, untyped_storage=base.untyped_storage, view=base.view, set_=base.set_, clone=base.clone,
        copy_=base.copy_,
        equal=torch._C._VariableFunctions.equal, reshape=base.reshape, take=base.take, to=base.to,
        tolist=base.tolist, size=base.size, nonzero=base.nonzero, ne=base.ne, int=int, zerotensor=base._is_zerotensor,
        stride=base.stride, version=_getter(base, "_version"), is_inference=base.is_inference,
        unique=torch._C._VariableFunctions._unique2, searchsorted=torch._C._VariableFunctions.searchsorted,
        zeros=torch._C._VariableFunctions.zeros, index_add=base.index_add, clamp=base.clamp, sum=base.sum,
        mul=base.mul, ge=base.ge, eq=base.eq, logical_and=base.logical_and, float=float, copy_share=COPY_SHARE,
        dtype_of=_getter(base, "dtype"), device_of=_getter(base, "device"), is_floating=base.is_floating_point,
        empty=torch._C._VariableFunctions.empty, uint8=torch.uint8, float32=torch.float32, float64=torch.float64,
        int64=torch.int64,
        cpu=torch.device("cpu"), cuda_sync=cuda_sync, fill_=base.fill_, nan=float("nan"), empty_ops=_EMPTY_OPS,
        sentinels={dtype: 0 for dtype in _INTEGER_DTYPES} | {torch.bool: False},
        # dtypes whose values are taken through a signed integer view of their width: fp8 (CUDA has no take for
        # it) and the unsigned 16/32/64-bit ones (no take kernel on either device)
        by_bits={torch.float8_e4m3fn: torch.int8, torch.float8_e5m2: torch.int8, torch.uint16: torch.int16,
                 torch.uint32: torch.int32, torch.uint64: torch.int64},
        bool=bool, u32=_struct.Struct("<I"), perf_counter=_perf_counter, cuda=device.type == "cuda",
        Event=_CudaEvent, record=_event_record, elapsed=_event_elapsed, current_stream=_current_stream,
        plain=frozenset(id(kind) for kind in plain),
        chandle=ffi.core.CObject.__chandle__ if ffi is not None else None,
        ffi_tensors=frozenset(id(kind) for kind in ffi_tensors if isinstance(kind, type)),
        dlpack=ffi.core.Tensor.__dlpack__ if ffi is not None else None, from_capsule=torch._C._from_dlpack,
    )  # fmt: skip


def provenance_vault(
    page: Any, lib: Any, layout: Any, positions: Sequence[Any], numels: Sequence[int], dlpack_sources: Any
) -> Any:
    """The vault (see the module docstring). ``positions[i]``: CPU int64 indices sampled in output i
    (outputs, then in-place inputs), of ``numels[i]`` elements. ``dlpack_sources``: CuTe DSL tensors
    (by id) and the torch tensors they were made from (weak references)."""
    nonce = -1
    audit = suppress = evidence = False
    tainted: list[Any] = []  # [start, end) address ranges holding data a DSL launch wrote, or derived from it
    prints: dict[Any, Any] = {}  # a tensor's view -> its samples when a DSL launch or a derived op last wrote it
    seen: dict[Any, bool] = {}
    records: list[Any] = []
    pending: list[Any] = []  # the launch in flight: (u8 view of a storage, its copy, its address); its tensors last
    launches = 0
    made: list[Any] = []  # [start, end) address ranges eager operators wrote during the call
    held: list[Any] = []  # (source, byte range, distinct values, their counts) of eager-made launch arguments
    eager_ops: dict[Any, int] = {}  # (operator, its tensors' sizes, its results' sizes) -> calls (``_eagerwork``)
    depth = 0  # gates entered and not yet left: only the outermost watches (a CuTe call passes several)
    originals: dict[int, Any] = {}  # id -> (a gate's original, its role: "function", "launch" or "outer")
    outer: list[Any] = []  # the arguments of the last genuine call above a launch (CuTe: still tensors there)
    sealed = False  # no original is registered once the submission may send requests
    functions: dict[int, Any] = {}  # id -> (a TIRx function the gate took from a module, its handle, its key, keepers)
    signatures: dict[Any, int] = {}  # a launch's kernel and argument shapes -> its number (in order of appearance)
    kept: list[Any] = []  # the objects whose id is part of a signature, kept alive so that no id is reused
    called: dict[int, bool] = {}  # the signatures launched in this call
    opened: list[int] = []  # the gates awaiting their AFTER: their roles (see the requests below)
    running = 0  # timed launches in flight (a CuTe launch passes nested gates: the outermost counted one times)
    clock = dsl_s = 0.0  # cpu: when the outermost timed launch started; the call's DSL time so far
    marks: list[Any] = []  # cuda: (start, end) events of the call's timed launches
    events: list[Any] = []  # cuda: every event made so far, reused call after call
    stream: list[Any] = []  # cuda: the current stream at the call's first timed launch
    used = 0  # cuda: events recorded in this call

    def storage_of(t: Any) -> int:
        return lib.data_ptr(t) - lib.storage_offset(t) * lib.element_size(t)

    def span(t: Any) -> tuple[int, int]:
        start = lib.data_ptr(t)
        if lib.numel(t) == 0:
            return start, start
        extent = 1
        for n, st in lib.zip(lib.size(t), lib.stride(t)):
            extent += (n - 1) * st
        return start, start + extent * lib.element_size(t)

    def is_tainted(t: Any) -> bool:
        lo, hi = span(t)
        return lib.any(a < hi and lo < b for a, b in tainted)

    def set_taint(lo: int, hi: int, derived: bool) -> None:
        """The range [lo, hi) now holds fresh data, derived from a DSL launch or not."""
        kept = [(a, b) for a, b in tainted if b <= lo or hi <= a or (a < lo and hi < b)]
        tainted[:] = kept
        if derived:
            tainted.append((lo, hi))

    def ffi_view(item: Any) -> Any:
        """A TVM tensor (of a type TVM itself makes) as a torch tensor over the same memory, through the
        base class's DLPack export (no method of the submission's runs); None where torch cannot take it."""
        try:
            return lib.from_capsule(lib.dlpack(item))
        except lib.BaseException:
            return None

    def tensors_in(obj: Any, out: list[Any]) -> list[Any]:
        stack = [obj]
        while stack:
            item = stack.pop()
            kind = lib.type(item)
            if kind is lib.Tensor:
                if lib.device_of(item).type in ("cpu", "cuda"):  # not meta tensors (Python kernels)
                    out.append(item)
            elif kind is lib.tuple or kind is lib.list:
                stack.extend(item)
            elif kind is lib.dict:
                stack.extend(item.values())
            elif lib.id(kind) in lib.ffi_tensors:
                view = ffi_view(item)
                if view is not None:
                    out.append(view)
            else:
                source = dlpack_sources.get(lib.id(item))
                if source is not None and source[0]() is item:
                    tensor = source[1]()
                    if tensor is not None:
                        out.append(tensor)
        return out

    def sample(t: Any, i: int) -> Any:
        """The values at output i's positions, or None for a tensor without readable memory (lazy zeros)."""
        if lib.zerotensor(t) or lib.device_of(t).type not in ("cpu", "cuda"):
            return None
        flat = lib.reshape(t, (-1,))
        where = lib.to(positions[i], lib.device_of(t))
        kind = lib.float64 if lib.is_floating(t) else lib.int64
        bits = lib.by_bits.get(lib.dtype_of(t))
        if bits is not None:  # see lib.by_bits: taken as integers of the same width, then read as what they are
            values = lib.view(lib.take(lib.view(flat, bits), where), lib.dtype_of(t))
            return lib.tolist(lib.to(lib.to(values, lib.cpu), kind))
        return lib.tolist(lib.to(lib.take(flat, where), lib.cpu, kind))

    def view_of(t: Any) -> Any:
        return (lib.data_ptr(t), lib.tuple(lib.size(t)), lib.tuple(lib.stride(t)), lib.str(lib.dtype_of(t)))

    def sizes(obj: Any) -> Any:
        """The sizes of the tensors in ``obj``, depth first in order (``_eagerwork._tensor_sizes``)."""
        found = []
        stack = [obj]
        while stack:
            item = stack.pop()
            kind = lib.type(item)
            if kind is lib.Tensor:
                found.append(lib.tuple(lib.size(item)))
            elif kind is lib.tuple or kind is lib.list:
                stack.extend(lib.reversed(item))
            elif kind is lib.dict:
                stack.extend(lib.reversed(lib.list(item.values())))
        return lib.tuple(found)

    def observe(t: Any, source: str) -> None:
        """Record samples of an untainted tensor of an output's size (each version once)."""
        n = lib.numel(t)
        for i in lib.range(lib.len(numels)):
            if numels[i] != n:
                continue
            # an inference tensor has no version counter: its samples are taken each time it is seen
            if not lib.is_inference(t):
                key = (view_of(t), lib.version(t), i)
                if key in seen:
                    continue
                seen[key] = True
            values = sample(t, i)
            if values is not None:
                records.append(("candidate", source, i, values))

    def fingerprint(t: Any) -> None:
        n = lib.numel(t)
        for i in lib.range(lib.len(numels)):
            if numels[i] == n:
                prints[(view_of(t), i)] = sample(t, i)

    def countable(t: Any) -> Any:
        """``t`` as a dtype ``unique`` takes: one-byte floats (fp8) widened to float32, which holds each exactly."""
        return lib.to(t, lib.float32) if lib.element_size(t) == 1 else t

    def hold(t: Any, source: str) -> None:
        """Keep the value counts of a floating tensor eager code made during the call (not an input, whose
        values a gather or a cache update legitimately copies), for the layout-free copy check."""
        lo, hi = span(t)
        if not lib.is_floating(t) or hi <= lo or not lib.any(a <= lo and hi <= b for a, b in made):
            return
        key = ("held", view_of(t), None if lib.is_inference(t) else lib.version(t))
        if key in seen:
            return
        seen[key] = True
        values, _, counts = lib.unique(lib.reshape(countable(t), (-1,)), True, False, True)
        held.append((source, lo, hi, values, counts))

    def copied(t: Any, i: int) -> None:
        """Record each held tensor that holds nearly all of output i's values with their multiplicity
        (padded, transposed, strided or gathered: the values, not the layout), with which sampled
        positions it covers."""
        lo, hi = span(t)
        distinct, where, need = lib.unique(lib.reshape(countable(t), (-1,)), True, True, True)
        wanted = lib.to(distinct, lib.float64)
        at = lib.take(where, lib.to(positions[i], lib.device_of(t)))
        for source, a, b, values, counts in held:
            if a < hi and lo < b:
                continue  # the output's own memory before a launch updated it in place
            cast, back, _ = lib.unique(countable(lib.to(values, lib.dtype_of(t))), True, True, False)
            have = lib.index_add(
                lib.zeros((lib.numel(cast),), dtype=lib.int64, device=lib.device_of(t)), 0, back, counts
            )
            cast = lib.to(cast, lib.float64)
            idx = lib.clamp(lib.searchsorted(cast, wanted), 0, lib.numel(cast) - 1)
            hit = lib.logical_and(lib.eq(lib.take(cast, idx), wanted), lib.ge(lib.take(have, idx), need))
            share = lib.float(lib.sum(lib.mul(need, hit))) / lib.numel(t)
            if share >= lib.copy_share:
                records.append(
                    ("contains", f"{source}, holding {share:.1%} of its values", i, lib.tolist(lib.take(hit, at)))
                )

    def before(args: Any) -> None:
        if depth > 1:  # inside a watched call: its arguments (C pointers by now) were copied aside already
            return
        tensors = tensors_in(args, [])
        spans: dict[int, list[Any]] = {}  # storage address -> its tensors' byte ranges (and one tensor of it)
        for t in tensors:
            if not is_tainted(t):
                observe(t, f"argument of DSL launch {launches} (before it ran)")
                hold(t, f"argument of DSL launch {launches} (before it ran)")
            lo, hi = span(t)
            if hi > lo:
                spans.setdefault(storage_of(t), []).append((lo, hi, t))
        for address, ranges in spans.items():
            # only the bytes the arguments span are copied aside (one arena holds every input of a call)
            whole = lib.empty((0,), dtype=lib.uint8, device=lib.device_of(ranges[0][2]))
            lib.set_(whole, lib.untyped_storage(ranges[0][2]))
            merged: list[Any] = []
            for lo, hi, _ in lib.sorted(ranges, key=lib.first):
                if merged and lo <= merged[-1][1]:
                    merged[-1][1] = lib.max(merged[-1][1], hi)
                else:
                    merged.append([lo, hi])
            for lo, hi in merged:
                view = whole[lo - address : hi - address]
                pending.append((view, lib.clone(view), lo))
        pending.append(("tensors", tensors, 0))

    def after() -> None:
        if depth > 0 or not pending:
            return
        if lib.cuda_sync is not None:
            lib.cuda_sync()
        tensors = pending.pop()[1]
        for whole, copy, address in pending:
            changed = lib.nonzero(lib.ne(whole, copy))
            if lib.numel(changed):  # the bytes from the first to the last the launch changed
                set_taint(address + lib.int(changed[0]), address + lib.int(changed[-1]) + 1, True)
            # the same copy either way: a suppressed launch must not take longer to come back than a real one
            if suppress:
                lib.copy_(whole, copy)
            else:
                lib.copy_(copy, whole)
        pending.clear()
        for t in tensors:
            if is_tainted(t):
                fingerprint(t)

    def op(func: Any, name: Any, args: Any, kwargs: Any, out: Any) -> None:
        if not audit or lib.type(func) is not lib.OpOverload or lib.type(name) is not lib.str:
            return
        if name in lib.empty_ops:  # memory a DSL launch may fill later holds the sentinel until then
            for t in tensors_in(out, []):
                lib.fill_(t, lib.sentinels.get(lib.dtype_of(t), lib.nan))
        key = (name, sizes((args, kwargs)), sizes(out))  # the eager work done, priced by the verifier
        eager_ops[key] = eager_ops.get(key, 0) + 1
        inputs = tensors_in((args, kwargs), [])
        derived = lib.any(is_tainted(t) for t in inputs)
        for t in inputs:
            if not is_tainted(t):
                observe(t, f"input of eager {name}")
        parts = name.split(".")  # namespace, operator, overload: "aten.copy_.default", "aten.add.out"
        writes = lib.len(parts) > 2 and (parts[1].endswith("_") or parts[2].startswith("out"))
        for t in tensors_in(out, []):
            lo, hi = span(t)
            # made by eager code: fresh memory, or memory an in-place or out= operator wrote; never a view of
            # its input (a reshape of a large input holds, by value, every value of a low-precision output)
            if writes or not lib.any(storage_of(u) == storage_of(t) for u in inputs):
                made.append((lo, hi))
            set_taint(lo, hi, derived or (is_tainted(t) and lib.any(u is t for u in inputs)))
            if is_tainted(t):
                fingerprint(t)
            else:
                observe(t, f"output of eager {name}")

    def launch_signature(original: Any, args: Any) -> Any:
        """The signature of a genuine launch (None for anything else: see the module docstring): its kernel
        (a TIRx function's module and name; a CuTe executor or compiled function) and its arguments'
        shapes and element sizes (other arguments: their type; a value such as a scale or a count drawn
        from the data may differ from call to call). One pass over the arguments, on evidence calls and
        draws only; on a scored call a launch of a genuine kernel is counted (``True``), whatever its
        arguments: they matter to the clock's window and the signature, neither of which a scored call has."""
        entry = originals.get(lib.id(original))
        if entry is None or entry[0] is not original or entry[1] == "outer":
            return None
        positional = args[0]
        target = positional[0] if positional else None
        tirx = entry[1] == "function"
        if tirx:  # a function the gate registered, its handle unchanged, plain arguments only
            known = functions.get(lib.id(target))
            if args[1] or known is None or known[0] is not target or lib.chandle(target) != known[1]:
                return None
            if not evidence:  # its arguments matter to the clock's window and the signature only
                return True
            parts = [known[2]]
        elif not evidence:
            return True
        else:
            parts = [(lib.id(original), lib.id(target))]
            if outer:  # a CuTe launch: its arguments as the call above it had them (tensors, not pointers)
                positional = outer[0][0]
                outer.clear()
        for arg in positional[1:]:
            kind = lib.type(arg)
            if lib.id(kind) in lib.ffi_tensors:  # TVM's tensor: described as the torch view of its memory
                arg = ffi_view(arg)
                kind = lib.type(arg)
                if kind is not lib.Tensor:
                    return None
            if kind is not lib.Tensor and not tirx:
                source = dlpack_sources.get(lib.id(arg))
                if source is not None and source[0]() is arg:  # a CuTe tensor made from a torch tensor
                    arg = source[1]()
                    kind = lib.type(arg)
            if kind is lib.Tensor:
                parts.append((lib.size(arg), lib.element_size(arg)))  # torch.Size: a tuple, hashed in C
            elif tirx and lib.id(kind) not in lib.plain:  # ids of types: no __eq__ of the submission's runs
                return None
            else:
                parts.append(lib.id(kind))
        return lib.tuple(parts)

    def note(key: Any, original: Any, target: Any) -> None:
        number = signatures.get(key)
        if number is None:
            number = signatures[key] = lib.len(signatures)
            kept.append((original, target))  # their ids are in the key: never reused while it is known
        called[number] = True

    def event() -> Any:
        nonlocal used
        if used == lib.len(events):
            events.append(lib.Event(enable_timing=True))
        made = events[used]
        used += 1
        if not stream:
            stream.append(lib.current_stream())
        lib.record(made, stream[0])
        return made

    def launch_started() -> None:
        nonlocal clock
        if lib.cuda:
            marks.append((event(), None))
        else:
            clock = lib.perf_counter()

    def launch_ended() -> None:
        nonlocal dsl_s
        if lib.cuda:
            marks[-1] = (marks[-1][0], event())
        else:
            dsl_s += lib.perf_counter() - clock

    def end_of_call() -> None:
        total = dsl_s * 1e3
        if lib.cuda:  # the timer synchronised the device: every recorded event is complete
            total = 0.0
            for start, end in marks:
                if end is not None:
                    total += lib.elapsed(start, end)
        lib.f64.pack_into(page, layout.DSL_MS, total)
        offset, capacity = layout.SIGNATURES
        numbers = lib.list(called)[:capacity]
        lib.u64.pack_into(page, offset, lib.len(numbers))
        for k in lib.range(lib.len(numbers)):
            lib.u32.pack_into(page, offset + 8 + 4 * k, numbers[k])
        lib.u64.pack_into(page, layout.DSL_ACK, nonce)
        outer.clear()  # the submission's tensors are not kept past its call

    def result(outputs: Any) -> None:
        if not audit:
            return
        for i in lib.range(lib.min(lib.len(outputs), lib.len(numels))):
            t = outputs[i]
            if lib.type(t) is not lib.Tensor or lib.numel(t) != numels[i]:
                continue
            values = sample(t, i)
            if values is None:
                continue
            known = prints.get((view_of(t), i))
            derived = is_tainted(t) and (known is None or known == values)
            if derived and lib.is_floating(t):
                copied(t, i)
            records.append(
                (
                    "result",
                    "returned output" if derived else "returned output (not from a DSL launch)",
                    i,
                    values,
                    derived,
                )
            )
        records.append(("eager_ops", lib.list(eager_ops.items())))
        blob = lib.dumps(records)
        offset, capacity = layout.RECORDS
        if lib.len(blob) + 8 <= capacity:
            page[offset + 8 : offset + 8 + lib.len(blob)] = blob
            lib.u64.pack_into(page, offset, lib.len(blob))
            lib.u64.pack_into(page, layout.FLAG, nonce)

    reply: Any = None
    while True:
        request = yield reply
        reply = None
        try:
            current = lib.u64.unpack_from(page, layout.NONCE)[0]
            if current != nonce:
                nonce = current
                audit = page[layout.AUDIT] == 1
                evidence = audit or page[layout.EVIDENCE] == 1
                suppress = page[layout.SUPPRESS] == 1
                tainted.clear()
                prints.clear()
                seen.clear()
                records.clear()
                pending.clear()
                made.clear()
                held.clear()
                eager_ops.clear()
                opened.clear()
                marks.clear()
                called.clear()
                outer.clear()
                stream.clear()
                launches = depth = running = used = 0
                dsl_s = 0.0
            kind = request[0]
            role = 0  # of a BEFORE: 0 watched only on a correctness draw, 1 a timed launch, 2 a call above one
            if kind == 0:  # the harness registers a gate's original, then seals (None)
                if not sealed and request[1] is None:
                    sealed = True
                elif not sealed:
                    originals[lib.id(request[1])] = (request[1], request[2])
            elif kind == 6:  # the TIRx gate took function (1) named (4) from module (3) (only its hook sends this)
                fn, module, name = request[1], request[3], request[4]
                key = ("tirx", lib.chandle(module), name if lib.type(name) is lib.str else None)
                functions[lib.id(fn)] = (fn, lib.chandle(fn), key, (request[2], module))
            elif kind == 1 and request[2] and (key := launch_signature(request[3], request[1])) is not None:
                launches += 1
                lib.u64.pack_into(page, layout.LAUNCHES, lib.u64.unpack_from(page, layout.LAUNCHES)[0] + 1)
                if evidence:  # BEFORE a counted launch of an evidence call (or a draw): timed, its signature noted
                    role = 1
                    note(key, request[3], request[1][0][0] if request[1][0] else None)
            elif kind == 1 and evidence and not request[2] and not running:  # BEFORE a call above a launch
                entry = originals.get(lib.id(request[3]))
                if entry is not None and entry[0] is request[3] and entry[1] == "outer":
                    role = 2
                    outer[:] = [request[1]]
            elif kind == 2 and opened:  # AFTER: a timed launch's time ends first
                ended = opened.pop()
                if ended == 1:
                    running -= 1
                    if running == 0:
                        launch_ended()
                elif ended == 2:
                    outer.clear()  # a launch's description is the call's it runs inside, never a stale one
            elif kind == 5:  # END of the call (the harness, once the timer stopped)
                end_of_call()
            if audit:  # a correctness draw: tensors are read, with torch's Python dispatch out of the way
                with lib.exclude(lib.python_keys), lib.no_torch_function():
                    if kind == 1:
                        depth += 1
                        before(request[1])
                    elif kind == 2:  # AFTER
                        depth = lib.max(depth - 1, 0)
                        after()
                    elif kind == 3:  # OP
                        op(request[1], request[2], request[3], request[4], request[5])
                    elif kind == 4:  # RESULT
                        result(request[1])
            if kind == 1 and (audit or role):  # the gate reports back after the call; a launch's time starts last
                reply = True
                opened.append(role)
                if role == 1:
                    if running == 0:
                        launch_started()
                    running += 1
        except lib.BaseException as exc:  # a fault of ours goes back to the hook, without our frame
            exc.__traceback__ = None
            exc.__context__ = None
            pending.clear()
            opened.clear()
            depth = running = 0
            # and fails the draw closed: the verifier finds it among the records, whatever the submission
            # does with the exception
            records.append(("fault", lib.str(lib.type(exc).__name__) + ": " + lib.str(exc)))
            reply = exc
        request = None  # the caller holds its objects: dropping them here is never the last reference


def page_layout() -> types.SimpleNamespace:
    """The control page's offsets, for the vault (which has no globals)."""
    return types.SimpleNamespace(
        NONCE=_control.NONCE[0], LAUNCHES=_control.LAUNCHES[0], AUDIT=_control.AUDIT[0],
        SUPPRESS=_control.SUPPRESS[0], EVIDENCE=_control.EVIDENCE[0], FLAG=_control.RECORDS_FLAG[0],
        RECORDS=_control.RECORDS,
        DSL_MS=_control.DSL_MS[0], DSL_ACK=_control.DSL_ACK[0], SIGNATURES=_control.SIGNATURES,
    )  # fmt: skip


def gate(*args: Any, _send: Any, _original: Any, _count: bool, **kwargs: Any) -> Any:
    """A DSL launch: counted, timed and, on a correctness draw, watched (see the module docstring). The
    original goes with the request: a caller passing its own ``_original`` is neither counted nor timed."""
    answer = _send((1, (args, kwargs), _count, _original))  # BEFORE (hooks have no globals: kinds are literals)
    if answer is not None and answer is not True:
        raise answer
    if answer is None:  # a timed call: nothing to watch after the launch
        return _original(*args, **kwargs)
    try:
        return _original(*args, **kwargs)
    finally:
        failed = _send((2,))  # AFTER
        if failed is not None:
            raise failed


def dispatch(
    self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None, *, _send: Any, _str: Any, _push: Any,
    _pop: Any, _backend: Any
) -> Any:  # fmt: skip
    """The provenance mode's ``__torch_dispatch__``: run the operator, then report it (its name is
    made here, outside the vault: an operator's ``__str__`` is Python a submission could replace).

    An operator outside torch's own namespaces (a custom operator, ``torch.library.custom_op``, whose kernel
    may be the submission's Python) is no single eager operator: it runs below the Python dispatch key with
    this mode pushed again, so that what it does inside (allocations, eager operators, DSL launches) is
    watched one by one, and is not reported itself."""
    if func._schema.name.split("::")[0] not in ("aten", "prims"):
        _push(self)
        try:
            return func.redispatch(_backend, *args, **(kwargs or {}))
        finally:
            _pop(None)
    out = func(*args, **(kwargs or {}))
    failed = _send((3, func, _str(func), args, kwargs, out))  # OP
    if failed is not None:
        raise failed
    return out


def report_end(*, _send: Any) -> None:
    """The harness, once the timer stopped the call: the vault writes the call's DSL time."""
    failed = _send((5,))  # END
    if failed is not None:
        raise failed


def report_result(outputs: Any, *, _send: Any) -> None:
    failed = _send((4, outputs))  # RESULT
    if failed is not None:
        raise failed
