"""What the evidence calls' copy check (``_provenance.launch_copies``) costs a many-launch call, inside the vault's
clock and outside it: p51's shape at SMOKE (8 launches, one per local expert, each adding its rows into a [32, 64]
float32 output; the kernels are torch operations behind a counted gate), alternating scored and evidence calls through
the provenance vault in one process, with the copy check on and off (no argument read: ``COPY_LARGEST`` 0).

    python benchmarks/evidence_copy_cost.py [--calls 40] [--rounds 2]

Per setting, medians over the calls (the first 4 dropped), in ms of CPU time: the scored calls' cost; the evidence
calls' cost less the vault's own time (``WORK_MS``, what the scored-time rule takes off) and its gap to the scored
calls (what the rule's allowance, ``_judge.EVIDENCE_COST_MS``, must cover); the vault's time; and the kernels' own
time on either kind of call (a kernel slowed after the vault's work is a cost the vault's clock does not hold).
"""

from __future__ import annotations

import _thread
import argparse
import statistics
import time
from typing import Any

import torch

from mkbsim.verifier import _control, _provenance
from mkbsim.verifier._vault import Registry

TOKENS, HIDDEN, EXPERTS, TOP_K = 32, 64, 8, 4


def _calls(copy_check: bool, calls: int) -> dict[str, float]:
    lib = _provenance.provenance_lib(torch.device("cpu"))
    if not copy_check:
        lib.copy_largest = 0
    control = _control.ControlPage()
    registry = Registry()
    numel = TOKENS * HIDDEN
    send = registry.open(
        _provenance.provenance_vault, control.buf, lib, _provenance.page_layout(), [torch.randperm(numel)[:512]],
        [numel], {},
    )  # fmt: skip
    kernel_s = [0.0]

    def kernel(x: Any, gu: Any, gub: Any, dn: Any, dnb: Any, wt: Any, y: Any, rows: Any, out: Any) -> None:
        start = time.thread_time()
        g = torch.addmm(gub, x, gu)
        torch.addmm(dnb, g[:, ::2].clamp(max=7) * torch.sigmoid(g[:, 1::2]), dn, out=y)
        y.mul_(wt[:, None])
        out.index_add_(0, rows, y)
        kernel_s[0] += time.thread_time() - start

    send((0, kernel, "launch"))
    gated = registry.protect(_provenance.gate, _send=send, _original=kernel, _count=True, _serial=_thread.RLock())
    result = registry.protect(_provenance.report_result, _send=send)
    end = registry.protect(_provenance.report_end, _send=send)
    hidden, logits = torch.randn(TOKENS, HIDDEN), torch.randn(TOKENS, 32)
    gu, gub = torch.randn(EXPERTS, HIDDEN, 2 * HIDDEN), torch.randn(EXPERTS, 2 * HIDDEN)
    dn, dnb = torch.randn(EXPERTS, HIDDEN, HIDDEN), torch.randn(EXPERTS, HIDDEN)

    def run() -> torch.Tensor:
        top_v, top_i = logits.topk(TOP_K, dim=-1)
        weights = torch.softmax(top_v, dim=-1)
        out = torch.zeros_like(hidden)
        for e in range(EXPERTS):
            rows, slots = (top_i == e).nonzero(as_tuple=True)
            if rows.numel():
                x, wt = hidden[rows].contiguous(), weights[rows, slots].contiguous()
                gated(x, gu[e], gub[e], dn[e], dnb[e], wt, torch.empty_like(x), rows.contiguous(), out)
        return out

    found: dict[str, list[float]] = {"scored": [], "watched": [], "vault": [], "kernels_scored": [], "kernels_ev": []}
    for call in range(calls):
        evidence = call % 2 == 1
        control.begin_call(suppress=False, audit=False, evidence=evidence)
        kernel_s[0] = 0.0
        start = time.process_time()
        result([run()])
        end()
        cost = (time.process_time() - start) * 1e3
        if call < 4:
            continue
        if evidence:
            spent = _control.get(control.buf, _control.WORK_MS)
            found["watched"].append(cost - spent)
            found["vault"].append(spent)
            found["kernels_ev"].append(kernel_s[0] * 1e3)
        else:
            found["scored"].append(cost)
            found["kernels_scored"].append(kernel_s[0] * 1e3)
    control.close()
    medians = {name: statistics.median(values) for name, values in found.items()}
    medians["gap"] = medians["watched"] - medians["scored"]
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for _ in range(args.rounds):
        for copy_check in (False, True):
            m = _calls(copy_check, args.calls)
            print(
                f"copy check {'on ' if copy_check else 'off'}: scored {m['scored']:.3f}, evidence less vault "
                f"{m['watched']:.3f} (gap {m['gap']:.3f}), vault {m['vault']:.2f}; kernels scored "
                f"{m['kernels_scored']:.3f}, evidence {m['kernels_ev']:.3f}"
            )


if __name__ == "__main__":
    main()
