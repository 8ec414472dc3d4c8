"""On the GPU machine: why the verifier's median for p58 is 1.25x `triton.testing.do_bench`'s.

    python3 benchmarks/gpu_p58.py --json OUT.json [--file problems/quantization/solutions/58_fused_cutedsl.py]

The same `run` of a p58 solution (production shape) timed eight ways, each changing one thing on the way
from do_bench to the verifier, so that the step that costs the difference shows:

1. do_bench: calls queued back to back, L2 flushed between them, the same inputs (median of ``rep`` ms);
2. loop: the same, without the flush;
3. synced: synchronise, start event, call, end event, synchronise: one call at a time, the paper
   protocol's measure, still in this plain process and on the same inputs;
4. synced, fresh inputs: a new draw before every call (the protocol draws fresh inputs);
5. synced, arena: the inputs as views of one shared uint8 allocation (how the worker receives them);
6. synced, arena, gated: 5 with the verifier's DSL gate installed on the launch path;
7. host: the host time of one call, unsynchronised (dispatch and argument conversion only);
8. verifier: `VerifierSession("cuda").verify(..., protocol="paper")`, its median.

What the reading of the code predicts (benchmarks/RESULTS.md, "p58"): the difference is the paper
protocol's, not the harness's. p58 launches two kernels with ten tensor arguments converted through
TVM-FFI, and a tiny quantisation kernel runs between host steps (``torch.empty``, views, the second call's
conversion): synchronised before each call, the GPU idles while the host prepares the next launch and the
events time that gap (3 vs 1 or 2); back to back, the host runs ahead and do_bench hides it. Each row
prints with the GPU, driver and library versions.
"""

from __future__ import annotations

import _thread
import argparse
import importlib.util
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from mkbsim.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "problems" / "quantization" / "solutions" / "58_fused_cutedsl.py"


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"p58_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _synced_ms(run: Any, draws: list[list[Any]], calls: int) -> float:
    times = []
    for i in range(calls):
        args = draws[i % len(draws)]
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(*args)
        end.record()
        end.synchronize()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(statistics.median(times))


def _host_ms(run: Any, args: list[Any], calls: int) -> float:
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return float(statistics.median(times))


def _as_arena(args: list[Any]) -> list[Any]:
    """The draw's tensors as views of one uint8 allocation, as the worker maps them."""
    from mkbsim.verifier._arena import BlockArenas

    block = BlockArenas([args], [], torch.device("cuda"))
    return list(block.arenas[0].args)


def _gate_installed(module: Any) -> None:
    """The verifier's gate on the CuTe DSL launch path, with a control page that orders nothing."""
    from mkbsim.verifier._attribution import attribution_config
    from mkbsim.verifier._control import ControlPage
    from mkbsim.verifier._dsl import DslGates
    from mkbsim.verifier._guards import Guards
    from mkbsim.verifier._provenance import page_layout, provenance_lib, provenance_vault
    from mkbsim.verifier._vault import Registry
    from mkbsim.verifier._worker import HARNESS_DIR

    control = ControlPage()
    control.begin_call(suppress=False, audit=False)
    registry = Registry()
    guards = Guards(registry, attribution_config(HARNESS_DIR, module.__file__, []), "cutedsl", control.buf)
    send = registry.open(provenance_vault, control.buf, provenance_lib(torch.device("cuda")), page_layout(), [], [], {})
    DslGates(registry, guards, send, "cutedsl", _thread.RLock()).install()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=DEFAULT)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    import triton.testing

    problem = load_catalog().get("p58")
    dsl = "cutedsl" if "cutedsl" in a.file.stem else "tirx"
    module = _load(a.file)
    draws = [list(problem.make_inputs(problem.workload, seed=random.getrandbits(63), device="cuda")) for _ in range(8)]
    fixed = draws[0]
    module.run(*fixed)  # compile outside every measurement
    torch.cuda.synchronize()
    rows: dict[str, float] = {}
    rows["1 do_bench (flush, back to back)"] = float(
        triton.testing.do_bench(lambda: module.run(*fixed), warmup=25, rep=200, return_mode="median")
    )
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(a.calls):
        module.run(*fixed)
    end.record()
    end.synchronize()
    rows["2 loop (back to back, no flush)"] = start.elapsed_time(end) / a.calls
    rows["3 synced, same inputs"] = _synced_ms(module.run, [fixed], a.calls)
    rows["4 synced, fresh inputs"] = _synced_ms(module.run, draws, a.calls)
    arenas = [_as_arena(d) for d in draws]
    rows["5 synced, arena views"] = _synced_ms(module.run, arenas, a.calls)
    _gate_installed(module)
    rows["6 synced, arena, gate installed"] = _synced_ms(module.run, arenas, a.calls)
    rows["7 host time of a call (dispatch only)"] = _host_ms(module.run, fixed, a.calls)
    from mkbsim.verifier import VerifierSession

    with VerifierSession("cuda") as session:
        report = session.verify(a.file, "p58", dsl, protocol="paper", workload="production")
        env = session.env()
    rows["8 verifier (paper, median)"] = report.runtime_ms if report.runtime_ms is not None else float("nan")
    base = rows["1 do_bench (flush, back to back)"]
    print(f"{a.file.name} · {env.get('device')} · driver {env.get('driver')} · {env.get('versions')}")
    print("| measure | ms | / do_bench |\n|---|---|---|")
    for name, ms in rows.items():
        print(f"| {name} | {ms:.4f} | {ms / base:.2f} |")
    if not report.passed:
        print(f"verifier: {report.failure}: {report.feedback}")
    if a.json:
        a.json.write_text(
            json.dumps(
                {"file": str(a.file), "env": env, "rows": rows, "verifier": report.to_payload(None, "final")},
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
