"""A gated TIRx build reaches only its buffers' memory (``_tir_memory``, red team rt18 F1): what it refuses, on
which target, and the CPU's index clamp, on the TIR a build is given (the whole gate: the adversarial cases
pointer_from_integer_numpy_p36, index_past_anchor_numpy_p36, memcpy_address_of_anchor_p36)."""

from __future__ import annotations

from typing import Any

import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")
tvm_ffi = pytest.importorskip("tvm_ffi")
from tvm.script import tirx as T  # noqa: E402

from mkbsim.verifier import _dsl  # noqa: E402
from mkbsim.verifier._vault import Registry  # noqa: E402

CUDA = {"kind": "cuda", "arch": "sm_90a"}
_P64 = tvm.ir.PointerType(tvm.ir.PrimType("int64"))


@pytest.fixture(scope="module")
def checked() -> Any:
    return _dsl.tir_memory_check(Registry().protect)


@T.prim_func
def honest(x: T.Buffer(("rows", 8), "float32"), out: T.Buffer(("rows", 8), "float32")):
    rows = T.int32()
    for i, j in T.grid(rows, 8):
        out[i, j] = x[i, j] * T.float32(2)


@T.prim_func
def pointer_from_integer(out: T.Buffer((1,), "int64"), address: T.int64):
    p: T.let[T.handle("int64")] = T.reinterpret(_P64, address)
    far = T.decl_buffer((1,), "int64", data=p)
    out[0] = far[0]


@T.prim_func
def memcpy_by_integer(out: T.Buffer((1,), "int64"), dst: T.int64, src: T.int64):
    out[0] = T.call_extern("int64", "memcpy", dst, src, T.int64(8))


@T.prim_func
def llvm_intrinsic(out: T.Buffer((1,), "int64"), src: T.int64):
    out[0] = T.call_llvm_pure_intrin("int64", "llvm.ctpop.i64", src)


@T.prim_func
def intrinsic_as_extern(out: T.Buffer((1,), "int64"), dst: T.int64, src: T.int64):
    out[0] = T.call_extern("int64", "llvm.memcpy.p0.p0.i64", dst, src, T.int64(8), T.bool(False))


@T.prim_func
def address_of_element(a: T.Buffer((4,), "float32"), k: T.int32):
    T.evaluate(T.call_extern("float32", "fabsf", T.address_of(a[k])))


@T.prim_func
def raw_pointer_argument(out: T.Buffer((1,), "float32"), p: T.handle):
    out[0] = T.float32(0)


@T.prim_func
def wider_view(a: T.Buffer((1,), "float32")):
    b = a.view(1 << 20)
    b[(1 << 20) - 1] = T.float32(0)


@T.prim_func
def vector_index(a: T.Buffer((8,), "float32"), out: T.Buffer((4,), "float32"), k: T.int32):
    out[T.ramp(0, 1, 4)] = a[T.ramp(k, 1, 4)]


@T.prim_func
def region_copy(a: T.Buffer((8,), "float32"), out: T.Buffer((8,), "float32"), k: T.int32):
    T.tile.copy(out[0:4], a[k : k + 4])


@T.prim_func
def computed_index(a: T.Buffer((1,), "float32"), out: T.Buffer((1,), "float32"), k: T.int64):
    out[0] = a[k]


@T.prim_func
def variable_step(a: T.Buffer((8,), "float32"), step: T.int32):
    for i in T.serial(0, 8, step=step):  # a step that is no positive constant proves nothing
        a[i] = T.float32(1)


@T.prim_func
def offset_allocation(out: T.Buffer((4,), "int64"), o: T.int64):
    buf = T.alloc_buffer((T.int64(4),), "int64", elem_offset=o)  # TVM puts element q at buf's address + o + q
    for q in range(4):
        out[q] = buf[q]


@T.prim_func
def strided_allocation(out: T.Buffer((4,), "int64"), s: T.int64):
    buf = T.alloc_buffer((T.int64(4),), "int64", strides=(s,))
    for q in range(4):
        out[q] = buf[q]


