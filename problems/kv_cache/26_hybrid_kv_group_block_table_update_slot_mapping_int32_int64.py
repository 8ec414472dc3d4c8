"""Per-step block-table maintenance for a hybrid model's KV-cache groups: append new blocks, then slot mappings."""

# Source: vLLM V1 GPU model runner — BlockTables (vllm/v1/worker/gpu/block_table.py):
#   append_block_ids + apply_staged_writes (per KV-cache group, write the new block ids of a request
#   at column num_blocks[g, req], or at 0 when the request slot is reused ("overwrite"), and bump
#   num_blocks) followed by _compute_slot_mappings_kernel (slot = block_table[g][req][pos // bs_g] *
#   bs_g + pos % bs_g for every scheduled token, PAD_SLOT_ID = -1 for the padded tail). Written from
#   those semantics (no context parallelism).
# Production shape: a hybrid model with two KV-cache groups of different block sizes (16 and 64
#   tokens), max_num_seqs 1024, max_model_len 65536 (block-table width cdiv(65536, 16) = 4096 for both
#   groups), max_num_batched_tokens 8192 (64 of them padding); 256 scheduled requests, 48 of which
#   receive new blocks this step (new prefills, continuing chunked prefills, decodes crossing a block).

from __future__ import annotations

import math

import torch

from problems._common import Cost, distinct_ints, generator, nbytes
from problems.kv_cache._util import cpu_gen, seq_lens

ID = "p26"
NAME = "hybrid_kv_group_block_table_update_slot_mapping_int32_int64"
FAMILY = "kv_cache"
SOURCE = "vLLM"
DESCRIPTION = """\
One scheduler step of vLLM's block-table bookkeeping for a hybrid model with 2 KV-cache groups
(group g allocates blocks of block_sizes[g] tokens; block_sizes = (16, 64) here).

Persistent state (updated in place):
- `block_tables` [2, max_num_reqs, max_num_blocks] int32: per group, one row of physical block ids
  per request slot, in logical order; only the first num_blocks[g, r] entries of a row are live, the
  rest hold stale ids and must be left alone.
- `num_blocks` [2, max_num_reqs] int32: live entries per (group, request slot).

Inputs:
- `block_sizes` [2] int32.
- `update_req_indices` [num_updates] int32: distinct request slots that receive new blocks.
- `update_overwrite` [num_updates] int32: 1 if the slot starts a new request (its row is rewritten
  from column 0 and its stale num_blocks ignored), 0 to append after the live entries.
- `update_counts` [2, num_updates] int32: number of new blocks per group and update (may be 0).
- `update_block_ids` [2, max_new_blocks] int32: per group, the new ids of all updates concatenated in
  update order (update u's ids follow those of updates 0..u-1); the unused tail is -1.
- `idx_mapping` [num_reqs] int32: request slot of each scheduled request (batch row).
- `query_start_loc` [num_reqs + 1] int32: exclusive prefix sums of the scheduled token counts;
  tokens query_start_loc[b] .. query_start_loc[b+1]-1 belong to batch row b.
- `positions` [max_num_tokens] int64: logical position of each scheduled token (tail: padding).

Semantics:
1. For each update u and group g: start = 0 if update_overwrite[u] else num_blocks[g, r] with
   r = update_req_indices[u]; write the update's update_counts[g, u] ids to
   block_tables[g, r, start ...]; then num_blocks[g, r] = start + update_counts[g, u].
2. Output `slot_mappings` [2, max_num_tokens] int64, computed from the updated tables: for every
   token t < query_start_loc[num_reqs] of batch row b, with bs = block_sizes[g], p = positions[t],
   r = idx_mapping[b]: slot_mappings[g, t] = block_tables[g, r, p // bs] * bs + p % bs. Every token
   t >= query_start_loc[num_reqs] (padding) gets -1.
All other state keeps its contents."""
NOTES = ""
AXES = {
    "num_groups": 2,
    "max_num_reqs": "var",
    "max_num_blocks": "var",
    "num_updates": "var",
    "max_new_blocks": "var",
    "num_reqs": "var",
    "len_query_start_loc": "var",
    "max_num_tokens": "var",
    "num_padding": "var",
}
INPUTS = {
    "block_tables": (("num_groups", "max_num_reqs", "max_num_blocks"), "int32"),
    "num_blocks": (("num_groups", "max_num_reqs"), "int32"),
    "block_sizes": (("num_groups",), "int32"),
    "update_req_indices": (("num_updates",), "int32"),
    "update_overwrite": (("num_updates",), "int32"),
    "update_counts": (("num_groups", "num_updates"), "int32"),
    "update_block_ids": (("num_groups", "max_new_blocks"), "int32"),
    "idx_mapping": (("num_reqs",), "int32"),
    "query_start_loc": (("len_query_start_loc",), "int32"),
    "positions": (("max_num_tokens",), "int64"),
}
OUTPUTS = {"slot_mappings": (("num_groups", "max_num_tokens"), "int64")}
INPLACE: tuple[str, ...] = ("block_tables", "num_blocks")
WORKLOAD = {
    "num_groups": 2,
    "max_num_reqs": 1024,
    "max_num_blocks": 4096,
    "num_updates": 48,
    "max_new_blocks": 768,
    "num_reqs": 256,
    "len_query_start_loc": 257,
    "max_num_tokens": 8192,
    "num_padding": 64,
}
SMOKE = {
    "num_groups": 2,
    "max_num_reqs": 16,
    "max_num_blocks": 64,
    "num_updates": 4,
    "max_new_blocks": 16,
    "num_reqs": 8,
    "len_query_start_loc": 9,
    "max_num_tokens": 80,
    "num_padding": 5,
}
TOLERANCE_NOTE = "Integer outputs and state: exact match."

