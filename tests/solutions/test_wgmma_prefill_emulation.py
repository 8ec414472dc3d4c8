"""CPU evidence for the sm_90a WGMMA prefill behind p04-p09's `NN_wgmma_tirx.py` (no GPU here).

The kernel traces its layouts and descriptors from `problems/attention/solutions/_flash_prefill_sm90.py`
(bundled into each solution by `python -m problems._bundle`); this test calls the same functions:

- CUTLASS's answers (slow; needs nvcc and the CUTLASS headers TVM ships): `wgmma_oracle.cu`, compiled and run
  on the host, prints CuTe's 128-byte-swizzle layouts of the Q/K (K-major) and V (MN-major) tiles, the matrix
  descriptors CuTe makes for every warpgroup k-step slice, and the wgmma accumulator / register-A layouts. The
  tile image the kernel's copies write, its descriptor fields and k-step offsets, and its fragment placement
  (`acc_row` / `acc_col`, the P packing) must equal them.
- the data path: tiles copied as the kernel copies them, then read back the way `wgmma` reads a descriptor
  (the canonical K-major / MN-major forms of the PTX ISA and CUTLASS, swizzle on byte addresses) must give
  every Q, K and V block each instruction expects; reads that ignore the swizzle must not.
- the TIRx CUDA source (slow; needs TVM and nvcc): the descriptors are encoded with those fields, the Q
  operand's k-steps advance by those offsets, and ptxas keeps every wgmma asynchronous (it serialises them,
  with a warning, when registers a wgmma owns are touched before its wait) without spilling.
- the schedule, per CTA: the kernel's program order replayed against a model of its shared memory (what each
  buffer and row-list slot holds, what a barrier has published, which wgmma groups still read a buffer), so a
  copy into a buffer a wgmma may still read, or a read of a buffer not yet published or holding the wrong
  tile, fails; and the arithmetic in that order (S(j) and P(j-1)·V(j-1) together, O rescaled after the
  product) against the problem's float64 anchor under the verifier's allowance, on SMOKE and larger shapes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import math
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from test_dsl_solutions import _load
from test_tensorcore_attention_emulation import FP, _check_against_anchor, _larger, _named, _problem

from mkbsim.catalog import problems_root
from problems.attention.solutions import _flash_prefill_sm90 as S9

SOLUTIONS = problems_root() / "attention" / "solutions"
PREFILL = ("04", "05", "06", "07", "08", "09")
LANES = torch.arange(32)


TILINGS = [S9.Sm90Tiling(hq=8, hkv=1, d=128, page=0), S9.Sm90Tiling(hq=8, hkv=1, d=256, page=0)]


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _tiling(problem: Any) -> Any:
    w = problem.workload
    return S9.Sm90Tiling(hq=w["num_qo_heads"], hkv=w["num_kv_heads"], d=w["head_dim"], page=w.get("page_size", 0))


@pytest.mark.parametrize("nn", PREFILL)
def test_solution_files_instantiate_the_problem_tiling(nn: str) -> None:
    t = _tiling(_problem(nn))
    text = f"Sm90Tiling(hq={t.hq}, hkv={t.hkv}, d={t.d}, page={t.page})"
    assert text in (SOLUTIONS / f"{nn}_wgmma_tirx.py").read_text()


# ----------------------------------------------------------------------------------------------
# the data path: cp.async copies -> 128-byte-swizzle panels -> what a descriptor makes wgmma read
# ----------------------------------------------------------------------------------------------


def _stage(tile: torch.Tensor, t: Any) -> torch.Tensor:
    """The flat shared-memory image the CTA's 16-byte copies leave for a [rows, d] tile (each chunk once)."""
    rows = tile.shape[0]
    tid = torch.arange(S9.THREADS)
    image = torch.full((rows * t.d,), float("nan"), dtype=tile.dtype)
    seen = torch.zeros(rows * t.chunks, dtype=torch.int64)
    for i in range(rows // t.row_step):
        r, cc = FP.copy_row(tid, i, t.row_step, t.chunks), tid % t.chunks
        dst = S9.panel_chunk(r, cc, rows)
        seen.index_add_(0, dst, torch.ones_like(dst))
        for e in range(8):
            image[dst * 8 + e] = tile[r, cc * 8 + e]
    assert torch.equal(seen, torch.ones_like(seen)), "the copies must write every chunk of the tile once"
    return image


def _swizzle(byte: torch.Tensor) -> torch.Tensor:
    """The 128-byte swizzle on shared-memory byte addresses: 16-byte chunk bits [4:6] ^= 128-byte row bits [7:9]."""
    return byte ^ ((byte >> 7 & 7) << 4)


def _read_k_major(image: torch.Tensor, start: int, rows: int, swizzled: bool = True) -> torch.Tensor:
    """[rows, 16] that a K-major SW128 descriptor at byte ``start`` (stride byte offset 1024) reads."""
    r, k = torch.arange(rows)[:, None], torch.arange(16)[None, :]
    byte = start + r // 8 * S9.ROWS_PER_GROUP_BYTES + r % 8 * 128 + 2 * k
    return image[(_swizzle(byte) if swizzled else byte) // 2]


def _read_mn_major(image: torch.Tensor, start: int, n: int, lbo: int, swizzled: bool = True) -> torch.Tensor:
    """[16, n] that an MN-major SW128 descriptor at byte ``start`` (leading byte offset ``lbo``) reads: k x n."""
    k, c = torch.arange(16)[:, None], torch.arange(n)[None, :]
    byte = start + c // 64 * lbo + k // 8 * S9.ROWS_PER_GROUP_BYTES + k % 8 * 128 + 2 * (c % 64)
    return image[(_swizzle(byte) if swizzled else byte) // 2]


def _operands(t: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, swizzled: bool = True) -> None:
    """Every wgmma k-step of both warpgroups reads exactly the Q, K and V blocks it multiplies."""
    sq, sk, sv = _stage(q, t), _stage(k, t), _stage(v, t)
    for wg in range(2):
        for kk in range(t.d // 16):
            start = wg * S9.WG_ROWS * 128 + S9.k_major_step(kk, S9.BM)
            a = _read_k_major(sq, start, S9.WG_ROWS, swizzled)
            assert torch.equal(a, q[64 * wg : 64 * wg + 64, 16 * kk : 16 * kk + 16]), f"Q wg {wg} k-step {kk}"
    for kk in range(t.d // 16):
        b = _read_k_major(sk, S9.k_major_step(kk, t.bn), t.bn, swizzled)
        assert torch.equal(b, k[:, 16 * kk : 16 * kk + 16]), f"K k-step {kk}"
    for kk in range(t.bn // 16):
        b = _read_mn_major(sv, S9.mn_major_step(kk), t.d, S9.panel_bytes(t.bn), swizzled)
        assert torch.equal(b, v[16 * kk : 16 * kk + 16]), f"V k-step {kk}"


@pytest.mark.parametrize("t", TILINGS, ids=lambda t: f"d{t.d}")
def test_each_wgmma_k_step_reads_the_blocks_it_multiplies(t: Any) -> None:
    gen = torch.Generator().manual_seed(t.d)
    q, k, v = (torch.randn(n, t.d, generator=gen).to(torch.bfloat16) for n in (S9.BM, t.bn, t.bn))
    _operands(t, q, k, v)
    with pytest.raises(AssertionError):  # reads that forget the swizzle the copies applied get other data
        _operands(t, q, k, v, swizzled=False)


def _acc_place(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, col) in the warpgroup's 64 x n tile of accumulator register v of thread t, as the kernel places
    them: warp t // 32 owns rows 16 w.., register 4 j + c is the mma.sync C fragment c of n8 tile j."""
    tid, v = torch.arange(128)[:, None], torch.arange(n // 2)[None, :]
    lane, c = tid % 32, v % 4
    return tid // 32 * 16 + FP.acc_row(lane, c), v // 4 * 8 + FP.acc_col(lane, c)


def _p_place() -> tuple[torch.Tensor, torch.Tensor]:
    """(row, k) in the 64 x 16 block of bf16 element e of P register r (value 2 r + e) of thread t: the kernel packs
    register r of k-step kk from S n8 tile 2 kk + r // 2, accumulator elements 2 (r % 2) + e."""
    tid, val = torch.arange(128)[:, None], torch.arange(8)[None, :]
    lane, reg, e = tid % 32, val // 2, val % 2
    c = 2 * (reg % 2) + e
    return tid // 32 * 16 + FP.acc_row(lane, c), reg // 2 * 8 + FP.acc_col(lane, c)


def test_p_registers_hold_the_s_elements_of_their_k_step() -> None:
    """P(j)'s k-step kk takes S's n8 tiles 2kk, 2kk + 1: the placements of the two layouts agree."""
    s_row, s_col = _acc_place(64)
    p_row, p_k = _p_place()
    for kk in range(4):
        for val in range(8):
            reg, e = val // 2, val % 2
            v = 4 * (2 * kk + reg // 2) + 2 * (reg % 2) + e  # the S register the kernel converts
            assert torch.equal(s_row[:, v], p_row[:, val]) and torch.equal(s_col[:, v], 16 * kk + p_k[:, val])


@pytest.mark.parametrize("t", TILINGS, ids=lambda t: f"d{t.d}")
def test_epilogue_writes_come_back_as_output_rows(t: Any) -> None:
    """Accumulator (row, col) -> the Q tile's panels -> the copy-out's 16-byte chunks: every output element once."""
    o = torch.arange(S9.BM * t.d, dtype=torch.float64).reshape(S9.BM, t.d)
    smem = torch.full((S9.BM * t.d,), -1.0, dtype=torch.float64)
    row, col = _acc_place(t.d)
    for wg in range(2):
        r = wg * S9.WG_ROWS + row
        smem[S9.panel_chunk(r, col // 8, S9.BM) * 8 + col % 8] = o[r, col]
    out = torch.full_like(o, -1.0)
    tid = torch.arange(S9.THREADS)
    for i in range(t.q_loads):
        r, cc = FP.copy_row(tid, i, t.row_step, t.chunks), tid % t.chunks
        for e in range(8):
            out[r, cc * 8 + e] = smem[S9.panel_chunk(r, cc, S9.BM) * 8 + e]
    assert torch.equal(out, o)


# ----------------------------------------------------------------------------------------------
# CUTLASS's answers (host-side CuTe, compiled with nvcc)
# ----------------------------------------------------------------------------------------------


def _cutlass_include() -> Path | None:
    spec = importlib.util.find_spec("tvm")
    if spec is None or spec.origin is None:
        return None
    include = Path(spec.origin).parent / "3rdparty" / "cutlass" / "include"
    return include if (include / "cute" / "atom" / "mma_traits_sm90_gmma.hpp").exists() else None


# the tests reading the oracle run in one pytest-xdist worker, which compiles and runs it once
ORACLE_GROUP = pytest.mark.xdist_group("wgmma_oracle")


def _oracle_binary(nvcc: str, include: Path) -> Path:
    """The oracle compiled (a minute or two of CuTe template instantiation), kept in the user's cache folder under
    a key of its source, the CUTLASS headers' release and nvcc's: a later run of the suite only runs it."""
    source = Path(__file__).with_name("wgmma_oracle.cu")
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    key = "\0".join([source.read_text(), str(include), importlib.metadata.version("apache-tvm"), nvcc_version])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mkbsim-tests"
    exe = cache / f"wgmma_oracle-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if not exe.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = exe.with_name(f"{exe.name}.{os.getpid()}.part")  # another worker may build it meanwhile
        built = subprocess.run([nvcc, "-std=c++17", "-w", f"-I{include}", "-o", str(partial), str(source)],
                               capture_output=True, text=True, timeout=900)  # fmt: skip
        assert built.returncode == 0, built.stderr[-3000:]
        os.replace(partial, exe)
    return exe


@pytest.fixture(scope="module")
def oracle() -> dict[str, list[int]]:
    nvcc, include = shutil.which("nvcc"), _cutlass_include()
    if nvcc is None or include is None:
        pytest.skip("needs nvcc and the CUTLASS headers that apache-tvm ships")
    ran = subprocess.run([str(_oracle_binary(nvcc, include))], capture_output=True, text=True, timeout=120, check=True)
    tables = {}
    for line in ran.stdout.splitlines():
        if line.startswith("ERROR:"):  # CuTe cannot take a shared-memory address on the host: start offsets only
            continue
        name, *values = line.split()
        tables[name] = [int(x) for x in values]
    return tables


@pytest.mark.slow
@ORACLE_GROUP
@pytest.mark.parametrize(("rows", "d"), [(128, 128), (128, 256), (64, 256)])
def test_k_major_tile_layout_is_cutlass(oracle: dict[str, list[int]], rows: int, d: int) -> None:
    r, c = torch.arange(rows)[:, None], torch.arange(d)[None, :]
    mine = S9.panel_chunk(r, c // 8, rows) * 8 + c % 8
    assert mine.flatten().tolist() == oracle[f"k_major_{rows}_{d}"]


@pytest.mark.slow
@ORACLE_GROUP
@pytest.mark.parametrize(("d", "bn"), [(128, 128), (256, 64)])
def test_mn_major_v_layout_is_cutlass(oracle: dict[str, list[int]], d: int, bn: int) -> None:
    n, k = torch.arange(d)[:, None], torch.arange(bn)[None, :]
    mine = S9.panel_chunk(k, n // 8, bn) * 8 + n % 8  # token k is tile row k; head-dim column n
    assert mine.flatten().tolist() == oracle[f"mn_major_{d}_{bn}"]


@pytest.mark.slow
@ORACLE_GROUP
@pytest.mark.parametrize(("rows", "d", "slice_rows"), [(128, 128, 64), (128, 128, 128), (128, 256, 64), (64, 256, 64)])
def test_k_major_descriptors_are_cutlass(oracle: dict[str, list[int]], rows: int, d: int, slice_rows: int) -> None:
    """Start byte, leading / stride byte offsets (16-byte units) and layout type (1: 128-byte swizzle)."""
    for m in range(rows // slice_rows):
        for kk in range(d // 16):
            start = m * slice_rows * 128 + S9.k_major_step(kk, rows)
            want = [start, 1, S9.ROWS_PER_GROUP_BYTES >> 4, 1]
            assert oracle[f"k_desc_{rows}_{d}_{slice_rows}_{m}_{kk}"] == want, (m, kk)


@pytest.mark.slow
@ORACLE_GROUP
@pytest.mark.parametrize(("d", "bn"), [(128, 128), (256, 64)])
def test_mn_major_descriptors_are_cutlass(oracle: dict[str, list[int]], d: int, bn: int) -> None:
    for kk in range(bn // 16):
        want = [S9.mn_major_step(kk), S9.panel_bytes(bn) >> 4, S9.ROWS_PER_GROUP_BYTES >> 4, 1]
        assert oracle[f"mn_desc_{d}_{bn}_{kk}"] == want, kk


@pytest.mark.slow
@ORACLE_GROUP
@pytest.mark.parametrize("n", [64, 128, 256])
def test_accumulator_placement_is_cutlass(oracle: dict[str, list[int]], n: int) -> None:
    """CLayout_64xN maps (thread, value) to m + 64 n."""
    row, col = _acc_place(n)
    assert (row + 64 * col).flatten().tolist() == oracle[f"c_64x{n}"]


@pytest.mark.slow
@ORACLE_GROUP
def test_p_register_placement_is_cutlass(oracle: dict[str, list[int]]) -> None:
    """ALayout_64x16 maps (thread, value) to m + 64 k."""
    row, k = _p_place()
    assert (row + 64 * k).flatten().tolist() == oracle["a_64x16"]


ENCODE_RE = re.compile(r"ptx_wgmma_encode_matrix_descriptor\(\(&\(desc_ptr\[(\d)\]\)\), .*?, (\d+), (\d+), (\d+)\);")


@pytest.mark.slow
@pytest.mark.parametrize("nn", ["04", "09"])
def test_tirx_source_encodes_these_descriptors_and_keeps_wgmma_asynchronous(nn: str, tmp_path: Path) -> None:
    pytest.importorskip("tvm")
    problem = _problem(nn)
    t = _tiling(problem)
    mod = _load(SOLUTIONS / f"{nn}_wgmma_tirx.py")
    source = mod._build(*mod._shape_key(*problem.make_inputs(problem.smoke, seed=0))).mod.imports[0].inspect_source()
    sbo = str(S9.ROWS_PER_GROUP_BYTES >> 4)
    want = [("0", "1", sbo, "3"), ("1", "1", sbo, "3"), ("2", str(S9.panel_bytes(t.bn) >> 4), sbo, "3")]
    assert sorted(ENCODE_RE.findall(source)) == want  # Q, K buffer 0, V buffer 0 (CUtensorMapSwizzle 3: 128 B)
    assert "case 3: _desc.bitfield.layout_type_ = uint8_t(1)" in source  # ... the descriptor's layout type 1
    steps = [int(x) for x in re.findall(r"desc_ptr\[0\] \+ \(uint64_t\)(\d+)ULL", source)]
    assert steps[: t.d // 16 - 1] == [S9.k_major_step(kk, S9.BM) >> 4 for kk in range(1, t.d // 16)]
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    cu = tmp_path / f"{nn}.cu"
    cu.write_text(source)
    cmd = [nvcc, "-arch=sm_90a", "-cubin", "--use_fast_math", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), str(cu)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ptxas = [line for line in done.stderr.splitlines() if "ptxas" in line or "wgmma" in line]
    assert not [line for line in ptxas if "wgmma" in line or "warning" in line.lower()], ptxas
    assert "0 bytes spill stores, 0 bytes spill loads" in done.stderr


# ----------------------------------------------------------------------------------------------
# the schedule and the arithmetic, CTA by CTA
# ----------------------------------------------------------------------------------------------


class SharedMemory:
    """One CTA's shared buffers under the kernel's discipline (every thread runs the same program order).

    cp.async copies and plain stores are visible to other threads only after a barrier (the copies after their
    wait_group too: `publish`); a wgmma group reads its buffers until a wgmma.wait retires it, and a buffer may be
    overwritten only once every group reading it was retired before the latest barrier (the other warpgroup's
    wait comes before that barrier, not before this thread's write)."""

    def __init__(self) -> None:
        self.held: dict[Any, Any] = {}
        self.published: set[Any] = set()
        self.readers: dict[Any, set[int]] = {}
        self.groups: list[int] = []  # issued, not yet retired
        self.retired: set[int] = set()
        self.retired_at_barrier: set[int] = set()
        self.sync_reads: set[Any] = set()  # row-list slots read since the latest barrier

    def write(self, buf: Any, value: Any) -> None:
        assert self.readers.get(buf, set()) <= self.retired_at_barrier, f"{buf} overwritten while a wgmma reads it"
        assert buf not in self.sync_reads, f"{buf} overwritten while another thread may still read it"
        self.held[buf] = value
        self.published.discard(buf)
        self.readers[buf] = set()

    def barrier(self) -> None:
        self.published |= set(self.held)
        self.retired_at_barrier = set(self.retired)
        self.sync_reads = set()

    def read(self, buf: Any) -> Any:
        assert buf in self.published, f"{buf} read before a barrier published it"
        self.sync_reads.add(buf)
        return self.held[buf]

    def issue(self, *bufs: Any) -> list[Any]:
        group = len(self.retired) + len(self.groups)
        self.groups.append(group)
        out = []
        for buf in bufs:
            assert buf in self.published, f"wgmma reads {buf} before a barrier published it"
            self.readers[buf].add(group)
            out.append(self.held[buf])
        return out

    def wait(self, keep: int) -> None:
        while len(self.groups) > keep:
            self.retired.add(self.groups.pop(0))


class Walk:
    """One CTA's inputs: its BM query rows (``nrows`` of them real), the K/V pools through the page table, the
    causal offset ``delta`` (query i sees KV tokens j <= i + delta)."""

    def __init__(
        self, t: Any, x: dict[str, Any], q_rows: torch.Tensor, nrows: int, kv0: int, lk: int, m0: int, delta: int
    ) -> None:
        paged = "k_cache" in x
        self.t, self.q_rows, self.kv0, self.lk, self.m0, self.delta = t, q_rows, kv0, lk, m0, delta
        self.k_pool = (x["k_cache"] if paged else x["k"]).reshape(-1, t.hkv, t.d)
        self.v_pool = (x["v_cache"] if paged else x["v"]).reshape(-1, t.hkv, t.d)
        self.table = x.get("kv_indices", x["kv_indptr"])
        self.scale2 = torch.tensor(x["sm_scale"] * (1.0 / math.log(2.0)), dtype=torch.float32)
        self.kvh = torch.arange(t.hq) // t.group
        self.ntile = (m0 + nrows + delta + t.bn - 1) // t.bn


def run_cta(w: Walk) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's program for one CTA, replayed against `SharedMemory`: O / l and lse of its BM rows."""
    t, bn, bm, ntile = w.t, w.t.bn, S9.BM, w.ntile
    rows_cta = torch.arange(bm)
    neg = torch.tensor(FP.NEG_BIG, dtype=torch.float32)
    mem = SharedMemory()

    def fill_rows(j: int) -> None:
        if j < ntile:
            tok = torch.clamp((ntile - 1 - j) * bn + torch.arange(bn), max=w.lk - 1)
            mem.write(("rows", j % 4), (j, torch.as_tensor(FP.kv_row(w.table, w.kv0, tok, t.page)).long()))

    def copy_tile(name: str, pool: torch.Tensor, j: int) -> None:
        tile, rows = mem.read(("rows", j % 4))
        assert tile == j, f"row list slot {j % 4} holds tile {tile}, not {j}"
        mem.write((name, j % 2), (j, pool[rows][:, w.kvh].float().transpose(0, 1)))  # [Hq, bn, D]

    def tile_of(held: tuple[int, torch.Tensor], j: int) -> torch.Tensor:
        assert held[0] == j, f"a wgmma for tile {j} reads tile {held[0]}"
        return held[1]

    def softmax(s: torch.Tensor, j: int, m_run: torch.Tensor, l_run: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = ntile - 1 - j
        s = s * w.scale2
        over = (n * bn + torch.arange(bn))[None, :] > (w.m0 + rows_cta)[:, None] + w.delta  # [bm, bn]
        if (n + 1) * bn > w.m0 + w.delta + 1:
            s = torch.where(over[None], neg, s)
        else:  # the kernel skips the mask here: nothing may need it
            assert not over.any()
        mx = torch.maximum(m_run, s.amax(-1))
        m_use = torch.where(mx == neg, torch.zeros(()), mx)
        alpha = torch.exp2(m_run - m_use)
        p = torch.exp2(s - m_use[..., None])
        return mx, l_run * alpha + p.sum(-1), alpha, p.to(torch.bfloat16)

    publish = mem.barrier  # after wait_group(0): every copy issued so far has landed
    fill_rows(0)
    fill_rows(1)
    mem.barrier()
    mem.write("q", w.q_rows.float().transpose(0, 1))  # [Hq, bm, D]
    copy_tile("k", w.k_pool, 0)
    m_run = torch.full((t.hq, bm), FP.NEG_BIG, dtype=torch.float32)
    l_run = torch.zeros(t.hq, bm)
    acc = torch.zeros(t.hq, bm, t.d)
    publish()
    qt, kt = mem.issue("q", ("k", 0))
    s = qt @ tile_of(kt, 0).transpose(1, 2)
    fill_rows(2)
    if ntile > 1:
        copy_tile("k", w.k_pool, 1)
    copy_tile("v", w.v_pool, 0)
    mem.wait(0)
    m_run, l_run, alpha, p_new = softmax(s, 0, m_run, l_run)
    for j in range(1, ntile):
        p_cur = p_new
        publish()
        qt, kt = mem.issue("q", ("k", j % 2))
        s = qt @ tile_of(kt, j).transpose(1, 2)
        (vt,) = mem.issue(("v", (j - 1) % 2))
        pv = p_cur.float() @ tile_of(vt, j - 1)
        fill_rows(j + 2)
        if j + 1 < ntile:
            copy_tile("k", w.k_pool, j + 1)
        copy_tile("v", w.v_pool, j)
        mem.wait(1)
        m_run, l_run, alpha, p_new = softmax(s, j, m_run, l_run)
        mem.wait(0)
        acc = (acc + pv) * alpha[..., None]
    publish()
    (vt,) = mem.issue(("v", (ntile - 1) % 2))
    acc = acc + p_new.float() @ tile_of(vt, ntile - 1)
    mem.wait(0)
    return acc / l_run[..., None], m_run + torch.log2(l_run)


def sequence_major(y: int, ntbs: list[int]) -> tuple[int, int]:
    """(sequence, query tile) of CTA row y in the TIRx kernel: sequence by sequence, each from its last tile."""
    for b, ntb in enumerate(ntbs):
        if y < ntb:
            return b, ntb - 1 - y
        y -= ntb
    return -1, 0


def emulate_wgmma(
    problem: Any,
    inputs: tuple,
    order: Callable[[int, list[int]], tuple[int, int]] = sequence_major,
    cta: Callable[[Walk], tuple[torch.Tensor, torch.Tensor]] = run_cta,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The WGMMA kernel's grid: the tile scheduler ``order`` (CTA row -> sequence, query tile, given each
    sequence's query-tile count), then the CTA program ``cta`` (all heads of a query tile at once)."""
    t = _tiling(problem)
    bm = S9.BM
    x = _named(problem, inputs)
    q, qo, kvp = x["q"], x["qo_indptr"], x["kv_indptr"]
    last = x.get("kv_last_page_len", kvp)
    total_q, batch = q.shape[0], qo.shape[0] - 1
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16)
    lse = torch.full(q.shape[:2], float("nan"), dtype=torch.float32)
    written = torch.zeros(total_q, dtype=torch.int64)
    ntbs = [(int(qo[b + 1]) - int(qo[b]) + bm - 1) // bm for b in range(batch)]
    for y in range(t.grid_tiles(total_q, batch)):
        seq, mblk = order(y, ntbs)
        if seq < 0:
            continue
        q0, lq = int(qo[seq]), int(qo[seq + 1]) - int(qo[seq])
        kv0 = int(kvp[seq])
        lk = int(kvp[seq + 1]) - kv0
        if t.page > 1:
            lk = (int(kvp[seq + 1]) - kv0 - 1) * t.page + int(last[seq])
        m0 = mblk * bm
        nrows = min(lq - m0, bm)
        q_rows = q[q0 + torch.clamp(m0 + torch.arange(bm), max=lq - 1)]  # rows past the end re-read the last
        o_cta, lse_cta = cta(Walk(t, x, q_rows, nrows, kv0, lk, m0, lk - lq))
        out[q0 + m0 : q0 + m0 + nrows] = o_cta[:, :nrows].transpose(0, 1).to(torch.bfloat16)
        lse[q0 + m0 : q0 + m0 + nrows] = lse_cta[:, :nrows].transpose(0, 1)
        written[q0 + m0 : q0 + m0 + nrows] += 1
    assert torch.equal(written, torch.ones_like(written)), "the grid must write every query row exactly once"
    return out, lse


@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_smoke(nn: str) -> None:
    problem = _problem(nn)
    for seed in (3, 4):
        _check_against_anchor(problem, problem.make_inputs(problem.smoke, seed=seed), kernel=emulate_wgmma)


@pytest.mark.slow
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_a_larger_shape(nn: str) -> None:
    problem = _problem(nn)
    _check_against_anchor(problem, problem.make_inputs(_larger(problem), seed=5), kernel=emulate_wgmma)


def test_the_anchor_check_rejects_a_wrong_page_gather() -> None:
    problem = _problem("06")
    inputs = problem.make_inputs(problem.smoke, seed=3)
    i = list(problem.inputs).index("kv_indices")
    shifted = (*inputs[:i], inputs[i].roll(1), *inputs[i + 1 :])
    with pytest.raises(AssertionError, match="allowance"):
        _check_against_anchor(problem, inputs, emulated=shifted, kernel=emulate_wgmma)


def test_the_shared_memory_model_catches_an_early_overwrite() -> None:
    """Copying into a buffer whose reader the other warpgroup may not have retired yet is refused."""
    mem = SharedMemory()
    mem.write(("k", 0), "tile 0")
    mem.barrier()
    mem.issue(("k", 0))
    mem.wait(0)  # this warpgroup retired it, but no barrier since: the other may still be reading
    with pytest.raises(AssertionError, match="while a wgmma reads it"):
        mem.write(("k", 0), "tile 2")
    mem.barrier()
    mem.write(("k", 0), "tile 2")
    with pytest.raises(AssertionError, match="before a barrier published it"):
        mem.issue(("k", 0))