@pytest.mark.parametrize(
    ("func", "target", "refused"),
    [
        (offset_allocation, "llvm", "an allocation with strides or an element offset"),
        (strided_allocation, "llvm", "an allocation with strides or an element offset"),
        (pointer_from_integer, "llvm", "a pointer made from an integer"),
        (pointer_from_integer, CUDA, "a pointer made from an integer"),
        (memcpy_by_integer, "llvm", "a call of 'memcpy'"),
        (memcpy_by_integer, CUDA, "a call of 'memcpy'"),
        (llvm_intrinsic, "llvm", "an LLVM intrinsic called by name"),
        (intrinsic_as_extern, CUDA, "an LLVM intrinsic called by name"),
        (address_of_element, "llvm", "a pointer (a handle-typed"),
        (raw_pointer_argument, "llvm", "a pointer (a handle-typed"),
        (wider_view, "llvm", "a buffer declared over other memory"),
        (vector_index, "llvm", "a vector index"),
        (region_copy, "llvm", "a buffer region"),
    ],
)  # fmt: skip
def test_memory_outside_the_buffers_is_refused(checked: Any, func: Any, target: Any, refused: str) -> None:
    _, reasons = checked(func, target)
    assert [r for r in reasons if r.startswith(refused)], reasons


def test_a_cuda_kernel_may_take_an_element_address(checked: Any) -> None:
    # PTX intrinsics (wgmma descriptors, TMA) take shared-memory addresses: only the integer-pointer rules apply
    assert checked(address_of_element, CUDA)[1] == []


def test_an_honest_kernel_passes_unchanged(checked: Any) -> None:
    # its indices are loop variables over its buffers' extents: nothing to clamp; only its arguments' sizes are
    # checked first (``sized``)
    built, reasons = checked(honest, "llvm")
    assert reasons == []
    *checks, body = built.body.seq
    assert len(checks) == 2 and all(isinstance(c, tvm.tirx.AssertStmt) for c in checks)  # x's rows, out's
    assert tvm_ffi.structural_equal(body, honest.body, map_free_vars=True)


def test_a_loop_variable_with_a_variable_step_is_clamped(checked: Any) -> None:
    built, reasons = checked(variable_step, "llvm")
    assert reasons == [] and not tvm_ffi.structural_equal(built, variable_step)


def test_an_index_outside_its_buffer_is_clamped_into_it(checked: Any) -> None:
    built, reasons = checked(computed_index, "llvm")
    assert reasons == [] and not tvm_ffi.structural_equal(built, computed_index)
    kernel = tvm.compile(built, target="llvm")
    a, out = torch.tensor([3.0]), torch.zeros(1)
    for k in (0, 1 << 40, -(1 << 40)):  # far outside the one element: it is read instead
        out.zero_()
        kernel(a, out, k)
        assert out.item() == 3.0


@T.prim_func
def previous_element(
    x: T.Buffer(("n", 4), "float32"), s: T.Buffer(("n",), "float32"), out: T.Buffer(("n", 4), "bfloat16")
):
    n = T.int32()
    for i in range(n):
        for j in range(4):
            if i == 0:
                out[i, j] = T.Cast("bfloat16", x[i, j])
            else:
                out[i, j] = T.Cast("bfloat16", x[i, j] + s[i - 1])


def test_a_previous_element_read_under_a_branch_compiles_clamped(checked: Any) -> None:
    """``s[i - 1]`` where ``i > 0`` is clamped (no proof it is inside), and builds: an unsigned clamp made TVM fold
    ``-1`` into an unsigned constant where it peeled the loop's first step (with a bf16 store there; red team rt48:
    an honest kernel reading the previous row's statistic, and an RWKV step reading the previous state, failed to
    compile)."""
    built, reasons = checked(previous_element, "llvm")
    assert reasons == [] and not tvm_ffi.structural_equal(built, previous_element)
    kernel = tvm.compile(built, target="llvm")
    x, s, out = torch.ones(3, 4), torch.tensor([10.0, 20.0, 30.0]), torch.zeros(3, 4, dtype=torch.bfloat16)
    kernel(x, s, out)
    assert out[:, 0].tolist() == [1.0, 11.0, 21.0]


