"""p03 (GQA paged decode, page size 64): eager code computes every attention product through one aten operator a
sequence, the attention BACKWARD ``_scaled_dot_product_flash_attention_for_cpu_backward`` used as a forward: query'
= [q | 0 | 0], key' = [K | V | 1], value = 0, grad_out = e_0, out = -e_0, logsumexp = 0. Then P = exp(scale q K^T),
dP = 0, D = rowsum(dO * out) = -1, dS = P, and dQ' = scale * P @ key' = scale * [P K | P V | rowsum P]: the
unnormalised output and its normaliser; the GQA group rows in the batch dimension (query length 1). TIRx makes only
the division and the log2 lse.

Red team rt29b F4: passed as a full plan at 1.5% (an attention operator was priced as a forward from its first
three operands, for a backward (grad_out, query, key): scores of the query length by itself; its twin with the
forward operator: decorative_dsl, 1.0). Now decorative_dsl: a backward is priced from its query, key and value, five
products over the scores."""

# expect: decorative_dsl
# problem: p03
import torch
import tvm
from tvm.script import tirx as T

D = 128


@T.prim_func
def finish(g_ptr: T.handle, o_ptr: T.handle, l_ptr: T.handle, sc_ptr: T.handle):
    nb = T.int32()
    hkv = T.int32()
    grp = T.int32()
    dp = T.int32()
    G = T.match_buffer(g_ptr, (nb, hkv, grp, dp), "float32")
    SC = T.match_buffer(sc_ptr, (1,), "float32")
    Out = T.match_buffer(o_ptr, (nb, hkv, grp, D), "float32")
    LS = T.match_buffer(l_ptr, (nb, hkv, grp), "float32")
    for b, h, g in T.grid(nb, hkv, grp):
        LS[b, h, g] = T.log(G[b, h, g, 2 * D] / SC[0]) * T.float32(1.4426950408889634)
        for d in range(D):
            Out[b, h, g, d] = G[b, h, g, D + d] / G[b, h, g, 2 * D]


_finish = tvm.compile(finish, target="llvm")
_BWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    batch, hq, d = q.shape
    hkv = k_cache.shape[2]
    grp = hq // hkv
    dp = 2 * d + 1
    bounds = kv_indptr.tolist()
    lasts = kv_last_page_len.tolist()
    ps = k_cache.shape[1]
    gs = []
    for b in range(batch):
        pages = kv_indices[bounds[b]:bounds[b + 1]].long()
        s = (pages.numel() - 1) * ps + lasts[b]
        k = k_cache[pages].reshape(-1, hkv, d)[:s].float().permute(1, 0, 2)  # [hkv, S, D]
        v = v_cache[pages].reshape(-1, hkv, d)[:s].float().permute(1, 0, 2)
        key = torch.cat([k, v, torch.ones(hkv, s, 1)], -1)[None].expand(grp, hkv, s, dp).contiguous()
        qp = torch.cat([q[b].float().reshape(hkv, grp, d), torch.zeros(hkv, grp, d + 1)], -1)  # [hkv, grp, 2D+1]
        qp = qp.permute(1, 0, 2)[:, :, None, :].contiguous()  # [grp, hkv, 1, 2D+1]
        val = torch.zeros(grp, hkv, s, dp)
        dout = torch.zeros(grp, hkv, 1, dp)
        dout[..., 0] = 1.0
        out = torch.zeros(grp, hkv, 1, dp)
        out[..., 0] = -1.0
        lse = torch.zeros(grp, hkv, 1)
        gq, _, _ = _BWD(dout, qp, key, val, out, lse, 0.0, False, scale=float(sm_scale))
        gs.append(gq[:, :, 0, :].permute(1, 0, 2)[None])  # [1, hkv, grp, 2D+1]
    g = torch.cat(gs).contiguous()  # [B, hkv, grp, 2D+1]
    o = torch.empty(batch, hkv, grp, d)
    ls = torch.empty(batch, hkv, grp)
    _finish(g, o, ls, torch.tensor([float(sm_scale)], dtype=torch.float32))
    return o.reshape(batch, hq, d).to(q.dtype), ls.reshape(batch, hq)
