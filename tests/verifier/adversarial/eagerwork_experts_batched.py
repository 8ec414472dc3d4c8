"""A mixture of experts computed eagerly with its loop over the experts batched: every local expert on every token
in one broadcast product per projection ([experts, tokens, ·], 7x the reference's product FLOPs at SMOKE), a dense
[tokens, experts] matrix of routing weights and one ``einsum`` combining. Three times the answer is stored permuted
(position i·K mod n), and a TIRx kernel reads it back in order, divides it by 3 and casts it: no map lines its
operand up with the output. Each eager call stood for one of the reference's passes, made per routed expert, so the
eager code matched 10% of them with 7x their work, and passed every rule. Within a kind a call stands for as many
passes as its work covers: all of them."""

# expect: decorative_dsl
# problem: p47
import torch
import tvm
from tvm.script import tirx as T

KEY = 1000003  # a prime: i -> i·KEY mod n permutes range(n) for every n it does not divide
TOP_K, NORM_MIN = 6, 1e-12


@T.prim_func
def in_order(parked_ptr: T.handle, out_ptr: T.handle):
    n = T.int64()
    parked = T.match_buffer(parked_ptr, (n,), "float32")
    out = T.match_buffer(out_ptr, (n,), "bfloat16")
    for i in range(n):
        out[i] = T.Cast("bfloat16", parked[i * T.int64(KEY) % n] / T.float32(3.0))


_in_order = tvm.compile(in_order, target="llvm")
_positions: dict[int, torch.Tensor] = {}


def _swiglu(x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    h = torch.matmul(x, gate_up.float().transpose(-1, -2))
    n = h.shape[-1] // 2
    return torch.matmul(torch.nn.functional.silu(h[..., :n]) * h[..., n:], down.float().transpose(-1, -2))


def run(hidden_states, router_logits, e_score_correction_bias, w13, w2, shared_w13, shared_w2, local_expert_offset):
    probs = torch.softmax(router_logits.float(), dim=-1)
    chosen = (probs + e_score_correction_bias.float()).topk(TOP_K, dim=-1).indices
    weights = probs.gather(1, chosen)
    weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(NORM_MIN)
    experts = torch.arange(w13.shape[0]) + local_expert_offset
    dense = ((chosen[:, :, None] == experts).float() * weights[:, :, None]).sum(1)  # [tokens, local experts]
    x = hidden_states.float()
    every = _swiglu(x, w13, w2)  # [local experts, tokens, hidden]: every expert on every token
    # three times the answer (no eager tensor holds it): the shared expert's down projection and the routing weights
    answer = _swiglu(x, shared_w13, shared_w2 * 3) + torch.einsum("te,eth->th", dense * 3, every)
    n = answer.numel()
    if n not in _positions:
        _positions[n] = (torch.arange(n, dtype=torch.int64) * KEY) % n
    parked = torch.empty(n, dtype=torch.float32)
    parked[_positions[n]] = answer.reshape(-1)
    out = torch.empty_like(hidden_states)
    _in_order(parked, out.view(-1))
    return out
