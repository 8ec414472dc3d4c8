"""p45's routing computed eagerly in a cheaper formulation than the reference's (red team 8a's h6): the top-k of the
logits is the top-k of the softmax, so no softmax over the 160 experts is made, only over the 8 kept logits (the
renormalised weights), and the slots are counted per kept assignment. Against the reference it is about a quarter
of its element work and a third of its passes, and a third of the cost model's FLOPs, which count the full softmax:
it passed the floor. Against the work every formulation does (one comparison per logit, a softmax over the k kept,
a count per assignment: ``Cost.necessary_flops``) it is most of it; a one-element kernel's 1.0 is multiplied in."""

# expect: decorative_dsl
# problem: p45
import torch
import tvm
from tvm.script import tirx as T

TOP_K = 8


@T.prim_func
def one(a_ptr: T.handle):
    a = T.match_buffer(a_ptr, (1,), "float32")
    a[0] = T.float32(1)


_one = tvm.compile(one, target="llvm")


def run(hidden_states, router_logits):
    seed = torch.empty(1, dtype=torch.float32)
    _one(seed)
    tokens, hidden = hidden_states.shape
    experts = router_logits.shape[1]
    capacity = -(-(tokens * TOP_K * 5) // (experts * 4))
    top_l, top_i = (router_logits.float() * seed).topk(TOP_K, dim=-1)
    top_p = torch.softmax(top_l, dim=-1)  # p / sum of the kept p: a softmax over the kept logits
    order = torch.argsort(top_i.flatten(), stable=True)  # the assignments by expert, then token
    expert = top_i.flatten()[order]
    start = torch.searchsorted(expert, torch.arange(experts))
    slot = torch.arange(order.numel()) - start[expert]
    keep = slot < capacity
    tok = (order // TOP_K)[keep]
    row = expert[keep] * capacity + slot[keep]
    dispatched = hidden_states.new_zeros((experts * capacity, hidden))
    dispatched[row] = hidden_states[tok]
    combine = torch.zeros(experts * capacity)
    combine[row] = top_p.flatten()[order][keep]
    token_index = torch.full((experts * capacity,), -1, dtype=torch.int32)
    token_index[row] = tok.to(torch.int32)
    return (dispatched.view(experts, capacity, hidden), combine.view(experts, capacity).to(router_logits.dtype),
            token_index.view(experts, capacity))
