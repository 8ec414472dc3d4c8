"""Shared building blocks for problem modules (torch + numpy only: runs on the bare GPU machine).

The problem module contract (DESIGN.md §8) is documented in ``problems/FORMAT.md``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

#: FLOP classes a cost model may use; device profiles give a peak rate for each.
FLOP_CLASSES = ("fp32", "bf16", "fp8", "fp4", "int")

DTYPE_BYTES = {
    torch.float64: 8,
    torch.float32: 4,
    torch.bfloat16: 2,
    torch.float16: 2,
    torch.float8_e4m3fn: 1,
    torch.float8_e5m2: 1,
    torch.uint8: 1,
    torch.int8: 1,
    torch.int32: 4,
    torch.int64: 8,
    torch.bool: 1,
}

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}


@dataclass(frozen=True)
class Cost:
    """Minimum work of one call: bytes that must cross HBM and FLOPs by class.

    ``bytes`` counts every input read once and every output written once (the
    compulsory traffic of a perfectly fused kernel); ``flops`` maps a class of
    ``FLOP_CLASSES`` to the count of useful floating-point operations (a
    multiply-add is 2 FLOPs). Speed of light = max(bytes/bandwidth,
    sum(flops[c]/peak[c])).
    """

    bytes: int
    flops: Mapping[str, float] = field(default_factory=dict)
    #: The FLOPs no correct formulation can skip, where fewer than ``flops`` count (a softmax before a top-k that
    #: the top-k of the logits makes unnecessary, a stabilisation float64 arithmetic does not need): the verifier
    #: prices eager work against it (verifier README, "A floor no formulation escapes"). ``None``: ``flops`` are.
    necessary_flops: float | None = None

    def __post_init__(self) -> None:
        if self.bytes <= 0:
            raise ValueError(f"Cost.bytes must be positive, got {self.bytes}")
        for cls, n in self.flops.items():
            if cls not in FLOP_CLASSES:
                raise ValueError(f"unknown FLOP class {cls!r}; use one of {FLOP_CLASSES}")
            if n < 0:
                raise ValueError(f"Cost.flops[{cls!r}] must be >= 0, got {n}")
        if self.necessary_flops is not None and not 0 < self.necessary_flops <= self.total_flops:
            raise ValueError(f"Cost.necessary_flops must be in (0, total_flops], got {self.necessary_flops}")

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    @property
    def floor_flops(self) -> float:
        """The work every formulation of the operator does: ``necessary_flops``, else every useful FLOP."""
        return self.total_flops if self.necessary_flops is None else float(self.necessary_flops)


def nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    """Bytes of a dense tensor of ``shape`` and ``dtype``."""
    return math.prod(shape) * DTYPE_BYTES[dtype]


def upcast(x: torch.Tensor) -> torch.Tensor:
    """Promote to at least float32 without ever lowering a float64 anchor.

    References compute in float32-promoted math like the upstream kernels; the
    verifier's float64 anchor run passes float64 inputs, which must stay float64.
    """
    if x.dtype == torch.float64:
        return x
    return x.float()


@contextmanager
def tensor_core_sums() -> Iterator[None]:
    """float32 matmuls within it summed on tensor cores (cuda's TF32), as a GPU kernel's MMA sums them.

    Only for operands that are bf16 values upcast (exact in TF32: the products are exact and only the
    accumulation differs). A reference's error against the float64 anchor, and with it the allowance, is then
    that of the sums an honest kernel makes: p09's IEEE-summed logits gave ``lse`` an error a third of the
    tensor-core kernels' (head dim 256), which sat at 0.55-1.07 of the allowance (benchmarks/RESULTS.md,
    "H100 ... (session 46)"). No effect on the cpu or on the float64 anchor.
    """
    was = torch.backends.cuda.matmul.allow_tf32  # (torch >= 2.6; fp32_precision is 2.9's)
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = was


def generator(seed: int, device: str | torch.device) -> torch.Generator:
    """A torch generator on ``device`` seeded with ``seed`` (any 63-bit int)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed & 0x7FFF_FFFF_FFFF_FFFF)
    return gen


def randn(
    shape: Sequence[int],
    dtype: torch.dtype,
    gen: torch.Generator,
    device: str | torch.device,
    *,
    scale: float = 1.0,
    shift: float = 0.0,
) -> torch.Tensor:
    """Normal draws made in float32 then cast, so every dtype sees the same distribution."""
    x = torch.randn(tuple(shape), generator=gen, device=device, dtype=torch.float32)
    if scale != 1.0:
        x.mul_(scale)
    if shift != 0.0:
        x.add_(shift)
    return x.to(dtype)


