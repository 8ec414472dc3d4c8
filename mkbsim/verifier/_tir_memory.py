"""What memory a TIRx kernel may reach: its tensor arguments' and its own allocations', nothing else (red team
rt18 F1: a kernel that builds a pointer from an integer, indexes far past a one-element argument or ``memcpy``s
through ``T.address_of(anchor[delta])`` moves bytes to and from memory no argument covers, where the memory rule
and the crossing counts never look).

Checked on the TIR a build is given, before TVM lowers it (``_dsl._built_module``); TVM's own lowering adds its
pointers, struct reads and ``memcpy``/``memset`` later, so none of these is refused in what it makes.

- Every target: no pointer made from or turned into an integer (``T.reinterpret``/``T.Cast`` to or from a
  handle), no ``memcpy``/``memset``/``memmove`` named by the kernel (an integer address passed by value reaches
  any memory without a pointer type) and no LLVM intrinsic called by name (``T.call_llvm_intrin``, or an extern
  call named ``llvm.*``, which LLVM takes for the intrinsic: ``llvm.memcpy...``).
- CPU (llvm) functions, whose code runs in this process: no pointer at all (no handle-typed parameter, value,
  call or binding: ``T.address_of``, ``tvm_access_ptr``, a raw pointer argument), no buffer declared over other
  memory (``T.decl_buffer``, ``Buffer.view``: its shape is not the memory's), no vector index, no buffer region
  (a tile primitive's, lowered later to loops from the region's corner); and every buffer
  index not provably inside its dimension is clamped to it (``_clamped``), so a computed offset stays inside the
  buffer whatever its value. A buffer argument's shape and strides are the tensor's (TVM checks them on entry).
  And every allocation it makes (``T.alloc_buffer`` of any scope, ``T.alloc_local``/``alloc_scalar``, a data-less
  ``T.decl_buffer``, a block's ``alloc_buffers``) is filled with the erase sentinel where it is made, before
  anything can read it (``filled``; red team rt18 F4): TVM's workspace pool hands back the same block every call,
  so without it an allocation read before it is written carries in whatever another launch, call or raw writer
  left there. A buffer's shape is memory it owns (red team rt19 F1, F3): a clamped access of a buffer that may be
  empty runs only if every dimension is positive (torch lets a zero-element tensor have any sizes over a NULL
  pointer), every buffer's size (an allocation's bytes, an argument's elements) is asserted to fit its index type
  and ``ADDRESS_SPACE`` (``sized``; TVM computes sizes and offsets in the extents' type, which wraps), and an
  allocation may not declare strides or an element offset.
- CUDA functions: device code (and the address arithmetic its PTX intrinsics need) is left to the rules above.
"""

from __future__ import annotations

from typing import Any

#: Functions a kernel may not name: they take addresses, and an address is an integer to them.
MEMORY_FUNCTIONS = ("memcpy", "memset", "memmove", "__bzero", "bzero", "mempcpy")
#: Ops through which a kernel names an outside function or intrinsic (the first argument is its name).
EXTERN_OPS = ("tirx.call_extern", "tirx.call_pure_extern")
INTRINSIC_OPS = ("tirx.call_llvm_intrin", "tirx.call_llvm_pure_intrin")
#: Targets whose code runs on this machine's CPU.
CPU_KINDS = ("llvm", "c")
#: The most bytes a buffer may span (``sized``): x86-64's and AArch64's user address space (47 bits), so no
#: buffer that really exists is larger.
ADDRESS_SPACE = 1 << 47