BLOCK_SIZES = (16, 64)
#: physical block ids are drawn from a pool this large per group
POOL = 1 << 20


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    g = cpu_gen(gen)
    ng, nr, nmb = workload["num_groups"], workload["max_num_reqs"], workload["max_num_blocks"]
    b, u, t_max = workload["num_reqs"], workload["num_updates"], workload["max_num_tokens"]
    bss = BLOCK_SIZES[:ng]
    fine = min(bss)
    max_len = nmb * fine
    # running requests hold at most half the model length, so live blocks always fit the pool
    max_ctx = max_len // 2
    real = t_max - workload["num_padding"]

    # batch rows: the first u receive blocks; of those, ~half are new requests, ~quarter continue a
    # chunked prefill and the rest are decodes crossing a block boundary; rows u.. are steady decodes
    n_new = max(1, u // 2)
    n_cont = max(1, u // 4) if u > 2 else 0
    n_prefill = n_new + n_cont
    qlens = [1] * b
    for i, q in enumerate(seq_lens(n_prefill, real - (b - n_prefill), g)):
        qlens[i] = q
    ctx: list[int] = []
    for i in range(b):
        q = qlens[i]
        if i < n_new:
            c = 0
        elif i < n_prefill:
            c = int(torch.randint(1, max(2, min(max_ctx, max_len - q)), (1,), generator=g))
        elif i < u:  # decode whose token opens a new block of the finest group
            c = fine * int(torch.randint(1, max_ctx // fine, (1,), generator=g))
        else:  # decode that fits the blocks it already has in every group
            c = fine * int(torch.randint(0, max_ctx // fine, (1,), generator=g))
            c += int(torch.randint(1, fine, (1,), generator=g))
        ctx.append(c)

    # request slots: batch rows take distinct slots; some other slots are live but not scheduled
    slots = torch.randperm(nr, generator=g)
    idx_mapping = slots[:b]
    # each group's fresh block ids, as many as its requests hold once updated (every row ends with ``need`` blocks)
    used = [sum(math.ceil((ctx[i] + qlens[i]) / bs) for i in range(b)) for bs in bss]
    ids = [distinct_ints(POOL, n, g).to(torch.int32) for n in used]
    block_tables = torch.randint(0, POOL, (ng, nr, nmb), generator=g).to(torch.int32)  # stale ids
    num_blocks = torch.randint(0, nmb + 1, (ng, nr), generator=g).to(torch.int32)  # stale counts
    update_counts = torch.zeros((ng, u), dtype=torch.int32)
    update_ids = torch.full((ng, workload["max_new_blocks"]), -1, dtype=torch.int32)
    fresh = [0] * ng
    for k, bs in enumerate(bss):
        for i in range(b):
            r = int(idx_mapping[i])
            have = 0 if i < n_new else math.ceil(ctx[i] / bs)
            need = math.ceil((ctx[i] + qlens[i]) / bs)
            if i >= n_new:  # a running request: its live blocks are already in the table
                block_tables[k, r, :have] = ids[k][fresh[k] : fresh[k] + have]
                fresh[k] += have
                num_blocks[k, r] = have
            if i < u:
                n = need - have
                at = int(update_counts[k].sum())
                if at + n > update_ids.shape[1]:
                    raise ValueError("max_new_blocks is too small for this batch")
                update_ids[k, at : at + n] = ids[k][fresh[k] : fresh[k] + n]
                fresh[k] += n
                update_counts[k, i] = n
            elif need != have:
                raise AssertionError("a steady decode must not need a new block")
    update_overwrite = torch.tensor([1 if i < n_new else 0 for i in range(u)], dtype=torch.int32)
    # the scheduler's batch order is not the update order
    order = torch.randperm(b, generator=g)
    q_sorted = [qlens[int(i)] for i in order]
    positions = torch.zeros(t_max, dtype=torch.int64)
    at = 0
    for i in order.tolist():
        positions[at : at + qlens[i]] = torch.arange(ctx[i], ctx[i] + qlens[i])
        at += qlens[i]
    qsl = torch.zeros(b + 1, dtype=torch.int32)
    qsl[1:] = torch.tensor(q_sorted, dtype=torch.int32).cumsum(0)
    return tuple(
        x.to(device)
        for x in (
            block_tables,
            num_blocks,
            torch.tensor(bss, dtype=torch.int32),
            idx_mapping[:u].to(torch.int32),
            update_overwrite,
            update_counts,
            update_ids,
            idx_mapping[order].to(torch.int32),
            qsl,
            positions,
        )
    )


def reference(
    block_tables: torch.Tensor,
    num_blocks: torch.Tensor,
    block_sizes: torch.Tensor,
    update_req_indices: torch.Tensor,
    update_overwrite: torch.Tensor,
    update_counts: torch.Tensor,
    update_block_ids: torch.Tensor,
    idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
) -> torch.Tensor:
    dev = block_tables.device
    ng = block_tables.shape[0]
    # 1. staged appends, all updates of a group in one scatter
    req = update_req_indices.to(torch.int64)
    counts = update_counts.to(torch.int64)
    start = torch.where(update_overwrite.bool()[None, :], 0, num_blocks[:, req].to(torch.int64))
    upd = torch.arange(req.numel(), device=dev)
    for g in range(ng):
        owner = torch.repeat_interleave(upd, counts[g])
        first = torch.cumsum(counts[g], 0) - counts[g]
        col = start[g, owner] + torch.arange(owner.numel(), device=dev) - first[owner]
        block_tables[g, req[owner], col] = update_block_ids[g, : owner.numel()]
    num_blocks[:, req] = (start + counts).to(num_blocks.dtype)
    # 2. slot mappings from the updated tables; the padded tail is -1
    lens = (query_start_loc[1:] - query_start_loc[:-1]).to(torch.int64)
    row = idx_mapping.to(torch.int64)[torch.repeat_interleave(torch.arange(lens.numel(), device=dev), lens)]
    pos = positions[: row.numel()]
    out = torch.full((ng, positions.numel()), -1, dtype=torch.int64, device=dev)
    for g, bs in enumerate(block_sizes.tolist()):
        blk = block_tables[g, row, torch.div(pos, bs, rounding_mode="floor")].to(torch.int64)
        out[g, : row.numel()] = blk * bs + pos % bs
    return out


def cost(workload: dict[str, int]) -> Cost:
    ng, u, b = workload["num_groups"], workload["num_updates"], workload["num_reqs"]
    t_max, real = workload["max_num_tokens"], workload["max_num_tokens"] - workload["num_padding"]
    i32, i64 = torch.int32, torch.int64
    moved = (
        nbytes((2 * u + ng * u,), i32)  # update slots, flags, counts
        + 2 * nbytes((ng, u), i32)  # num_blocks read and written
        + 2 * nbytes((ng, workload["max_new_blocks"]), i32)  # new ids read, table entries written (bound)
        + nbytes((2 * b + 1 + ng,), i32)  # idx_mapping, query_start_loc, block_sizes
        + nbytes((real,), i64)  # positions
        + nbytes((ng, real), i32)  # one table entry per token and group
        + nbytes((ng, t_max), i64)  # slot mappings
    )
    # per token and group: divide, modulo, multiply-add
    return Cost(bytes=moved, flops={"int": 4.0 * ng * real})
