"""What the windowed copy check costs an audited draw (DESIGN §5, the bypass test as coverage; ``_provenance``'s
``COPY_RUNS``): one launch writes a bf16 output of ``rows x hidden`` from a float32 argument eager code made (an
intermediate of the output's size, which holds no run of it) and an eager bf16 buffer ``--held`` times the output's
size (``--levels``: an int8 output of that many values, the kernel's own, beside a buffer of the same values), reported
to the provenance vault as the audit reports them, with the checks on, the windowed one alone (no
order-free probes, ``ELEMENT_PROBES``) and neither (no window lengths either), in the same process. Audited draws are
never timed.

    python benchmarks/copy_runs_cost.py [--rows 4096 --hidden 128 --held 2] [--rounds 3]
    python benchmarks/copy_runs_cost.py --chance

CPU time of the calling thread per audited call: the least of ``--rounds`` rounds. ``--chance``: the share of an
output's windows (4096 elements of a few dtypes and value domains) that an unrelated buffer of the same values, 64
times its size, holds by chance, per fixed window length (why the length is chosen per output: ``RUN_FALSE``).
"""

from __future__ import annotations

import _thread
import argparse
import functools
import json
import time
from typing import Any


def _audited_call(rows: int, hidden: int, held: int, runs: tuple[int, ...], probes: int, levels: int) -> float:
    import torch

    from mkbsim.verifier import _control, _provenance
    from mkbsim.verifier._operators import dispatch_hooks
    from mkbsim.verifier._vault import Registry

    saved = _provenance.COPY_RUNS, _provenance.ELEMENT_PROBES
    _provenance.COPY_RUNS, _provenance.ELEMENT_PROBES = runs, probes
    try:
        lib = _provenance.provenance_lib(torch.device("cpu"))
    finally:
        _provenance.COPY_RUNS, _provenance.ELEMENT_PROBES = saved
    control = _control.ControlPage()
    registry = Registry()
    numel = rows * hidden
    send = registry.open(
        _provenance.provenance_vault, control.buf, lib, _provenance.page_layout(), [torch.randperm(numel)[:512]],
        [numel], {},
    )  # fmt: skip
    op = registry.protect(
        _provenance.dispatch, _send=send, _serial=_thread.RLock(), **dispatch_hooks(registry, torch.device("cpu"))
    )

    def eager(name: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> Any:
        return op(None, functools.reduce(getattr, name.split("."), torch.ops), (), args, kwargs)

    def kernel(out: torch.Tensor, scale: torch.Tensor, buffer: torch.Tensor) -> None:
        out.copy_((scale + 1) % levels if levels else scale * 1.5)

    dtype = torch.int8 if levels else torch.bfloat16

    def draw(n: int) -> torch.Tensor:
        return torch.randint(0, levels, (n, hidden), dtype=torch.int8) if levels else torch.randn(n, hidden)

    x = draw(rows)
    send((0, kernel, "launch"))
    gated = registry.protect(_provenance.gate, _send=send, _original=kernel, _count=True, _serial=_thread.RLock())
    control.begin_call(suppress=False, audit=True)
    start = time.thread_time()
    scale = eager("aten.mul.Tensor", (x, 2.0))
    buffer = eager("aten._to_copy.default", (draw(held * rows),), {"dtype": dtype})
    out = eager("aten.empty.memory_format", ([rows, hidden],), {"dtype": dtype})
    gated(out, scale, buffer)
    registry.protect(_provenance.report_result, _send=send)([out])
    spent = time.thread_time() - start
    control.close()
    return spent


def _chance() -> dict[str, dict[int, float]]:
    import torch

    def windows(values: torch.Tensor, k: int) -> torch.Tensor:
        return values.to(torch.int64).unfold(0, k, 1).unique(dim=0)

    domains = {
        "bool": lambda n: torch.randint(0, 2, (n,)).bool().view(torch.int8),
        "int8, 4 values": lambda n: torch.randint(0, 4, (n,)).to(torch.int8),
        "fp8 e4m3 codes of randn x 64": lambda n: (torch.randn(n) * 64).to(torch.float8_e4m3fn).view(torch.int8),
        "bf16 randn": lambda n: torch.randn(n).to(torch.bfloat16).view(torch.int16),
    }
    found: dict[str, dict[int, float]] = {}
    for name, draw in domains.items():
        out, pool = draw(4096), draw(64 * 4096)
        found[name] = {}
        for k in (8, 32):
            own, held = windows(out, k), windows(pool, k)
            both = torch.cat([own, held]).unique(dim=0).shape[0]
            found[name][k] = round((own.shape[0] + held.shape[0] - both) / own.shape[0], 4)
    return found


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--held", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chance", action="store_true")
    parser.add_argument("--levels", type=int, default=0, help="an int8 output of this many values (0: bf16 randn)")
    args = parser.parse_args()
    if args.chance:
        print(json.dumps(_chance()))
        return
    torch.set_num_threads(1)
    from mkbsim.verifier._provenance import COPY_RUNS, ELEMENT_PROBES

    # both checks, the windowed one alone (no order-free probes), neither
    settings: dict[str, tuple[tuple[int, ...], int]] = {
        "check": (COPY_RUNS, ELEMENT_PROBES), "windows_only": (COPY_RUNS, 0), "no_check": ((), 0)
    }  # fmt: skip
    found: dict[str, list[float]] = {kind: [] for kind in settings}
    for _ in range(args.rounds):
        for kind, (runs, probes) in settings.items():
            found[kind].append(_audited_call(args.rows, args.hidden, args.held, runs, probes, args.levels) * 1e3)
    shape = {"rows": args.rows, "hidden": args.hidden, "held": args.held, "levels": args.levels}
    print(json.dumps({**shape, **{f"{kind}_ms_min": round(min(ms), 1) for kind, ms in found.items()}}))


if __name__ == "__main__":
    main()
