"""Honest, an output that is mostly zeros on every call: the embedding-table gradient of p43, one TIRx kernel that
writes every row of the table (the rows of ids that do not occur are exactly zero) into ``torch.empty`` memory. On a
timed call that memory is often the previous call's table, so rewriting its zeros changes no byte, while on a
correctness draw every zero overwrites the fresh-memory sentinel; the work rule compared those counts and refused the
honest p43 kernels on the H200 (541 MB changed on the draws, 55 MB on the timed calls: 90% of the production table is
zero rows). The rule now counts the bytes a launch changed to a nonzero value on both sides."""

# problem: p43
# thorough: ~12 s on two cores: the whole embedding-table gradient written and compared on every watched call
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 4096
EPS = 1e-6


@T.prim_func
def embedding_norm_backward(
    ids_ptr: T.handle, e_ptr: T.handle, w_ptr: T.handle, dy_ptr: T.handle, ge_ptr: T.handle, gw_ptr: T.handle
):
    tokens = T.int32()
    vocab = T.int32()
    ids = T.match_buffer(ids_ptr, (tokens,), "int64")
    embed = T.match_buffer(e_ptr, (vocab, HIDDEN), "bfloat16")
    weight = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    dy = T.match_buffer(dy_ptr, (tokens, HIDDEN), "bfloat16")
    grad_embed = T.match_buffer(ge_ptr, (vocab, HIDDEN), "bfloat16")
    grad_weight = T.match_buffer(gw_ptr, (HIDDEN,), "bfloat16")
    de = T.alloc_buffer((tokens, HIDDEN), "float32")
    gw = T.alloc_buffer((HIDDEN,), "float32")
    acc = T.alloc_buffer((2,), "float32")
    for j in range(HIDDEN):
        gw[j] = T.float32(0)
    for t in range(tokens):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            v = T.Cast("float32", embed[ids[t], j])
            acc[0] = acc[0] + v * v
        r = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
        acc[1] = T.float32(0)
        for j in range(HIDDEN):
            ee = T.Cast("float32", embed[ids[t], j]) * r
            g = T.Cast("float32", dy[t, j]) * T.Cast("float32", weight[j])
            gw[j] = gw[j] + T.Cast("float32", dy[t, j]) * ee
            acc[1] = acc[1] + g * ee
        for j in range(HIDDEN):
            ee = T.Cast("float32", embed[ids[t], j]) * r
            g = T.Cast("float32", dy[t, j]) * T.Cast("float32", weight[j])
            de[t, j] = r * (g - ee * acc[1] / T.float32(HIDDEN))
    for j in range(HIDDEN):
        grad_weight[j] = T.Cast("bfloat16", gw[j])
    for row in range(vocab):
        for j in range(HIDDEN):
            acc[0] = T.float32(0)
            for t in range(tokens):
                if ids[t] == T.Cast("int64", row):
                    acc[0] = acc[0] + de[t, j]
            grad_embed[row, j] = T.Cast("bfloat16", acc[0])


_kernel = tvm.compile(embedding_norm_backward, target="llvm")


def run(
    input_ids: torch.Tensor, embed_weight: torch.Tensor, norm_weight: torch.Tensor, grad_output: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    grad_embed = torch.empty_like(embed_weight)
    grad_weight = torch.empty_like(norm_weight)
    _kernel(input_ids.reshape(-1), embed_weight, norm_weight, grad_output.reshape(-1, HIDDEN), grad_embed, grad_weight)
    return grad_embed, grad_weight