def refused_reach(
    func: Any, cpu: bool, *, _walk: Any, _type: Any, _getattr: Any, _Call: Any, _Cast: Any, _Pointer: Any,
    _DeclBuffer: Any, _vector: Any, _regions: Any, _String: Any, _memory: Any, _extern: Any, _intrinsic: Any,
    _Alloc: Any, _SBlock: Any, _IntImm: Any, _len: Any
) -> list[str]:  # fmt: skip
    """What in the PrimFunc ``func`` reaches memory outside its buffers (empty: nothing); ``cpu``: it runs on
    this machine's CPU."""
    found: dict[str, None] = {}

    def pointer(value: Any) -> bool:
        return _type(_getattr(value, "ty", None)) is _Pointer

    def placed(buffer: Any) -> bool:
        """An allocation laid out by the kernel: TVM offsets its elements by ``elem_offset`` (and by ``strides``,
        where its lowering takes them), past the memory it allocates, which no clamp of an index sees."""
        offset = buffer.ty.elem_offset
        return _len(buffer.ty.strides) > 0 or not (_type(offset) is _IntImm and offset.value == 0)

    def visit(node: Any) -> None:
        kind = _type(node)
        if cpu and (
            (kind is _Alloc and placed(node.buffer))
            or (kind is _SBlock and [b for b in node.alloc_buffers if placed(b)])
        ):
            found["an allocation with strides or an element offset (T.alloc_buffer(strides=, elem_offset=))"] = None
        if kind is _Call:
            name = _getattr(node.op, "name", "")
            if name == "tirx.reinterpret" and (pointer(node) or [a for a in node.args if pointer(a)]):
                found["a pointer made from an integer or an integer from a pointer (T.reinterpret)"] = None
            elif name in _extern and node.args and _type(node.args[0]) is _String:
                if node.args[0].value in _memory:
                    found[f"a call of {node.args[0].value!r} (an address is any integer to it)"] = None
                elif node.args[0].value.startswith("llvm."):  # LLVM takes the name for its intrinsic
                    found["an LLVM intrinsic called by name"] = None
            elif name in _intrinsic:
                found["an LLVM intrinsic called by name"] = None
        elif kind is _Cast and (pointer(node) or pointer(node.value)):
            found["a pointer cast to or from an integer (T.Cast)"] = None
        elif cpu and kind is _Pointer:
            found["a pointer (a handle-typed parameter, value or call: T.address_of, tvm_access_ptr...)"] = None
        elif cpu and kind is _DeclBuffer:
            found["a buffer declared over other memory (T.decl_buffer, Buffer.view)"] = None
        elif cpu and kind in _vector:
            found["a vector index (T.ramp, T.broadcast: write a T.vectorized loop)"] = None
        elif cpu and kind in _regions:  # lowered to loops from the region's corner, which no clamp sees
            found["a buffer region (a tile primitive over a region: write the loops)"] = None

    _walk(func, visit, order="pre")
    return [*found]


def clamped(
    func: Any, *, _mutate: Any, _equal: Any, _type: Any, _For: Any, _Load: Any, _Store: Any, _IntImm: Any,
    _Var: Any, _load: Any, _store: Any, _min: Any, _max: Any, _cast: Any, _const: Any, _zip: Any,
    _GT: Any, _And: Any, _if_then_else: Any, _IfThenElse: Any
) -> Any:  # fmt: skip
    """``func`` with every buffer index that is not provably inside its dimension clamped into it: a loop
    variable over ``range(0, extent)`` with the dimension's extent, or a constant in range, is left as it is
    (an honest kernel's indices mostly), anything else (a computed or data-dependent index) becomes
    ``min(max(index, 0), max(extent - 1, 0))``: inside the dimension (at 0 if it is empty).
    And such an access of a buffer that may be empty (a dimension not a positive constant) happens only if
    every dimension is positive (``nonempty``; a load reads 0 otherwise, a store writes nothing): an empty
    buffer owns no memory, whatever its other dimensions and its data pointer (red team rt19 F1: torch lets a
    zero-element tensor have any sizes and strides over a NULL pointer, and a dimension of 2**62 elements from
    address 0 was all of memory). An access with every index provably inside needs no guard: the loops it is in
    ran, so every dimension is positive."""
    ranges: dict[Any, Any] = {}  # a loop variable: its loop's extent (the loop starts at 0)

    def inside(index: Any, extent: Any) -> bool:
        if _type(index) is _IntImm:
            return _type(extent) is _IntImm and 0 <= index.value < extent.value
        bound = ranges.get(index) if _type(index) is _Var else None
        if bound is None:
            return False
        if _type(bound) is _IntImm and _type(extent) is _IntImm:
            return bound.value <= extent.value
        return _equal(bound, extent)

    def bounded(indices: Any, shape: Any) -> list[Any] | None:
        """``indices`` clamped into ``shape``; None where each is provably inside already."""
        if not [1 for index, extent in _zip(indices, shape) if not inside(index, extent)]:
            return None
        out = []
        for index, extent in _zip(indices, shape):
            if inside(index, extent):
                out.append(index)
            else:
                # a max and a min (the extent is loop-invariant); not one unsigned min, which TVM folds to an unsigned
                # constant of -1 where it peels a loop's first step out of a branch that never runs there
                # (``b[i - 1]`` under ``if i > 0``: an honest kernel failed to compile, red team rt48)
                dtype = index.ty.dtype
                last = _max(_cast(dtype, extent) - _const(1, dtype), _const(0, dtype))
                out.append(_min(_max(index, _const(0, dtype)), last))
        return out

    def on_for(node: Any, mutator: Any) -> Any:
        # from 0 upwards: a step TVM may take (the loop stops below min + extent) must be a positive constant
        step = node.step is None or (_type(node.step) is _IntImm and node.step.value > 0)
        if step and _type(node.min) is _IntImm and node.min.value == 0:
            ranges[node.loop_var] = node.extent
        try:
            return mutator.default_mutate(node)
        finally:
            ranges.pop(node.loop_var, None)

    def nonempty(shape: Any) -> Any:
        """The condition that a buffer of ``shape`` has elements; None where it always has (every dimension a
        positive constant). Dimension by dimension: a product of the extents could wrap."""
        condition = None
        for extent in shape:
            if _type(extent) is _IntImm:
                if extent.value > 0:
                    continue
                return _const(False, "bool")
            positive = _GT(extent, _const(0, extent.ty.dtype))
            condition = positive if condition is None else _And(condition, positive)
        return condition

    def on_load(node: Any, mutator: Any) -> Any:
        indices = [mutator.mutate(index) for index in node.indices]
        shape = node.source.ty.shape
        bounds = bounded(indices, shape)
        if bounds is None:
            return _load(node.source, indices)
        load, condition = _load(node.source, bounds), nonempty(shape)
        return load if condition is None else _if_then_else(condition, load, _const(0, node.ty.dtype))

    def on_store(node: Any, mutator: Any) -> Any:
        indices = [mutator.mutate(index) for index in node.indices]
        shape = node.buffer.ty.shape
        bounds = bounded(indices, shape)
        if bounds is None:
            return _store(node.buffer, mutator.mutate(node.value), indices)
        store, condition = _store(node.buffer, mutator.mutate(node.value), bounds), nonempty(shape)
        return store if condition is None else _IfThenElse(condition, store, None)

    return _mutate(func, [(_For, on_for), (_Load, on_load), (_Store, on_store)])


