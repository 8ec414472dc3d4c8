"""p45's routing computed eagerly in a cheaper formulation than the reference's (red team 8a's h6, without its
provenance gap): the top-k of the logits is the top-k of the softmax, so no softmax over the 160 experts is made,
only over the 8 kept logits (the renormalised weights, written eagerly into ``combine_weights``). A TIRx kernel
then counts each expert's slots in token order and writes ``dispatched_states`` and ``token_index`` (two of the
three outputs: the coverage rule's average). Against the reference the eager code is a fifth of its element work
and a third of its passes, and against the cost model (a full softmax) a fifth: it passed every rule. Against the
work every formulation does (a comparison per logit, a softmax over the k kept, a count per assignment:
``Cost.necessary_flops``) it is most of it."""

# expect: decorative_dsl
# problem: p45
import torch
import tvm
from tvm.script import tirx as T

TOP_K = 8


@T.prim_func
def dispatch(x_ptr: T.handle, ids_ptr: T.handle, out_ptr: T.handle, tidx_ptr: T.handle):
    tokens = T.int32()
    hidden = T.int32()
    experts = T.int32()
    capacity = T.int32()
    x = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
    ids = T.match_buffer(ids_ptr, (tokens, TOP_K), "int32")
    out = T.match_buffer(out_ptr, (experts, capacity, hidden), "bfloat16")
    tidx = T.match_buffer(tidx_ptr, (experts, capacity), "int32")
    count = T.alloc_buffer((1,), "int32")
    for e in range(experts):
        count[0] = 0
        for s in range(capacity):
            tidx[e, s] = -1
            for c in range(hidden):
                out[e, s, c] = T.bfloat16(0)
        for t in range(tokens):
            for j in range(TOP_K):
                if ids[t, j] == e:
                    if count[0] < capacity:
                        tidx[e, count[0]] = t
                        for c in range(hidden):
                            out[e, count[0], c] = x[t, c]
                    count[0] = count[0] + 1


_dispatch = tvm.compile(dispatch, target="llvm")


def run(hidden_states, router_logits):
    tokens, hidden = hidden_states.shape
    experts = router_logits.shape[1]
    capacity = -(-(tokens * TOP_K * 5) // (experts * 4))
    top_l, top_i = router_logits.float().topk(TOP_K, dim=-1)
    top_p = torch.softmax(top_l, dim=-1)  # p / sum of the kept p: a softmax over the kept logits
    ids = top_i.to(torch.int32)
    dispatched = torch.empty((experts, capacity, hidden), dtype=hidden_states.dtype)
    token_index = torch.empty((experts, capacity), dtype=torch.int32)
    _dispatch(hidden_states, ids, dispatched, token_index)
    # the weights by the slots the kernel filled: each token's place among its expert's picks, in token order
    order = torch.argsort(top_i.flatten(), stable=True)
    expert = top_i.flatten()[order]
    slot = torch.arange(order.numel()) - torch.searchsorted(expert, expert)
    keep = slot < capacity
    combine = torch.zeros(experts * capacity)
    combine[expert[keep] * capacity + slot[keep]] = top_p.flatten()[order][keep]
    return dispatched, combine.view(experts, capacity).to(router_logits.dtype), token_index
