"""Honest p51 (red team rt57 FP1): `moe_capacity_indices_clamped_in_place_p51` with its two capacity buffers (token
index, routing weight) cached across calls per shape (a workspace kept across calls), the index buffer still clamped in
place whole, its unwritten slots included. Those slots hold what an earlier call left (the census finds the buffers),
and what the clamp made of them differs between the evidence call and the twin draw, whose earlier calls differ: the
twin draw compared them (`decorative_dsl`, 2 runs of 2) until what eager operators make of such memory was kept apart
(``leftover``), out of its comparison."""
# problem: p51
import torch
import tvm
from tvm.script import tirx as T

H = 64
INTER = 64
TOP_K = 4


@T.prim_func
def experts(
    x_h: T.handle,
    gu_h: T.handle,
    gub_h: T.handle,
    dn_h: T.handle,
    dnb_h: T.handle,
    wt_h: T.handle,
    tok_h: T.handle,
    cnt_h: T.handle,
    out_h: T.handle,
):
    n = T.int32()
    e_n = T.int32()
    cap = T.int32()
    x = T.match_buffer(x_h, (n, H), "float32")
    gu = T.match_buffer(gu_h, (e_n, H, 2 * INTER), "float32")
    gub = T.match_buffer(gub_h, (e_n, 2 * INTER), "float32")
    dn = T.match_buffer(dn_h, (e_n, INTER, H), "float32")
    dnb = T.match_buffer(dnb_h, (e_n, H), "float32")
    wt = T.match_buffer(wt_h, (e_n, cap), "float32")
    tok = T.match_buffer(tok_h, (e_n, cap), "int64")
    cnt = T.match_buffer(cnt_h, (e_n,), "int32")
    out = T.match_buffer(out_h, (n, H), "float32")
    g = T.alloc_buffer((2 * INTER,), "float32")
    act = T.alloc_buffer((INTER,), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for e in range(e_n):
        for r in range(cnt[e]):
            row = tok[e, r]
            for c in range(2 * INTER):
                g[c] = gub[e, c]
                for k in range(H):
                    g[c] = g[c] + x[row, k] * gu[e, k, c]
            for c in range(INTER):
                gate = T.min(g[2 * c], T.float32(7.0))
                up = T.max(T.min(g[2 * c + 1], T.float32(7.0)), T.float32(-7.0))
                act[c] = (up + T.float32(1.0)) * gate * T.sigmoid(T.float32(1.702) * gate)
            for h in range(H):
                acc[0] = dnb[e, h]
                for c in range(INTER):
                    acc[0] = acc[0] + act[c] * dn[e, c, h]
                out[row, h] = out[row, h] + acc[0] * wt[e, r]


_experts = tvm.compile(experts, target="llvm")
_bufs: dict = {}


def run(hidden_states, router_logits, gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias, local_expert_offset):
    n = hidden_states.shape[0]
    e_n = gate_up_proj.shape[0]
    top_v, top_i = router_logits.topk(TOP_K, dim=-1)
    weights = torch.softmax(top_v, dim=-1)
    if (e_n, n) not in _bufs:
        _bufs[(e_n, n)] = (torch.empty((e_n, n), dtype=torch.int64), torch.empty((e_n, n), dtype=torch.float32))
    tok, wt = _bufs[(e_n, n)]
    cnt = torch.zeros((e_n,), dtype=torch.int32)
    for le in range(e_n):
        rows, slots = (top_i == int(local_expert_offset) + le).nonzero(as_tuple=True)
        k = rows.numel()
        cnt[le] = k
        if k:
            tok[le, :k] = rows
            wt[le, :k] = weights[rows, slots]
    tok.clamp_(0, n - 1)
    out = torch.zeros_like(hidden_states)
    _experts(hidden_states, gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias, wt, tok, cnt, out)
    return out
