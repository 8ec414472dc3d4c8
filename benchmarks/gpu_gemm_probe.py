"""Localise errors of the CuTe DSL tensor-core GEMM engine (problems/_wgmma_cutedsl.py) on the GPU, in one call.

Run on the GPU machine from the repository root, after the DSLs are staged (benchmarks/gpu_pack.py):

    export PYTHONPATH=$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages CUDA_PATH=/usr/local/cuda
    python3 benchmarks/gpu_gemm_probe.py --out $OUT                # every case (~2-3 min, mostly compiles)
    python3 benchmarks/gpu_gemm_probe.py --only fp8_block,fp8_split --out $OUT

Each variant of benchmarks/gpu_gemm_probe_kernels.py (bf16 / fp8, BN 128 / 256, block scales, gate/up
pairs with a second weight source, split-N, an A with two k-tiles per B block) is compiled once and
run on small cases: one tile, several tiles, persistent wrap-around (fewer CTAs than tiles, more
k-tiles than ring stages), ragged edges (rows and N not multiples of the tile). The output is
prefilled with NaN, so elements no thread stores show as `unwritten`. Input patterns:

- random: normal operands (and scales in [1, 2)): the overall verdict;
- rowmap: C[r, n] = r mod 256 exactly (two k columns of A carry r's digits): which A row reached
  each output row (a wrong fragment row or A tile shows as an offset);
- colmap: C[l, r, n] = n mod 256 + 256 l' exactly, l' = the B tile (2 + l from the second source):
  which B row and which B tile reached each output column;
- kmask: A = 2^kt in k-tile kt, B = 1, scales 1: C / bk is the bit mask of the k-tiles a tile read
  (a skipped, repeated or stale ring slot shows as a wrong mask);
- scales (fp8): A = B = 1 with distinct scales per (k-tile, row) and (column block, k-tile).

An element is wrong when |C - expected| > 1e-3 * sum |a b f| (the exact sum of magnitudes: rounding
stays far below, any wrong product or scale far above). Per case: wrong and unwritten counts, a map
of tiles (rows = m tiles, columns = n tiles) and an in-tile map (8 x 8 cells over all tiles; rows
0..63 belong to warpgroup 0), each cell '.' (none wrong), '1'..'9' (tenths), '#' (all); decoded
offsets / masks for the exact patterns. Text report on stdout and OUT/gemm_probe.txt, one JSON object
per case in OUT/gemm_probe.jsonl; exit 1 if a case fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

WRONG_RATIO = 1e-3
CELL = 8  # rows and columns per in-tile map cell
SENTINEL = float("nan")


class Spec:
    """The torch side of a variant: what its kernel computes (mirrors gpu_gemm_probe_kernels.Variant)."""

    def __init__(self, dtype: str, bn: int, *, n_b: int = 1, split_n: bool = False, scaled: bool = False,
                 alt: bool = False, kdiv: int = 1) -> None:  # fmt: skip
        self.dtype, self.bn, self.n_b, self.split_n = dtype, bn, n_b, split_n
        self.scaled, self.alt, self.kdiv = scaled, alt, kdiv
        self.torch_dtype = {"BFloat16": torch.bfloat16, "Float8E4M3FN": torch.float8_e4m3fn}[dtype]
        self.bm = 64 if split_n else 128
        self.bk = 64 if dtype == "BFloat16" else 128  # 128 bytes of K a k-tile

    def kwargs(self) -> dict[str, Any]:
        return {"n_b": self.n_b, "split_n": self.split_n, "scaled": self.scaled, "alt": self.alt, "kdiv": self.kdiv}


VARIANTS = {
    "bf16_bn128": Spec("BFloat16", 128),
    "fp8_bn128": Spec("Float8E4M3FN", 128),  # fp8 operands without scales: layout alone
    "fp8_block": Spec("Float8E4M3FN", 128, scaled=True),  # W.block_fp8_tile: p52 p53 p54 p56
    "bf16_bn256": Spec("BFloat16", 256),  # p47 p48 GEMM2
    "bf16_pair_alt": Spec("BFloat16", 128, n_b=2, alt=True),  # p47 p48 GEMM1: gate/up pairs, shared weights
    "fp8_split": Spec("Float8E4M3FN", 128, n_b=2, split_n=True, scaled=True),  # p44 GEMM1
    "fp8_kdiv2": Spec("Float8E4M3FN", 128, scaled=True, kdiv=2),  # p44 GEMM2: two A terms a B block
}


class Case:
    def __init__(self, variant: str, pattern: str, rows: int, n: int, k: int, ctas: int) -> None:
        self.variant, self.pattern, self.rows, self.n, self.k, self.ctas = variant, pattern, rows, n, k, ctas

    @property
    def spec(self) -> Spec:
        return VARIANTS[self.variant]

    def name(self) -> str:
        return f"{self.variant}/{self.pattern} rows={self.rows} N={self.n} K={self.k} ctas={self.ctas}"


def cases() -> list[Case]:
    """Most telling first: one tile, exact patterns, then many tiles, wrap-around and ragged edges."""
    out = []
    for v, spec in VARIANTS.items():
        k8 = 8 * spec.bk  # eight k-tiles of A: the kmask limit (2^7 is exact in fp8)
        out += [
            Case(v, "random", spec.bm, spec.bn, 4 * spec.bk, 1),
            Case(v, "rowmap", spec.bm, spec.bn, 2 * spec.bk, 1),
            Case(v, "colmap", spec.bm, spec.bn, 2 * spec.bk, 1),
            Case(v, "kmask", spec.bm, spec.bn, k8, 1),
        ]
        if spec.scaled:
            out.append(Case(v, "scales", 3 * spec.bm, 2 * spec.bn, 4 * spec.bk, 2))
        out += [
            Case(v, "random", 4 * spec.bm, 3 * spec.bn, 16 * spec.bk, 132),  # several tiles, one each
            Case(v, "random", 5 * spec.bm, 6 * spec.bn, 16 * spec.bk, 7),  # wrap-around, 16 k-tiles
            Case(v, "kmask", 5 * spec.bm, 6 * spec.bn, k8, 7),
            Case(v, "random", 200, 576, 2 * spec.bk * spec.kdiv, 3),  # ragged, fewer k-tiles than stages
        ]
    return out


# ------------------------------------------------------------------------------------------------
# inputs and the expected output
# ------------------------------------------------------------------------------------------------


class Inputs:
    """Operands as the kernel takes them and in float64: A [rows, K], B / Alt [L, N, K_B], SA, SB."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, alt: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor):
        self.a, self.b, self.alt, self.sa, self.sb = a, b, alt, sa, sb


