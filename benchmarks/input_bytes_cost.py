"""What keeping the problem inputs as the call got them costs an audited draw (verifier README "Decoded answers":
problem inputs are bytes as the call got them): the provenance vault driven directly, as the worker drives it on a
correctness draw (the inputs reported, eager operators reported as the dispatch mode reports them, one counted launch
through the gate, the result reported), with inputs of a problem's production shape.

    python benchmarks/input_bytes_cost.py --case p36 [--rounds 3]
    python benchmarks/input_bytes_cost.py --case p47
    PYTHONPATH=/path/to/another/checkout python benchmarks/input_bytes_cost.py --case p47   # side by side

``p36``: the RMSNorm example's audited call at 65536 x 128 (eager inverse RMS, one launch applying it). ``p47``: the
ERNIE MoE layer's inputs at production (4096 tokens, 32 local experts: 0.82 GB of bf16 weights and activations), one
launch reading all of them and writing the output (the fused plans' first launch reads the weights). Prints the calling
thread's CPU time per audited call (least of ``--rounds``) and the process's peak resident memory during the calls
beyond what it held before (``VmHWM``, reset through ``/proc/self/clear_refs``), in MiB.
"""

from __future__ import annotations

import _thread
import argparse
import functools
import inspect
import json
import time
from pathlib import Path
from typing import Any


def _peak_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("VmHWM:",)):
                return int(line.split()[1]) / 1024
    return 0.0


def _resident_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _inputs(case: str) -> list[Any]:
    import torch

    g = torch.Generator().manual_seed(0)
    if case == "p36":
        return [torch.randn(65536, 128, generator=g).bfloat16(), torch.randn(128, generator=g).bfloat16()]
    tokens, hidden, experts, inter, shared = 4096, 2560, 32, 1536, 3072
    shapes = [(tokens, hidden), (experts, 2 * inter, hidden), (experts, hidden, inter), (2 * shared, hidden),
              (hidden, shared)]  # fmt: skip
    return [torch.empty(shape, dtype=torch.bfloat16).normal_(generator=g) for shape in shapes]


def measure(case: str, rounds: int) -> dict[str, Any]:
    import torch

    from mkbsim.verifier import _control, _provenance
    from mkbsim.verifier._operators import dispatch_hooks
    from mkbsim.verifier._vault import Registry

    torch.set_num_threads(1)
    inputs = _inputs(case)
    rows, hidden = inputs[0].shape
    numel = rows * hidden
    control = _control.ControlPage()
    registry = Registry()
    lib = _provenance.provenance_lib(torch.device("cpu"))
    send = registry.open(
        _provenance.provenance_vault, control.buf, lib, _provenance.page_layout(), [torch.randperm(numel)[:512]],
        [numel], {},
    )  # fmt: skip
    op = registry.protect(
        _provenance.dispatch, _send=send, _serial=_thread.RLock(), **dispatch_hooks(registry, torch.device("cpu"))
    )
    report_inputs = registry.protect(_provenance.report_inputs, _send=send)
    with_inplace = "inplace" in inspect.signature(_provenance.report_inputs).parameters

    def eager(name: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> Any:
        return op(None, functools.reduce(getattr, name.split("."), torch.ops), (), args, kwargs)

    def scale_rows(x: Any, inv: Any, w: Any, out: Any) -> None:  # stands for the native kernel
        out.copy_((x.float() * inv.unsqueeze(1) * w.float()).bfloat16())

    def moe_first(x: Any, w13: Any, w2: Any, sw13: Any, sw2: Any, out: Any) -> None:
        out.copy_(x * w13[0, 0, 0] + w2[0, 0, 0] + sw13[0, 0] + sw2[0, 0])

    kernel = scale_rows if case == "p36" else moe_first
    send((0, kernel, "launch"))
    gated = registry.protect(_provenance.gate, _send=send, _original=kernel, _count=True)
    report = registry.protect(_provenance.report_result, _send=send)
    times, peaks = [], []
    for _ in range(rounds):
        with open("/proc/self/clear_refs", "w") as refs:  # the peak from here on
            refs.write("5")
        held = _resident_mib()
        control.begin_call(suppress=False, audit=True)
        start = time.thread_time()
        report_inputs(inputs, ()) if with_inplace else report_inputs(inputs)
        if case == "p36":
            x, w = inputs
            wide = eager("aten._to_copy.default", (x,), {"dtype": torch.float32})
            mean = eager("aten.mean.dim", (eager("aten.pow.Tensor_Scalar", (wide, 2)), [-1]))
            inv = eager("aten.rsqrt.default", (eager("aten.add.Tensor", (mean, 1e-6)),))
            out = eager("aten.empty_like.default", (x,))
            gated(x, inv, w, out)
        else:
            out = eager("aten.empty.memory_format", ([rows, hidden],), {"dtype": torch.bfloat16})
            gated(*inputs, out)
        report([out])
        times.append(time.thread_time() - start)
        peaks.append(_peak_mib() - held)
        control.report([512])
        del out
    control.close()
    tree = str(Path(_provenance.__file__).resolve().parents[2])
    size = sum(t.numel() * t.element_size() for t in inputs) / 2**20
    return {"tree": tree, "case": case, "inputs_mib": round(size), "audited_call_cpu_s_min": round(min(times), 3),
            "peak_beyond_held_mib_max": round(max(peaks))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("p36", "p47"), default="p36")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(args.case, args.rounds)))


if __name__ == "__main__":
    main()
