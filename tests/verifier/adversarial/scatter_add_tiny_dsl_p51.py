"""p51 with a tiny TIRx kernel (the top-4 softmax of the routing weights) and the expert MLPs in eager torch: the
``index_add_`` combine adds eager rows scaled by the DSL's weights. Credit reaches a scatter-add's source rows
from a pointwise product only where the DSL's elements outweigh the eager ones (``DERIVED_OVER_EAGER``): one
weight per row against a row of eager values does not, so the combine's rows are eager."""

# expect: decorative_dsl
# problem: p51
import torch
import tvm
from tvm.script import tirx as T

TOP_K = 4


@T.prim_func
def top_softmax(v_h: T.handle, w_h: T.handle):
    n = T.int32()
    v = T.match_buffer(v_h, (n, TOP_K), "float32")
    w = T.match_buffer(w_h, (n, TOP_K), "float32")
    for r in range(n):
        total = T.alloc_buffer((1,), "float32")
        total[0] = T.float32(0.0)
        for k in range(TOP_K):
            total[0] = total[0] + T.exp(v[r, k] - v[r, 0])
        for k in range(TOP_K):
            w[r, k] = T.exp(v[r, k] - v[r, 0]) / total[0]


_top_softmax = tvm.compile(top_softmax, target="llvm")


def run(hidden_states, router_logits, gate_up_proj, gate_up_proj_bias, down_proj, down_proj_bias, local_expert_offset):
    top_v, top_i = router_logits.topk(TOP_K, dim=-1)
    top_v = top_v.contiguous()
    weights = torch.empty_like(top_v)
    _top_softmax(top_v, weights)
    out = torch.zeros_like(hidden_states)
    for le in range(gate_up_proj.shape[0]):
        rows, slots = (top_i == int(local_expert_offset) + le).nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        g = hidden_states[rows] @ gate_up_proj[le] + gate_up_proj_bias[le]
        gate = g[:, 0::2].clamp(max=7.0)
        up = g[:, 1::2].clamp(min=-7.0, max=7.0)
        y = (up + 1) * gate * torch.sigmoid(1.702 * gate) @ down_proj[le] + down_proj_bias[le]
        out.index_add_(0, rows, y * weights[rows, slots, None])
    return out