def filled(
    func: Any, *, _mutate: Any, _type: Any, _Seq: Any, _Alloc: Any, _SBlock: Any, _seq: Any, _block: Any,
    _for: Any, _serial: Any, _var: Any, _store: Any, _const: Any, _reinterpret: Any, _broadcast: Any, _zip: Any,
    _IntImm: Any, _Store: Any, _Load: Any, _walk: Any, _byte: int
) -> Any:  # fmt: skip
    """``func`` with every allocation it makes filled with the erase sentinel (``_byte`` in every byte of a
    floating element: NaN; integers 0, bool False) where it is made, before anything in its scope runs: an
    ``AllocBuffer`` (``T.alloc_buffer`` of any scope, ``T.alloc_local``, ``T.alloc_scalar``, ``T.decl_buffer``
    with no data) is followed by its fill, each time it is reached (in a loop, every iteration), unless it has one
    element and the next statement writes it without reading it (``written``); a block's ``alloc_buffers``
    (``T.sblock_alloc_buffer``) are filled at the start of its body and of its init. An allocation starts with
    whatever the allocator hands back, and TVM's workspace pool hands back the same block every call: without the
    fill it carries data in from outside the launch (red team rt18 F4). The fill's indices are loop variables over
    the buffer's own extents, so ``clamped`` leaves them as they are."""

    def sentinel(dtype: Any) -> Any:
        element = dtype.with_lanes(1)
        if dtype.is_float:
            bits = dtype.bits
            whole = (bits + 7) // 8 * 8  # ``_byte`` in each of its bytes (the low bits of one for float4)
            value = _reinterpret(element, _const(_byte * ((1 << whole) - 1) // 255 & ((1 << bits) - 1), f"uint{bits}"))
        else:
            value = _const(0, element)  # False for bool
        return value if dtype.lanes == 1 else _broadcast(value, dtype.lanes)

    def unit(extent: Any) -> bool:
        return _type(extent) is _IntImm and extent.value == 1

    def fill(buffer: Any) -> Any:
        shape = [*buffer.ty.shape]
        one = [unit(extent) for extent in shape]  # index 0, no loop
        indices = [_const(0, e.ty.dtype) if o else _var("fill", e.ty.dtype) for e, o in _zip(shape, one)]
        stmt = _store(buffer, sentinel(buffer.ty.dtype.dtype), indices)
        for index, extent, constant in _zip(indices[::-1], shape[::-1], one[::-1]):
            stmt = stmt if constant else _for(index, _const(0, extent.ty.dtype), extent, _serial, stmt)
        return stmt

    def written(buffer: Any, stmt: Any) -> bool:
        """``stmt`` writes the whole of ``buffer``, one element (any index of it is clamped to 0), from a value
        that does not read it: a TIRx scalar assignment (``v = expr``). Its fill would be a second store, which
        LLVM cannot drop when TVM put the scalar in its workspace, and which stops the loop's vectorisation."""
        if _type(stmt) is not _Store or not stmt.buffer.same_as(buffer) or [e for e in buffer.ty.shape if not unit(e)]:
            return False
        reads: list[Any] = []

        def read(load: Any) -> None:
            if load.source.same_as(buffer):
                reads.append(load)

        _walk(stmt.value, (_Load, read))
        return not reads

    def on_seq(node: Any, mutator: Any) -> Any:
        seq = [*node.seq]
        out: list[Any] = []
        for stmt, following in _zip(seq, [*seq[1:], None]):  # an allocation's scope is the rest of its sequence
            if _type(stmt) is not _Alloc:
                out.append(mutator.mutate(stmt))
            else:
                out += [stmt] if written(stmt.buffer, following) else [stmt, fill(stmt.buffer)]
        return _seq(out)

    def on_alloc(node: Any, mutator: Any) -> Any:  # alone as a body (nothing follows it): filled all the same
        return _seq([node, fill(node.buffer)])

    def on_block(node: Any, mutator: Any) -> Any:
        if not node.alloc_buffers:
            return mutator.default_mutate(node)

        def first(stmt: Any) -> Any:  # a block's allocations are made when it runs; init (if any) runs first
            return _seq([*[fill(buffer) for buffer in node.alloc_buffers], mutator.mutate(stmt)])

        init = None if node.init is None else first(node.init)
        return _block(
            node.iter_vars, node.reads, node.writes, node.name_hint, first(node.body), init, node.alloc_buffers,
            node.match_buffers, node.annotations,
        )  # fmt: skip

    return _mutate(func, [(_Seq, on_seq), (_Alloc, on_alloc), (_SBlock, on_block)])


def sized(
    func: Any, *, _mutate: Any, _type: Any, _Seq: Any, _Alloc: Any, _SBlock: Any, _seq: Any, _block: Any,
    _BufferType: Any, _IntImm: Any, _assert: Any, _String: Any, _const: Any, _cast: Any, _Max: Any, _LE: Any,
    _floordiv: Any, _mul: Any, _max: Any, _min: Any, _limit: int, _add: Any, _sub: Any, _GE: Any, _zip: Any
) -> tuple[Any, list[str]]:  # fmt: skip
    """``func`` with a check that each of its buffers is no larger than its index type and the address space
    (``_limit`` bytes) can hold, and what in it never is (empty: nothing). A buffer's shape is what ``clamped``
    keeps indices inside, and TVM computes sizes and offsets from it in the extents' own integer type, which
    wraps: ``T.alloc_buffer((a, b), "int64")`` with a = 64, b = 2**58 + 1 allocated 512 bytes (red team rt19
    F3), a TVM view or ``tvm.runtime.empty`` of shape (2**62, 4) is 16 or 0 bytes, and an int32 offset into a
    tensor of 2**31 elements or more is negative. So the product of an allocation's extents times its element
    size (the bytes TVM allocates), and of a tensor argument's extents (its offsets, and TVM's view size over
    it), must not exceed the limit: checked here where every extent is a constant (else refused), otherwise by
    assertions before anything touches the buffer (an allocation's right after it is made, ahead of its fill;
    an argument's at the function's start), each factor against the limit over the product so far, so that no
    product computed overflows. A launch failing one raises. An empty dimension counts as one (the size
    checked is never below the buffer's). A tensor argument declared with strides is reached at the sum of its
    indices times its strides, in the strides' integer type, which the extents' product does not bound (a view of two
    rows 2**31 elements apart has an int32 offset of -2**31 for its second row): its strides must not be negative and
    its last element's offset, 1 + the sum of (extent - 1) * stride, must fit the same limit, each term checked against
    what is left of it before it is added."""
    refused: dict[str, None] = {}
    too_large = "larger than its index type or the address space can hold"

    def checks(buffer: Any, unit: int) -> list[Any]:
        shape = [*buffer.ty.shape]
        limit = _min([_limit, *[(1 << (extent.ty.dtype.bits - 1)) - 1 for extent in shape]])
        known = unit
        for extent in shape:
            if _type(extent) is _IntImm:
                known *= _max(extent.value, 1)
        if known > limit:
            refused[f"a buffer {too_large} ({buffer.name})"] = None
            return []
        message = [_String(f"mkbsim verifier: the buffer {buffer.name} is {too_large}")]
        out, product = [], _const(known, "int64")
        for extent in shape:
            if _type(extent) is not _IntImm:
                factor = _Max(_cast("int64", extent), _const(1, "int64"))
                below = _LE(factor, _floordiv(_const(limit, "int64"), product))
                # TVM's Python constructor names its parameters (kind, condition), its native one takes them in
                # the other order: passed as the native one takes them
                out.append(_assert(below, _String("RuntimeError"), message))
                product = _mul(product, factor)
        return out

    def reach(buffer: Any) -> list[Any]:  # a strided argument's offsets (see above)
        strides = [*buffer.ty.strides]
        if not strides:
            return []
        types = [*buffer.ty.shape, *strides]
        limit = _min([_limit, *[(1 << (value.ty.dtype.bits - 1)) - 1 for value in types]])
        message = [_String(f"mkbsim verifier: the buffer {buffer.name}'s strides reach {too_large}")]
        out, reached = [], _const(1, "int64")
        for extent, stride in _zip(buffer.ty.shape, strides):
            step = _cast("int64", stride)
            span = _sub(_Max(_cast("int64", extent), _const(1, "int64")), _const(1, "int64"))
            out.append(_assert(_GE(step, _const(0, "int64")), _String("RuntimeError"), message))
            room = _floordiv(_sub(_const(limit, "int64"), reached), _Max(step, _const(1, "int64")))
            out.append(_assert(_LE(span, room), _String("RuntimeError"), message))
            reached = _add(reached, _mul(span, step))
        return out

    def allocated(buffer: Any) -> list[Any]:
        dtype = buffer.ty.dtype.dtype
        return checks(buffer, (dtype.bits * dtype.lanes + 7) // 8)  # bytes

    def on_seq(node: Any, mutator: Any) -> Any:
        out: list[Any] = []
        for stmt in node.seq:
            out += [stmt, *allocated(stmt.buffer)] if _type(stmt) is _Alloc else [mutator.mutate(stmt)]
        return _seq(out)

    def on_alloc(node: Any, mutator: Any) -> Any:
        return _seq([node, *allocated(node.buffer)])

    def on_block(node: Any, mutator: Any) -> Any:
        if not node.alloc_buffers:
            return mutator.default_mutate(node)
        ahead = [check for buffer in node.alloc_buffers for check in allocated(buffer)]

        def first(stmt: Any) -> Any:  # ahead of the allocations' fills (``filled``): init runs first
            return _seq([*ahead, mutator.mutate(stmt)])

        init = None if node.init is None else first(node.init)
        return _block(
            node.iter_vars, node.reads, node.writes, node.name_hint, first(node.body), init, node.alloc_buffers,
            node.match_buffers, node.annotations,
        )  # fmt: skip

    out = _mutate(func, [(_Seq, on_seq), (_Alloc, on_alloc), (_SBlock, on_block)])
    arguments = [
        check for param in out.params if _type(param.ty) is _BufferType for check in (*checks(param, 1), *reach(param))
    ]
    return (out.with_body(_seq([*arguments, out.body])) if arguments else out), [*refused]


def checked(
    mod: Any, target: Any, *, _refused: Any, _clamped: Any, _filled: Any, _sized: Any, _mutate: Any, _type: Any,
    _PrimFunc: Any, _Target: Any, _current: Any, _cpu: Any
) -> tuple[Any, list[str]]:  # fmt: skip
    """``mod`` (a PrimFunc or an IRModule, built for ``target`` as ``tvm.tirx.build`` is) with its CPU functions'
    allocations filled (``filled``), buffers' sizes checked (``sized``, after the fill: its assertions go ahead
    of it) and indices clamped, and what in it reaches memory outside its buffers (``refused_reach``, and a
    buffer ``sized`` finds too large). A function runs where its own ``target`` attribute says, or else where the
    build's target (or the current one, or llvm) does."""
    default = _Target(target) if target is not None else _current()
    default_kind = default.kind.name if default is not None else "llvm"
    refused: dict[str, None] = {}

    def on_func(func: Any, mutator: Any = None) -> Any:
        given = func.attrs.get("target", None) if func.attrs is not None else None
        cpu = (given.kind.name if given is not None else default_kind) in _cpu
        reasons = _refused(func, cpu)
        bounded = func
        if cpu and not reasons:
            bounded, reasons = _sized(_filled(func))
        for reason in reasons:
            refused[reason] = None
        # a refused function is not built: left as it is
        return _clamped(bounded) if cpu and not reasons else func

    result = on_func(mod) if _type(mod) is _PrimFunc else _mutate(mod, [(_PrimFunc, on_func)])
    return result, [*refused]
