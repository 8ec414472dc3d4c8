"""Honest p51: the router logits padded with a `torch.empty` block to a tile of tokens, routed eagerly over every
padded row (`topk`, then a softmax over the k logits), and one TIRx kernel that runs each valid token's chosen local
experts from the padded routing tables (it reads their first `n` rows). A padded row's top-k indices are what `topk`
made of fresh memory (the sentinel's NaN rows on a draw, a reused block's bytes on a timed call): fresh
(``fresh_lines``), out of the twin draw's comparison, which rejected the plan while a line operator's result over
fresh memory was compared."""
# problem: p51
import torch
import tvm
from tvm.script import tirx as T

H = 64
INTER = 64
TOP_K = 4
TILE = 24


@T.prim_func
def experts(
    x_h: T.handle,
    gu_h: T.handle,
    gub_h: T.handle,
    dn_h: T.handle,
    dnb_h: T.handle,
    wt_h: T.handle,
    idx_h: T.handle,
    off_h: T.handle,
    out_h: T.handle,
):
    n = T.int32()
    padded = T.int32()
    e_n = T.int32()
    x = T.match_buffer(x_h, (n, H), "float32")
    gu = T.match_buffer(gu_h, (e_n, H, 2 * INTER), "float32")
    gub = T.match_buffer(gub_h, (e_n, 2 * INTER), "float32")
    dn = T.match_buffer(dn_h, (e_n, INTER, H), "float32")
    dnb = T.match_buffer(dnb_h, (e_n, H), "float32")
    wt = T.match_buffer(wt_h, (padded, TOP_K), "float32")
    idx = T.match_buffer(idx_h, (padded, TOP_K), "int64")
    off = T.match_buffer(off_h, (1,), "int64")
    out = T.match_buffer(out_h, (n, H), "float32")
    # float64 sums: the case is about padded routing rows, not about a summation order's error against the
    # reference's (float32 sums here were 3.02 x the reference's error on one CI draw in many)
    g = T.alloc_buffer((2 * INTER,), "float64")
    act = T.alloc_buffer((INTER,), "float64")
    acc = T.alloc_buffer((1,), "float64")
    row = T.alloc_buffer((H,), "float64")
    for t in range(n):
        for h in range(H):
            row[h] = T.float64(0)
        for s in range(TOP_K):
            e = T.Cast("int32", idx[t, s] - off[0])
            if e >= 0 and e < e_n:
                for c in range(2 * INTER):
                    g[c] = T.Cast("float64", gub[e, c])
                    for k in range(H):
                        g[c] = g[c] + T.Cast("float64", x[t, k]) * T.Cast("float64", gu[e, k, c])
                for c in range(INTER):
                    gate = T.min(g[2 * c], T.float64(7.0))
                    up = T.max(T.min(g[2 * c + 1], T.float64(7.0)), T.float64(-7.0))
                    act[c] = (up + T.float64(1.0)) * gate * T.sigmoid(T.float64(1.702) * gate)
                for h in range(H):
                    acc[0] = T.Cast("float64", dnb[e, h])
                    for c in range(INTER):
                        acc[0] = acc[0] + act[c] * T.Cast("float64", dn[e, c, h])
                    row[h] = row[h] + acc[0] * T.Cast("float64", wt[t, s])
        for h in range(H):
            out[t, h] = T.Cast("float32", row[h])

_experts = tvm.compile(experts, target="llvm")


def run(hidden_states, router_logits, gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias, local_expert_offset):
    n, experts_total = router_logits.shape
    padded = (n + TILE - 1) // TILE * TILE
    logits = torch.cat([router_logits, torch.empty((padded - n, experts_total), dtype=router_logits.dtype)])
    top_v, top_i = logits.topk(TOP_K, dim=-1)
    weights = torch.softmax(top_v, dim=-1)
    offset = torch.full((1,), int(local_expert_offset), dtype=torch.int64)
    out = torch.empty_like(hidden_states)
    _experts(hidden_states, gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias, weights, top_i, offset, out)
    return out