def test_a_function_runs_where_its_own_target_says(checked: Any) -> None:
    on_cuda = address_of_element.with_attr("target", tvm.target.Target(CUDA))
    assert checked(tvm.IRModule({"main": on_cuda}), "llvm")[1] == []
    on_cpu = address_of_element.with_attr("target", tvm.target.Target("llvm"))
    assert checked(tvm.IRModule({"main": on_cpu}), CUDA)[1]


# A CPU kernel's allocations start with the erase sentinel (red team rt18 F4: TVM's workspace pool hands back the
# same block every call, so an allocation read before it is written carried data in from outside the launch).
_NAN = tvm.tirx.reinterpret("float32", tvm.tirx.const(0xFFFFFFFF, "uint32"))  # 0xFF in every byte


@T.prim_func
def global_buffer(out: T.Buffer((8,), "float32")):
    a = T.alloc_buffer((8,), "float32")
    for i in range(8):
        out[i] = a[i]


@T.prim_func
def local_in_loop(out: T.Buffer((8,), "float32")):
    for i in range(8):
        t = T.alloc_local((1,), "float32")
        out[i] = t[0]
        t[0] = T.float32(1)  # what the next iteration's allocation would otherwise find


@T.prim_func
def shared_buffer(out: T.Buffer((8,), "float32")):
    a = T.alloc_shared((8,), "float32")
    for i in range(8):
        out[i] = a[i]


@T.prim_func
def scalar(out: T.Buffer((8,), "float32")):
    s = T.alloc_scalar("float32")
    for i in range(8):
        out[i] = s


@T.prim_func
def declared_without_data(out: T.Buffer((8,), "float32")):
    d = T.decl_buffer((8,), "float32")
    for i in range(8):
        out[i] = d[i]


@T.prim_func
def symbolic_extent(out: T.Buffer((8,), "float32"), n: T.int32):
    a = T.alloc_buffer((n, 2), "float32")
    for i in range(8):
        out[i] = a[i, 1]


@T.prim_func
def in_parallel_body(out: T.Buffer((8,), "float32")):
    for i in T.parallel(8):
        p = T.alloc_local((2,), "float32")
        out[i] = p[1]


@T.prim_func(s_tir=True)
def block_buffer(out: T.Buffer((8,), "float32")):
    with T.sblock("root"):
        a = T.sblock_alloc_buffer((8,), "float32")
        for i in range(8):
            out[i] = a[i]


@T.prim_func
def integer_buffer(out: T.Buffer((8,), "int32")):
    a = T.alloc_buffer((8,), "int32")
    for i in range(8):
        out[i] = a[i]


@T.prim_func
def bool_buffer(out: T.Buffer((8,), "bool")):
    a = T.alloc_buffer((8,), "bool")
    for i in range(8):
        out[i] = a[i]


@T.prim_func
def vector_buffer(out: T.Buffer((1,), "float32")):
    v = T.alloc_buffer((2,), "float32x4")
    v[0] = v[1]  # a vector element has no lane a CPU kernel may index: the IR only
    out[0] = T.float32(0)


@T.prim_func
def empty_buffer(out: T.Buffer((1,), "float32")):
    z = T.alloc_buffer((0,), "float32")
    for i in range(0):
        out[0] = z[i]


@T.prim_func
def read_by_its_first_store(out: T.Buffer((8,), "float32")):
    t = T.alloc_local((1,), "float32")
    t[0] = t[0] + T.float32(1)  # the store that follows the allocation reads it first
    for i in range(8):
        out[i] = t[0]


@T.prim_func
def partly_written_first(out: T.Buffer((8,), "float32")):
    a = T.alloc_buffer((2,), "float32")
    a[0] = T.float32(1)  # one element of two
    for i in range(8):
        out[i] = a[1]


