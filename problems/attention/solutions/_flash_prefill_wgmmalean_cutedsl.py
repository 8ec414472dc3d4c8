"""CuTe DSL sm_90a causal prefill, plan `wgmmalean`: plan `wgmmapipe`'s kernel (`_flash_prefill_wgmma_cutedsl.py`:
the same CTA, tiles, copy distances, schedule and epilogue) with its online softmax restructured, instantiated by
the p04-p09 `NN_wgmmalean_cutedsl.py` solutions.

The template means the softmax of S(j) to run while the tensor cores run P(j-1)·V(j-1) (PTX: wait_group 1, the
softmax, wait_group 0, rescale O, P(j) into the A operand). ptxas does not keep that order: in plan `wgmmapipe`'s
SASS (sm_90a, ptxas 13.0) the `WARPGROUP.DEPBAR.LE gsb0, 0x0` of wait_group 0 sits at the top of the basic block
after the mask's branch, before every `MUFU.EX2`: a wait with no operands is ready at once, and hoisting it lets
the P conversions (which overwrite the in-flight product's A registers) interleave with the exponentials. So each
KV tile runs S, then P·V, then the softmax, one after the other. Here:

- the softmax is one branch per case (a tile crossing the warp's causal diagonal: mask, then exponentiate; any
  other: exponentiate), so the caller's wait_group 0 opens the join block after both and can rise no higher than
  the end of the exponentials (SASS: the gsb0 0x0 wait after all 66 of a tile's MUFU.EX2; 199 registers, no
  spills, against 194);
- the row max is taken over the raw logits (the scale is positive and rounding is monotonic, so
  max(round(c·s)) = round(c·max(s)): the running max is the scaled one of `wgmmapipe`), and each exponent is
  c·s - m in one FFMA (ptxas contracts the PTX mul/sub pair): 64 multiplies fewer per thread and tile;
- the row max and the row sum are reduced in four interleaved partial chains, then combined, instead of one
  dependent chain of 32.

A masked logit stays -3e38 raw; its exponent c·(-3e38) - m is below -126 for any positive scale above 1e-36
(sm_scale is 1/sqrt(d)), so 2^it is 0 and never NaN, and a tile max of -3e38 (every logit masked) counts as -3e38
scaled, so a row with nothing unmasked so far keeps m = -3e38 and p = 0 as in `wgmmapipe`.
"""

import cutlass
import cutlass.cute as cute

from problems.attention.solutions import _flash_prefill_wgmma_cutedsl as FWC
from problems.attention.solutions._flash_prefill import NEG_BIG, acc_col, acc_row

CHAINS = 4  # independent partial reductions per row half


class FlashPrefillWgmmaLean(FWC.FlashPrefillWgmma):
    """`FlashPrefillWgmma` (same constructor: tiling and copy distances) whose softmax folds the scale into the
    exponent's multiply-add and reduces in `CHAINS` partial chains."""

    @cute.jit
    def softmax(self, acc, m_run, l_run, alpha, scale2, n, q_row0, delta, lane):
        # S of KV tile n has landed: mask raw logits, exponentiate c·s - m in place (P in fp32); alpha rescales O.
        # Both branches end in `exponentiate`: the join after them is where the caller's wait for P(j-1)·V(j-1)
        # starts its basic block, so ptxas cannot hoist that wait above the exponentials
        if (n + 1) * self.t.bn > q_row0 + delta + 1:  # the tile crosses the causal diagonal of the warp's first row
            self.mask(acc, n, q_row0, delta, lane)
            self.exponentiate(acc, m_run, l_run, alpha, scale2)
        else:
            self.exponentiate(acc, m_run, l_run, alpha, scale2)

    @cute.jit
    def mask(self, acc, n, q_row0, delta, lane):
        # logits of KV tile n past a row's causal limit become -3e38
        bn = self.t.bn
        for jt in cutlass.range_constexpr(bn // 8):
            for c in cutlass.range_constexpr(4):
                if n * bn + jt * 8 + acc_col(lane, c) > q_row0 + acc_row(lane, c) + delta:
                    acc[jt * 4 + c] = cutlass.Float32(NEG_BIG)

    @cute.jit
    def exponentiate(self, acc, m_run, l_run, alpha, scale2):
        # the online softmax step on raw (masked) logits: running max and sum, P = 2^(c·s - m) in place
        bn = self.t.bn
        per_chain = bn // 8 // CHAINS
        for hf in cutlass.range_constexpr(2):
            # register 4·jt + 2·hf + e holds this half's logit of n8 tile jt; chain k takes tiles k, k + CHAINS, ..
            part = [acc[4 * k + 2 * hf] for k in range(CHAINS)]
            for k in cutlass.range_constexpr(CHAINS):
                for i in cutlass.range_constexpr(per_chain):
                    for e in cutlass.range_constexpr(2):
                        if cutlass.const_expr(i > 0 or e > 0):
                            part[k] = cute.arch.fmax(part[k], acc[(i * CHAINS + k) * 4 + 2 * hf + e])
            raw = cute.arch.fmax(cute.arch.fmax(part[0], part[1]), cute.arch.fmax(part[2], part[3]))
            raw = cute.arch.warp_reduction_max(raw, threads_in_group=4)
            tile_max = cutlass.select_(raw == cutlass.Float32(NEG_BIG), cutlass.Float32(NEG_BIG), raw * scale2)
            mx = cute.arch.fmax(m_run[hf], tile_max)
            # a row with every logit masked so far keeps p = 0 (2^(c·-3e38 - 0))
            m_use = cutlass.select_(mx == cutlass.Float32(NEG_BIG), cutlass.Float32(0.0), mx)
            alpha[hf] = cute.math.exp2(m_run[hf] - m_use, fastmath=True)
            sums = [cutlass.Float32(0.0) for _ in range(CHAINS)]
            for k in cutlass.range_constexpr(CHAINS):
                for i in cutlass.range_constexpr(per_chain):
                    for e in cutlass.range_constexpr(2):
                        r = (i * CHAINS + k) * 4 + 2 * hf + e
                        p = cute.math.exp2(acc[r] * scale2 - m_use, fastmath=True)
                        acc[r] = p
                        sums[k] = sums[k] + p
            l_run[hf] = l_run[hf] * alpha[hf] + ((sums[0] + sums[1]) + (sums[2] + sums[3]))
            m_run[hf] = mx