def rand(
    shape: Sequence[int],
    dtype: torch.dtype,
    gen: torch.Generator,
    device: str | torch.device,
    *,
    low: float = 0.0,
    high: float = 1.0,
) -> torch.Tensor:
    """Uniform draws in [low, high), made in float32 then cast."""
    x = torch.rand(tuple(shape), generator=gen, device=device, dtype=torch.float32)
    return (x * (high - low) + low).to(dtype)


def randint(
    low: int,
    high: int,
    shape: Sequence[int],
    gen: torch.Generator,
    device: str | torch.device,
    dtype: torch.dtype = torch.int64,
) -> torch.Tensor:
    return torch.randint(low, high, tuple(shape), generator=gen, device=device, dtype=dtype)


def random_bytes(shape: Sequence[int], gen: torch.Generator, device: str | torch.device) -> torch.Tensor:
    """Uniform uint8 values (raw bytes), drawn eight at a time as full-range int64 words: ``randint(0, 256)`` draws
    one 32-bit number per byte, 4x the time on cpu, where p25's two 12.6 MB caches are drawn for every call."""
    n = math.prod(shape)
    # ``random_(int64 min, None)`` is torch's full 64-bit range: every byte of a word is uniform (``random_()``
    # alone draws [0, 2**63): the top byte would stay below 128)
    words = torch.empty((n + 7) // 8, dtype=torch.int64, device=device).random_(-(2**63), None, generator=gen)
    flat = words.view(torch.uint8)
    return (flat if flat.numel() == n else flat[:n].clone()).view(tuple(shape))


def distinct_ints(high: int, count: int, gen: torch.Generator) -> torch.Tensor:
    """``count`` distinct int64 values of [0, ``high``) in random order, distributed as the first ``count`` of
    ``randperm(high)``, without the permutation (p26 takes a few dozen block ids of a 2**20 pool: two
    ``randperm(2**20)`` were 0.1 s each on cpu, most of a draw). Uniform draws with repeats dropped, each value kept
    where it first came: a sample without replacement, in the order drawn. ``gen``: a cpu generator."""
    if not 0 <= count <= high:
        raise ValueError(f"cannot draw {count} distinct values of [0, {high})")
    found = torch.empty(0, dtype=torch.int64)
    while found.numel() < count:  # a repeat is rare while count << high: one round, nearly always
        drawn = torch.cat((found, torch.randint(0, high, (2 * (count - found.numel()) + 8,), generator=gen)))
        _, inverse = torch.unique(drawn, return_inverse=True)
        positions = torch.arange(drawn.numel())
        first = torch.full((int(inverse.max()) + 1,), drawn.numel()).scatter_reduce_(0, inverse, positions, "amin")
        found = drawn[first.sort().values]
    return found[:count]


def randperm(n: int, gen: torch.Generator, device: str | torch.device) -> torch.Tensor:
    return torch.randperm(n, generator=gen, device=device)


def seq_lens(
    batch: int,
    total: int,
    gen: torch.Generator,
    *,
    minimum: int = 1,
) -> list[int]:
    """``batch`` random positive lengths summing exactly to ``total`` (ragged batches)."""
    if total < batch * minimum:
        raise ValueError(f"cannot split {total} into {batch} lengths of at least {minimum}")
    spare = total - batch * minimum
    weights = torch.rand(batch, generator=_cpu_gen(gen)) + 1e-3
    raw = (weights / weights.sum() * spare).floor().to(torch.int64)
    raw[: spare - int(raw.sum())] += 1
    return [int(v) + minimum for v in raw.tolist()]


def cu_seqlens(lens: Sequence[int], device: str | torch.device) -> torch.Tensor:
    """Exclusive prefix sums [0, l0, l0+l1, ...] as int32 (the ragged ``indptr`` format)."""
    out = torch.zeros(len(lens) + 1, dtype=torch.int32)
    out[1:] = torch.tensor(list(lens), dtype=torch.int32).cumsum(0)
    return out.to(device)


def lengths(indptr: torch.Tensor) -> list[int]:
    """The lengths a ragged ``indptr`` (``cu_seqlens``'s format) delimits."""
    bounds = indptr.tolist()
    return [end - start for start, end in itertools.pairwise(bounds)]


def paged_lengths(kv_indptr: torch.Tensor, kv_last_page_len: torch.Tensor | None, page_size: int) -> list[int]:
    """Each sequence's tokens in a page table: its full pages and its last page's fill (one token a page where the
    table has no ``kv_last_page_len``, at page size 1)."""
    pages = lengths(kv_indptr)
    last = kv_last_page_len.tolist() if kv_last_page_len is not None else [1] * len(pages)
    return [(p - 1) * page_size + n for p, n in zip(pages, last, strict=True)]


def causal_pairs(q_lens: Sequence[float], kv_lens: Sequence[float]) -> float:
    """(query, key) pairs a bottom-right causal mask keeps, summed over sequences of Lq queries and Lk >= Lq keys:
    sum over queries i of (Lk - Lq + i + 1) = Lq*Lk - Lq*(Lq-1)/2."""
    return float(sum(lq * lk - lq * (lq - 1) / 2 for lq, lk in zip(q_lens, kv_lens, strict=True)))


def mean_causal_pairs(batch: int, total_q: float, total_kv: float) -> float:
    """``causal_pairs`` at the mean lengths (nominal: a draw's lengths are random, and an input-priced cost counts
    its own)."""
    return causal_pairs([total_q / batch] * batch, [total_kv / batch] * batch)


@dataclass(frozen=True)
class PagedLayout:
    """A valid paged-cache index structure (FlashInfer's CSR page table).

    ``kv_indptr[b]:kv_indptr[b+1]`` slices ``kv_indices`` to the pages of
    sequence ``b``; ``kv_last_page_len[b]`` is how many slots of its last page
    are filled. Pages are drawn without replacement from ``num_pages`` so no two
    sequences share a page, and are shuffled so a kernel cannot assume contiguity.
    """

    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    kv_last_page_len: torch.Tensor
    seq_lens: list[int]
    num_pages: int


def paged_layout(
    lens: Sequence[int],
    page_size: int,
    gen: torch.Generator,
    device: str | torch.device,
    *,
    spare_pages: int = 8,
) -> PagedLayout:
    """Page table for sequences of the given lengths, with ``spare_pages`` unused pages."""
    pages_per_seq = [max(1, math.ceil(n / page_size)) for n in lens]
    used = sum(pages_per_seq)
    num_pages = used + spare_pages
    perm = torch.randperm(num_pages, generator=_cpu_gen(gen))[:used].to(torch.int32)
    indptr = cu_seqlens(pages_per_seq, "cpu")
    last = torch.tensor(
        [n - (p - 1) * page_size for n, p in zip(lens, pages_per_seq, strict=False)], dtype=torch.int32
    )
    return PagedLayout(
        kv_indptr=indptr.to(device),
        kv_indices=perm.to(device),
        kv_last_page_len=last.to(device),
        seq_lens=list(lens),
        num_pages=num_pages,
    )


def slot_mapping(
    num_tokens: int,
    num_slots: int,
    gen: torch.Generator,
    device: str | torch.device,
    *,
    num_padding: int = 0,
) -> torch.Tensor:
    """Distinct destination slots for ``num_tokens`` tokens; the last ``num_padding`` are -1.

    vLLM pads a batch with slot -1 for tokens that must not be written.
    """
    slots = torch.randperm(num_slots, generator=_cpu_gen(gen))[:num_tokens].to(torch.int64)
    if num_padding:
        slots[num_tokens - num_padding :] = -1
    return slots.to(device)


def distinct_topk_scores(
    shape: Sequence[int],
    k: int,
    dtype: torch.dtype,
    gen: torch.Generator,
    device: str | torch.device,
    *,
    min_gap: float | None = None,
) -> torch.Tensor:
    """Scores whose top-``k`` set along the last dim is unique (no near-ties at the boundary).

    Normal draws cast to ``dtype``; in every row whose k-th and (k+1)-th largest values are within
    ``min_gap`` (relative to max(|k-th|, 1); default 4 eps(dtype)) the values outside the top k are
    lowered by twice that margin (at least 2 eps(dtype) of it), so any correct top-k agrees exactly.
    One pass, no redraws: bf16 has 8 bits of mantissa, and at 512 scores a row the boundary pair
    is that close in most rows, so rejection sampling failed at production shapes.
    """
    gap = min_gap if min_gap is not None else 4 * torch.finfo(dtype).eps
    x = randn(shape, torch.float32, gen, device).to(dtype)
    if k >= shape[-1]:
        return x
    top = torch.topk(x.float(), k + 1, dim=-1)
    kth = top.values[..., k - 1 : k]
    scale = kth.abs().clamp_min(1.0)
    near_tie = (kth - top.values[..., k : k + 1]) <= gap * scale
    # the lowered values round to dtype; twice a margin of at least eps keeps them below the gap
    drop = 2 * torch.clamp(gap * scale, min=torch.finfo(dtype).eps * scale)
    outside = torch.ones(x.shape, dtype=torch.bool, device=x.device).scatter_(-1, top.indices[..., :k], False)
    lowered = (x.float() - drop).to(dtype)
    return torch.where(near_tie & outside, lowered, x)


def _cpu_gen(gen: torch.Generator) -> torch.Generator:
    """A CPU generator derived from ``gen`` (randperm of index tables is done on CPU)."""
    if gen.device.type == "cpu":
        return gen
    seed = int(torch.randint(0, 2**62, (1,), generator=gen, device=gen.device).item())
    return torch.Generator().manual_seed(seed)