def _first_accesses(func: Any) -> list[Any]:
    """For each allocation of ``func`` (in order), the value of the first store to it, None if a load comes first."""
    allocated: list[Any] = []
    first: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.AllocBuffer | tvm.s_tir.SBlock):
            for buffer in [node.buffer] if isinstance(node, tvm.tirx.AllocBuffer) else node.alloc_buffers:
                allocated.append(buffer)
                first.append(Ellipsis)
        elif isinstance(node, tvm.tirx.BufferStore | tvm.ir.TensorLoad):
            buffer = node.buffer if isinstance(node, tvm.tirx.BufferStore) else node.source
            for k, allocation in enumerate(allocated):
                if allocation.same_as(buffer) and first[k] is Ellipsis:
                    first[k] = node.value if isinstance(node, tvm.tirx.BufferStore) else None

    tvm_ffi.structural_walk(func, visit, order="pre")
    return first


@pytest.mark.parametrize(
    ("func", "sentinel"),
    [
        (global_buffer, _NAN), (local_in_loop, _NAN), (shared_buffer, _NAN), (scalar, _NAN),
        (declared_without_data, _NAN), (symbolic_extent, _NAN), (in_parallel_body, _NAN), (block_buffer, _NAN),
        (integer_buffer, tvm.tirx.const(0, "int32")), (bool_buffer, tvm.tirx.const(False, "bool")),
        (vector_buffer, tvm.tirx.Broadcast(_NAN, 4)), (empty_buffer, _NAN), (read_by_its_first_store, _NAN),
        (partly_written_first, _NAN),
    ],
)  # fmt: skip
def test_an_allocation_is_filled_with_the_sentinel_before_it_is_read(checked: Any, func: Any, sentinel: Any) -> None:
    built, reasons = checked(func, "llvm")
    assert reasons == []
    first = _first_accesses(built)
    assert first and all(v is not None and v is not Ellipsis and tvm_ffi.structural_equal(v, sentinel) for v in first)
    tvm.compile(built, target="llvm")  # TVM lowers what the fill makes


@pytest.mark.parametrize(
    ("func", "dtype", "arguments"),
    [
        (global_buffer, torch.float32, ()), (local_in_loop, torch.float32, ()), (shared_buffer, torch.float32, ()),
        (scalar, torch.float32, ()), (declared_without_data, torch.float32, ()), (symbolic_extent, torch.float32, (8,)),
        (in_parallel_body, torch.float32, ()), (block_buffer, torch.float32, ()), (integer_buffer, torch.int32, ()),
        (bool_buffer, torch.bool, ()), (read_by_its_first_store, torch.float32, ()),
        (partly_written_first, torch.float32, ()),
    ],
)  # fmt: skip
def test_a_read_before_a_write_returns_the_sentinel(checked: Any, func: Any, dtype: Any, arguments: Any) -> None:
    kernel = tvm.compile(checked(func, "llvm")[0], target="llvm")
    out = torch.ones(8, dtype=dtype)
    kernel(out, *arguments)
    if dtype.is_floating_point:
        assert (out.view(torch.uint8) == 0xFF).all(), out  # the erase sentinel: NaN
    else:
        assert not out.any(), out


@T.prim_func
def carried(x: T.Buffer((4096,), "float32"), out: T.Buffer((4096,), "float32"), keep: T.int32):
    a = T.alloc_buffer((4096,), "float32")  # TVM's workspace (beyond its stack allocations), from its pool
    if keep == 1:
        for i in range(4096):
            a[i] = x[i]
    else:
        for i in range(4096):
            out[i] = a[i]


def test_an_allocation_carries_nothing_from_one_call_to_the_next(checked: Any) -> None:
    kernel = tvm.compile(checked(carried, "llvm")[0], target="llvm")
    x, out = torch.arange(4096, dtype=torch.float32), torch.zeros(4096)
    kernel(x, out, 1)
    kernel(x, out, 0)  # without the fill: the pool's block, x
    assert (out.view(torch.uint8) == 0xFF).all()


