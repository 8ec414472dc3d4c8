"""What the copy check (``_provenance.launch_copies``, ``may_hold``, ``judge_copies``) takes in memory for one launch
over large arguments: p44's k_gemm2 in small (a bf16 output the launch writes, computed, and fp8 weights of twice its
elements beside it, held as a copy's possible source), one evidence call through the provenance vault, each size in a
fresh process (its peak resident memory is the process's own).

    python benchmarks/copy_check_memory.py [--output-mb 64] [--weights-mb 64 0]
    PYTHONPATH=/path/to/another/checkout python benchmarks/copy_check_memory.py   # side by side

Prints, per size, the growth of the process's peak resident memory over the call (MB) and its ratio to the two
arguments' bytes. Weights of 0 MB: the output's own share (its samples, probes and copies), the baseline. At
PRODUCTION on the H100, p44's call (y 528 MB, weights 470 MB) asked the worker's 32 GiB for 7 GB more while holding 28
(the readings of every held argument made at once, then concatenated)."""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(output_mb: int, weights_mb: int) -> dict[str, float | str]:
    import torch

    from mkbsim.verifier import _provenance
    from tests.kits.evidence_vault import evidence_vault

    torch.set_num_threads(1)
    output_numel = (output_mb << 20) // 2
    weights = torch.randn(max(weights_mb << 20, 1)).to(torch.float8_e4m3fn)
    out = torch.zeros(output_numel, dtype=torch.bfloat16)
    computed = torch.randn(output_numel).to(torch.bfloat16)  # made before the call: the kernel's own work is a copy

    def kernel(w: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_(computed)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for vault in evidence_vault(output_numel):
        vault.call()
        vault.launch(kernel, weights, out)
        copied = vault.work(out)["copied"][0]
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return {
        "tree": str(Path(_provenance.__file__).resolve().parents[2]),
        "output_mb": output_mb, "weights_mb": weights_mb, "peak_growth_mb": round(grew),
        "per_argument_byte": round(grew / (output_mb + weights_mb), 2), "copied": copied,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-mb", type=int, default=64)
    ap.add_argument("--weights-mb", type=int, nargs="+", default=[64, 0])
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child's single measurement
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.output_mb, args.weights_mb[0])))
        return
    for weights_mb in args.weights_mb:
        cmd = [sys.executable, __file__, "--one", "--output-mb", str(args.output_mb), "--weights-mb", str(weights_mb)]
        subprocess.run(cmd, check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
