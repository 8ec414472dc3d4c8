"""What the check that a contraction's DSL contribution stayed costs an audited draw (DESIGN §5, derived credit;
``_provenance``'s ``undone``): a p52-shaped partial plan's eager GEMM of DSL activations against an eager weight,
then its per-row rescale and cast, reported to the provenance vault as the audit's mode reports them, with the
check on and off (``WEIGHED_LINE`` beyond every line's length) in the same process. Audited draws are never timed.

    python benchmarks/derived_credit_cost.py [--tokens 5 --hidden 256 --features 384] [--rounds 5]

CPU time of the calling thread per audited call: the least of ``--rounds`` rounds.
"""

from __future__ import annotations

import _thread
import argparse
import functools
import json
import time
from typing import Any


def _audited_call(tokens: int, hidden: int, features: int, weighed_line: int) -> float:
    import torch

    from mkbsim.verifier import _control, _provenance
    from mkbsim.verifier._operators import dispatch_hooks
    from mkbsim.verifier._vault import Registry

    saved = _provenance.WEIGHED_LINE
    _provenance.WEIGHED_LINE = weighed_line
    try:
        lib = _provenance.provenance_lib(torch.device("cpu"))
    finally:
        _provenance.WEIGHED_LINE = saved
    control = _control.ControlPage()
    registry = Registry()
    numel = tokens * hidden
    send = registry.open(
        _provenance.provenance_vault, control.buf, lib, _provenance.page_layout(), [torch.arange(min(numel, 512))],
        [numel], {},
    )  # fmt: skip
    op = registry.protect(
        _provenance.dispatch, _send=send, _serial=_thread.RLock(), **dispatch_hooks(registry, torch.device("cpu"))
    )

    def eager(name: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> Any:
        return op(None, functools.reduce(getattr, name.split("."), torch.ops), (), args, kwargs)

    def kernel(dst: torch.Tensor) -> None:
        dst.copy_(torch.randn(dst.shape))

    activations = torch.empty(tokens, features)
    weight = torch.randn(hidden, features) / features**0.5
    row_scale = torch.rand(tokens, 1) + 0.5
    send((0, kernel, "launch"))
    gated = registry.protect(_provenance.gate, _send=send, _original=kernel, _count=True)
    control.begin_call(suppress=False, audit=True)
    start = time.thread_time()
    gated(activations)  # the DSL's quantised activations
    scaled = eager("aten.mul.Tensor", (weight, 0.5))  # an eagerly scaled weight
    product = eager("aten.mm.default", (activations, eager("aten.t.default", (scaled,))))
    out = eager("aten._to_copy.default", (eager("aten.mul.Tensor", (product, row_scale)),), {"dtype": torch.bfloat16})
    registry.protect(_provenance.report_result, _send=send)([out])
    spent = time.thread_time() - start
    control.close()
    return spent


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--features", type=int, default=384)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    found: dict[str, list[float]] = {"check": [], "no_check": []}
    for _ in range(args.rounds):
        for kind in found:
            line = 1 << 62 if kind == "no_check" else 16
            found[kind].append(_audited_call(args.tokens, args.hidden, args.features, line) * 1e3)
    shape = {"tokens": args.tokens, "hidden": args.hidden, "features": args.features}
    print(json.dumps({**shape, **{f"{kind}_ms_min": round(min(ms), 3) for kind, ms in found.items()}}))


if __name__ == "__main__":
    main()