@T.prim_func
def scalar_assignments(x: T.Buffer((8,), "float32"), out: T.Buffer((8,), "float32")):
    for i in range(8):
        v = x[i] * T.float32(2)  # a TIRx scalar: an allocation whose first statement writes it whole
        out[i] = v


def test_a_scalar_written_whole_by_its_first_store_is_not_filled_again(checked: Any) -> None:
    # a second store TVM's workspace keeps (LLVM cannot drop it) and that stops the loop's vectorisation
    built, reasons = checked(scalar_assignments, "llvm")
    assert reasons == [] and tvm_ffi.structural_equal(built, scalar_assignments)


# An empty buffer reaches no memory, and no buffer is larger than its shape says (red team rt19 F1, F3: torch lets a
# zero-element tensor have any sizes over a NULL pointer; TVM computes an allocation's bytes, a view's size and an
# offset in the extents' own type, which wraps).
@T.prim_func
def far_access(far_ptr: T.handle, out: T.Buffer((4,), "int64"), at: T.int64):
    span = T.int64()
    far = T.match_buffer(far_ptr, (span, T.int64(0)), "int64", strides=(T.int64(1), T.int64(1)))
    for k in range(4):
        out[k] = far[at + k, T.int64(0)]
        far[at + k, T.int64(0)] = T.int64(7)


@T.prim_func
def empty_by_argument(far_ptr: T.handle, out: T.Buffer((4,), "int64"), at: T.int64):
    span = T.int64()
    m = T.int64()
    far = T.match_buffer(far_ptr, (span, m), "int64", strides=(T.int64(1), T.int64(1)))
    for k in range(4):
        out[k] = far[at + k, T.int64(0)]
        far[at + k, T.int64(0)] = T.int64(7)