def _digits(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(v // 16 % 16, v % 16): two exact small integers (fp8 e4m3 holds 0..16 exactly) giving v mod 256."""
    return (values // 16 % 16).double(), (values % 16).double()


def make_inputs(case: Case, device: str, seed: int = 0) -> Inputs:
    spec = case.spec
    gen = torch.Generator(device=device).manual_seed(seed)
    rows, n, k = case.rows, case.n, case.k
    kb = k // spec.kdiv
    n_tiles = -(-n // spec.bn)
    lb = spec.n_b
    a = torch.zeros(rows, k, dtype=torch.float64, device=device)
    b = torch.zeros(lb, n, kb, dtype=torch.float64, device=device)
    alt = torch.zeros_like(b)
    sa = torch.ones(k // 128, rows, dtype=torch.float64, device=device)
    sb = torch.ones((lb if spec.split_n else 1) * n_tiles, kb // 128, dtype=torch.float64, device=device)
    if case.pattern == "random":
        a.normal_(generator=gen)
        b.normal_(generator=gen)
        alt.normal_(generator=gen)
        if spec.scaled:
            sa.uniform_(1, 2, generator=gen)
            sb.uniform_(1, 2, generator=gen)
    elif case.pattern == "rowmap":
        a[:, 0], a[:, 1] = _digits(torch.arange(rows, device=device))
        b[:, :, 0], b[:, :, 1] = 16, 1
        alt[:, :, 0], alt[:, :, 1] = 16, 1
    elif case.pattern == "colmap":
        a[:, 0], a[:, 1], a[:, 2] = 16, 1, 256
        hi, lo = _digits(torch.arange(n, device=device))
        for li in range(lb):
            for src, tile in ((b, li), (alt, 2 + li)):
                src[li, :, 0], src[li, :, 1], src[li, :, 2] = hi, lo, tile
    elif case.pattern == "kmask":
        kt = torch.arange(k, device=device) // spec.bk
        a[:] = (2.0**kt)[None, :]
        b.fill_(1)
        alt.fill_(1)
    elif case.pattern == "scales":
        a.fill_(1)
        b.fill_(1)
        r, t = torch.arange(rows, device=device), torch.arange(k // 128, device=device)
        sa[:] = 1 + ((7 * r[None, :] + 3 * t[:, None]) % 16) / 16
        s, t2 = torch.arange(sb.shape[0], device=device), torch.arange(sb.shape[1], device=device)
        sb[:] = 1 + ((5 * s[:, None] + t2[None, :]) % 8) / 8
    else:
        raise ValueError(f"unknown pattern {case.pattern!r}")
    # the operands as the kernel's dtype sees them (every pattern value is exact in fp8 and bf16)
    a, b, alt = (x.to(spec.torch_dtype).double() for x in (a, b, alt))
    return Inputs(a, b, alt, sa.float().double(), sb.float().double())


def expected(case: Case, x: Inputs, magnitude: bool = False) -> torch.Tensor:
    """C [L, rows, N] in float64 (`magnitude`: the same sum over |a b f|, the scale of rounding)."""
    spec = case.spec
    f = torch.abs if magnitude else (lambda t: t)
    a, b, alt, sa, sb = f(x.a), f(x.b), f(x.alt), f(x.sa), f(x.sb)
    rows, n, bk = case.rows, case.n, spec.bk
    n_tiles = -(-n // spec.bn)
    col_tile = torch.arange(n, device=a.device) // spec.bn
    odd = (torch.arange(rows, device=a.device) // spec.bm % 2 == 1)[:, None]
    out = torch.zeros(spec.n_b, rows, n, dtype=torch.float64, device=a.device)
    for li in range(spec.n_b):
        for kt in range(case.k // bk):
            kb = kt // spec.kdiv
            a_kt = a[:, kt * bk : (kt + 1) * bk]
            part = a_kt @ b[li, :, kb * bk : (kb + 1) * bk].t()
            if spec.alt:
                part = torch.where(odd, a_kt @ alt[li, :, kb * bk : (kb + 1) * bk].t(), part)
            if spec.scaled:
                sb_row = col_tile + (li * n_tiles if spec.split_n else 0)
                part = part * sa[kt][:, None] * sb[sb_row, kb][None, :]
            out[li] += part
    return out


# ------------------------------------------------------------------------------------------------
# diagnosis
# ------------------------------------------------------------------------------------------------


def _cell(fraction: float) -> str:
    if fraction <= 0:
        return "."
    if fraction >= 1:
        return "#"
    return str(min(9, max(1, int(fraction * 10))))


def _tiles(mask: torch.Tensor, bm: int, bn: int) -> torch.Tensor:
    """mask [rows, N] -> [m_tiles, bm, n_tiles, bn] (padding counts as right)."""
    rows, n = mask.shape
    mt, nt = -(-rows // bm), -(-n // bn)
    padded = torch.zeros(mt * bm, nt * bn, dtype=torch.float64, device=mask.device)
    padded[:rows, :n] = mask.double()
    return padded.view(mt, bm, nt, bn)


def tile_map(mask: torch.Tensor, bm: int, bn: int) -> list[str]:
    """One line per m tile, one character per n tile: the fraction of the tile's elements in `mask`."""
    t = _tiles(mask, bm, bn)
    sizes = _tiles(torch.ones_like(mask), bm, bn).sum(dim=(1, 3))
    frac = t.sum(dim=(1, 3)) / sizes
    return ["".join(_cell(float(v)) for v in line) for line in frac]


def in_tile_map(mask: torch.Tensor, bm: int, bn: int) -> list[str]:
    """The tile-relative map over all tiles: one line per 8 rows of a tile, one character per 8 columns."""
    t = _tiles(mask, bm, bn)
    live = _tiles(torch.ones_like(mask), bm, bn)
    cells = t.sum(dim=(0, 2)).view(bm // CELL, CELL, bn // CELL, CELL).sum(dim=(1, 3))
    sizes = live.sum(dim=(0, 2)).view(bm // CELL, CELL, bn // CELL, CELL).sum(dim=(1, 3)).clamp_min(1)
    frac = cells / sizes
    return [
        f"rows {CELL * i:3d}-{CELL * i + CELL - 1:3d} " + "".join(_cell(float(v)) for v in line)
        for i, line in enumerate(frac)
    ]


def _top(counter: Counter, label: Callable[[Any], str], n: int = 5) -> str:
    total = sum(counter.values())
    return ", ".join(f"{label(k)}: {v / total:.0%}" for k, v in counter.most_common(n))


def _signed(offset: torch.Tensor) -> torch.Tensor:
    """Offsets mod 256 as -128 .. 127."""
    return (offset + 128) % 256 - 128


def decode(case: Case, got: torch.Tensor, wrong: torch.Tensor) -> list[str]:
    """What the exact patterns say about the wrong elements."""
    if not bool(wrong.any()) or case.pattern not in ("rowmap", "colmap", "kmask"):
        return []
    spec = case.spec
    l_idx, r_idx, n_idx = wrong.nonzero(as_tuple=True)
    vals = got[l_idx, r_idx, n_idx]
    finite = torch.isfinite(vals)
    l_idx, r_idx, n_idx, vals = l_idx[finite], r_idx[finite], n_idx[finite], vals[finite].round().long()
    if vals.numel() == 0:
        return ["  decoded: every wrong element is NaN (unwritten)"]
    if case.pattern == "rowmap":
        offsets = Counter(_signed((vals - r_idx) % 256).tolist())
        return [f"  A row read for output row r, as (read - r) mod 256: {_top(offsets, lambda o: f'{o:+d}')}"]
    if case.pattern == "colmap":
        col = Counter(_signed((vals % 256 - n_idx) % 256).tolist())
        odd = r_idx // spec.bm % 2 == 1
        want = l_idx + (2 if spec.alt else 0) * odd
        tiles = Counter(zip(want.tolist(), (vals // 256).tolist(), strict=True))
        return [
            f"  B row read for output column n, as (read - n) mod 256: {_top(col, lambda o: f'{o:+d}')}",
            f"  B tile (expected -> read; 2, 3 = second source): {_top(tiles, lambda p: f'{p[0]}->{p[1]}')}",
        ]
    kt = case.k // spec.bk
    masks = Counter((vals // spec.bk).tolist())
    return [f"  k-tiles read (bit kt, expected {'1' * kt}): {_top(masks, lambda m: format(m, f'0{kt}b')[::-1])}"]


def diagnose(case: Case, got: torch.Tensor, x: Inputs) -> dict[str, Any]:
    """Compare the kernel's C [L, rows, N] (float32, NaN where unwritten) with the expected output."""
    spec = case.spec
    want = expected(case, x)
    scale = expected(case, x, magnitude=True).clamp_min(1e-30)
    got = got.double()
    unwritten = torch.isnan(got)
    ratio = ((got - want).abs() / scale).nan_to_num(nan=float("inf"))
    wrong = ratio > WRONG_RATIO
    lines = []
    for li in range(spec.n_b):
        if bool(wrong[li].any()):
            lines.append(f"  C[{li}] tile map (rows = m tiles of {spec.bm}, columns = n tiles of {spec.bn}):")
            lines += [f"    {s}" for s in tile_map(wrong[li], spec.bm, spec.bn)]
            owner = f"warpgroup {li}'s B tile" if spec.split_n else "warpgroup 0 = rows 0-63"
            lines.append(f"  C[{li}] in-tile map over all tiles ({CELL} x {CELL} cells; {owner}):")
            lines += [f"    {s}" for s in in_tile_map(wrong[li], spec.bm, spec.bn)]
        if bool(unwritten[li].any()):
            lines.append(f"  C[{li}] unwritten, in-tile map:")
            lines += [f"    {s}" for s in in_tile_map(unwritten[li], spec.bm, spec.bn)]
    lines += decode(case, got, wrong)
    finite = ratio[torch.isfinite(ratio)]
    return {
        "case": case.name(),
        "variant": case.variant,
        "pattern": case.pattern,
        "ok": not bool(wrong.any()),
        "wrong": int(wrong.sum()),
        "unwritten": int(unwritten.sum()),
        "total": wrong.numel(),
        "max_ratio": float(finite.max()) if finite.numel() else None,
        "lines": lines,
    }


# ------------------------------------------------------------------------------------------------
# the GPU run
# ------------------------------------------------------------------------------------------------


def _kernels_module() -> Any:
    path = Path(__file__).with_name("gpu_gemm_probe_kernels.py")
    spec = importlib.util.spec_from_file_location("gpu_gemm_probe_kernels", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _rows_k_l(x: torch.Tensor) -> torch.Tensor:
    """[L, rows, K] (or [rows, K]) as the (rows, K, L) view the engine's TMA tensors take."""
    return (x.unsqueeze(0) if x.dim() == 2 else x).permute(1, 2, 0)


def run_case(case: Case, kernel: Any, seed: int = 0, device: str = "cuda") -> dict[str, Any]:
    """Run one case through `kernel` (a compiled probe variant) and diagnose it."""
    spec = case.spec
    x = make_inputs(case, device, seed)
    dt = spec.torch_dtype
    a, b, alt = (t.to(dt).contiguous() for t in (x.a, x.b, x.alt))
    c = torch.full((spec.n_b, case.rows, case.n), SENTINEL, dtype=torch.float32, device=device)
    kernel(_rows_k_l(a), _rows_k_l(b), _rows_k_l(alt), x.sa.float().contiguous(), x.sb.float().contiguous(), c,
           case.ctas)  # fmt: skip
    if device == "cuda":
        torch.cuda.synchronize()
    return diagnose(case, c, x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=Path("."), help="folder for gemm_probe.txt / gemm_probe.jsonl")
    ap.add_argument("--only", default="", help="comma-separated variants (default: all)")
    ap.add_argument("--budget", type=float, default=170.0, help="seconds; later cases are skipped past it")
    args = ap.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    unknown = only - set(VARIANTS)
    if unknown:
        print(f"unknown variant(s) {sorted(unknown)}; choose from {sorted(VARIANTS)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    kernels = _kernels_module()
    start = time.monotonic()
    compiled: dict[str, Any] = {}  # variant -> kernel, or the exception its compile raised
    results, text = [], []

    def emit(line: str) -> None:
        print(line, flush=True)
        text.append(line)

    for case in cases():
        if only and case.variant not in only:
            continue
        if time.monotonic() - start > args.budget:
            emit(f"SKIP (budget) {case.name()}")
            continue
        try:
            if case.variant not in compiled:
                t0 = time.monotonic()
                try:
                    compiled[case.variant] = kernels.compile_variant(
                        kernels.Variant(case.spec.dtype, case.spec.bn, **case.spec.kwargs())
                    )
                    emit(f"compiled {case.variant} in {time.monotonic() - t0:.1f} s")
                except Exception as exc:
                    compiled[case.variant] = exc
            if isinstance(compiled[case.variant], Exception):
                raise compiled[case.variant]
            res = run_case(case, compiled[case.variant])
        except Exception as exc:  # a compile or launch failure is itself the finding
            res = {"case": case.name(), "variant": case.variant, "pattern": case.pattern, "ok": False,
                   "error": f"{type(exc).__name__}: {exc}"[:2000], "lines": []}  # fmt: skip
        results.append(res)
        if "error" in res:
            emit(f"ERROR {res['case']}: {res['error']}")
        else:
            emit(
                f"{'PASS' if res['ok'] else 'FAIL'} {res['case']}: wrong {res['wrong']}/{res['total']}, "
                f"unwritten {res['unwritten']}, max |err| / sum|abf| {res['max_ratio']}"
            )
        for line in res["lines"]:
            emit(line)
    failed = [r for r in results if not r["ok"]]
    emit(f"{len(results) - len(failed)} of {len(results)} cases pass ({time.monotonic() - start:.0f} s)")
    (args.out / "gemm_probe.txt").write_text("\n".join(text) + "\n")
    with (args.out / "gemm_probe.jsonl").open("w") as fh:
        for r in results:
            fh.write(json.dumps(r) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
