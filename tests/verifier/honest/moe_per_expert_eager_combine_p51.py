"""p51 as its reference does it (red team rt13 FP1): eager routing and gather, one TIRx expert-MLP launch per
local expert over the rows routed to it (a row count the data decides), and the eager ``index_add_`` combine into
zeros that the reference uses: the combine carries the DSL rows' credit (``_scatters``). A partial plan since the
GPU's integer rates (2026-12-05, ``_widths.PRECISION``): the eager routing's int64 index math is 7-8% of the problem's
compute at SMOKE (3% when integer work was priced as float32's)."""

# problem: p51
# plan: partial
# thorough: ~14 s on two cores: eight launches a call, each evidence call's launches fitted by the decode rule
import torch
import tvm
from tvm.script import tirx as T

H = 64
INTER = 64
TOP_K = 4


@T.prim_func
def expert(
    x_h: T.handle, gu_h: T.handle, gub_h: T.handle, dn_h: T.handle, dnb_h: T.handle, wt_h: T.handle, y_h: T.handle
):
    m = T.int32()
    x = T.match_buffer(x_h, (m, H), "float32")
    gu = T.match_buffer(gu_h, (H, 2 * INTER), "float32")
    gub = T.match_buffer(gub_h, (2 * INTER,), "float32")
    dn = T.match_buffer(dn_h, (INTER, H), "float32")
    dnb = T.match_buffer(dnb_h, (H,), "float32")
    wt = T.match_buffer(wt_h, (m,), "float32")
    y = T.match_buffer(y_h, (m, H), "float32")
    g = T.alloc_buffer((2 * INTER,), "float32")
    act = T.alloc_buffer((INTER,), "float32")
    for r in range(m):
        for c in range(2 * INTER):
            g[c] = gub[c]
            for k in range(H):
                g[c] = g[c] + x[r, k] * gu[k, c]
        for c in range(INTER):
            gate = T.min(g[2 * c], T.float32(7.0))
            up = T.max(T.min(g[2 * c + 1], T.float32(7.0)), T.float32(-7.0))
            act[c] = (up + T.float32(1.0)) * gate * T.sigmoid(T.float32(1.702) * gate)
        for h in range(H):
            acc = T.alloc_buffer((1,), "float32")
            acc[0] = dnb[h]
            for c in range(INTER):
                acc[0] = acc[0] + act[c] * dn[c, h]
            y[r, h] = acc[0] * wt[r]


_expert = tvm.compile(expert, target="llvm")


def run(hidden_states, router_logits, gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias, local_expert_offset):
    top_v, top_i = router_logits.topk(TOP_K, dim=-1)
    weights = torch.softmax(top_v, dim=-1)
    out = torch.zeros_like(hidden_states)
    for le in range(gate_up_proj.shape[0]):
        rows, slots = (top_i == int(local_expert_offset) + le).nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        xr = hidden_states[rows].contiguous()
        wt = weights[rows, slots].contiguous()
        y = torch.empty_like(xr)
        _expert(xr, gate_up_proj[le], gate_up_proj_bias[le], down_proj[le], down_proj_bias[le], wt, y)
        out.index_add_(0, rows, y)
    return out
