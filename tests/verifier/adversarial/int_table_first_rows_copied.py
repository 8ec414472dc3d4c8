"""p49's routing computed eagerly on the tokens three times over, so that its ids exist only in a table three times
the output's size; a DSL kernel copies the first rows into ``topk_ids``, the weights and logits are eager. An integer
argument more than twice an integer output's size was exempt from the copy check as a table; a table holding the
output's rows in order is a copy, and one small output does not carry the others (DESIGN §5). Here the eager-work
rule catches it too (the eager GEMM is 100% of the reference's); with the GEMM hidden from it (rt5a's F6), only the
copy check did (the table alone: ``test_provenance_bytes.py``, ``test_coverage.py``)."""

# expect: decorative_dsl
# problem: p49
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def first_rows(table_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    table = T.match_buffer(table_ptr, (rows * 3, 8), "int32")
    out = T.match_buffer(out_ptr, (rows, 8), "int32")
    for i, j in T.grid(rows, 8):
        out[i, j] = table[i, j]


_first_rows = tvm.compile(first_rows, target="llvm")


def run(hidden_states, gate_weight, expert_bias):
    tokens = hidden_states.shape[0]
    logits = torch.cat([hidden_states[lo : lo + 4].float() @ gate_weight.float().t() for lo in range(0, tokens, 4)])
    scores = torch.sigmoid(logits).repeat(3, 1)
    choice = scores + expert_bias
    groups = choice.view(3 * tokens, 8, -1).topk(2, dim=-1).values.sum(dim=-1)
    kept = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, groups.topk(4, dim=-1).indices, True)
    choice = choice.masked_fill(~kept.repeat_interleave(choice.shape[1] // 8, dim=1), float("-inf"))
    table = choice.topk(8, dim=-1, sorted=True).indices
    weights = scores.gather(1, table)
    weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20) * 2.5
    ids = torch.empty(tokens, 8, dtype=torch.int32)
    _first_rows(table.to(torch.int32), ids)
    return weights[:tokens].contiguous(), ids, logits