def test_a_zero_element_argument_reaches_no_memory(checked: Any) -> None:
    canary = torch.arange(100, 104, dtype=torch.int64)
    # no element, a NULL data pointer: a dimension of 2**47 int64 from address 0 spans canary's address
    far = torch.empty(1, dtype=torch.int64).as_strided((1 << 47, 0), (1, 1))
    assert far.data_ptr() == 0
    for func in (far_access, empty_by_argument):
        kernel = tvm.compile(checked(func, "llvm")[0], target="llvm")
        out = torch.full((4,), -1, dtype=torch.int64)
        kernel(far, out, canary.data_ptr() // 8)
        assert out.tolist() == [0, 0, 0, 0] and canary.tolist() == [100, 101, 102, 103]


@T.prim_func
def gather_rows(x_ptr: T.handle, idx_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    m = T.int32()
    x = T.match_buffer(x_ptr, (n, 4), "float32")
    idx = T.match_buffer(idx_ptr, (m,), "int64")
    out = T.match_buffer(out_ptr, (m, 4), "float32")
    for i, j in T.grid(m, 4):
        out[i, j] = x[T.Cast("int32", idx[i]), j]  # data-dependent: clamped, and guarded (x may be empty)


def test_an_empty_slice_reaches_nothing_and_an_honest_one_works(checked: Any) -> None:
    kernel = tvm.compile(checked(gather_rows, "llvm")[0], target="llvm")
    x = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    out = torch.zeros(2, 4)
    kernel(x, torch.tensor([5, 1]), out)
    assert torch.equal(out, x[[5, 1]])
    kernel(x[3:3], torch.empty(0, dtype=torch.int64), torch.zeros(0, 4))  # an expert with no tokens: runs
    out.fill_(-1)
    kernel(x[3:3], torch.tensor([0, 0]), out)  # a NULL pointer (torch's for an empty tensor), read at index 0
    assert not out.any()


@T.prim_func
def wide_argument(a_ptr: T.handle, out: T.Buffer((1,), "float32"), i: T.int64):
    n = T.int64()
    a = T.match_buffer(a_ptr, (n, T.int64(4)), "float32")
    out[0] = a[i, T.int64(0)]


def test_an_argument_larger_than_its_memory_raises_at_the_launch(checked: Any) -> None:
    # TVM's view checks its size against the memory's as a product that wraps: 2**62 * 4 elements, 16 bytes
    wide = tvm.runtime.empty((4,), "float32")._create_view((1 << 62, 4))
    kernel = tvm.compile(checked(wide_argument, "llvm")[0], target="llvm")
    with pytest.raises(RuntimeError, match="larger than its index type or the address space can hold"):
        kernel(wide, torch.zeros(1), 1)  # a[1, 0]: past the 16 bytes


@T.prim_func
def strided_argument(x_ptr: T.handle, out: T.Buffer((1,), "uint8"), i: T.int32):
    n = T.int32()
    m = T.int32()
    s0 = T.int32()
    s1 = T.int32()
    x = T.match_buffer(x_ptr, (n, m), "uint8", strides=(s0, s1))
    out[0] = x[i, 0]


def test_a_strided_argument_whose_int32_offsets_wrap_raises_at_the_launch(checked: Any) -> None:
    """Rows 2**31 bytes apart, declared with int32 strides: the second row's offset wraps to -2**31 (2 GiB before the
    tensor). The storage is as large as the view (torch.empty leaves its pages untouched)."""
    kernel = tvm.compile(checked(strided_argument, "llvm")[0], target="llvm")
    base = torch.zeros(64, dtype=torch.uint8)
    base[5] = 7
    out = torch.zeros(1, dtype=torch.uint8)
    kernel(base.as_strided((2, 1), (5, 1)), out, 1)  # honest strides: the second row at byte 5
    assert out.item() == 7
    wide = torch.empty((1 << 31) + 1, dtype=torch.uint8).as_strided((2, 1), (1 << 31, 1))
    with pytest.raises(RuntimeError, match="strides reach larger than its index type"):
        kernel(wide, out, 1)


@T.prim_func
def wrapping_allocation(out: T.Buffer((8,), "int64"), a: T.int64, b: T.int64, i: T.int64, j: T.int64):
    buf = T.alloc_buffer((a, b), "int64")
    for q in range(8):
        out[q] = buf[i, j + T.Cast("int64", q)]


@T.prim_func
def wrapping_int32_allocation(out: T.Buffer((8,), "float32"), a: T.int32, b: T.int32):
    buf = T.alloc_buffer((a, b), "float32")  # TVM computes its bytes in int32
    for q in range(8):
        out[q] = buf[q, q]


def test_an_allocation_whose_size_wraps_raises_at_the_launch(checked: Any) -> None:
    built, reasons = checked(wrapping_allocation, "llvm")
    assert reasons == []
    kernel = tvm.compile(built, target="llvm")
    out = torch.ones(8, dtype=torch.int64)
    kernel(out, 4, 4, 0, 0)  # as large as it says: read back filled
    assert not out.any()
    with pytest.raises(RuntimeError, match="larger than its index type or the address space can hold"):
        kernel(out, 64, (1 << 58) + 1, 0, 512)  # 64 * (2**58 + 1) * 8 bytes wrap to 512
    kernel = tvm.compile(checked(wrapping_int32_allocation, "llvm")[0], target="llvm")
    with pytest.raises(RuntimeError, match="larger than its index type"):
        kernel(torch.zeros(8), 1 << 16, 1 << 16)  # 2**34 bytes, in int32: 0


@T.prim_func
def huge_constant_allocation(out: T.Buffer((1,), "int64")):
    buf = T.alloc_buffer((T.int64(1 << 40), T.int64(1 << 40)), "int64")
    out[0] = buf[T.int64(0), T.int64(0)]


@T.prim_func
def huge_constant_argument(a: T.Buffer((T.int64(1 << 62), T.int64(4)), "float32"), out: T.Buffer((1,), "float32")):
    out[0] = a[T.int64(1), T.int64(0)]


@pytest.mark.parametrize("func", [huge_constant_allocation, huge_constant_argument])
def test_a_constant_shape_too_large_is_refused_at_the_build(checked: Any, func: Any) -> None:
    _, reasons = checked(func, "llvm")
    assert [r for r in reasons if r.startswith("a buffer larger than its index type")], reasons
