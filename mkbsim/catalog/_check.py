"""`mkbsim problems check`: each problem's reference against its contract, on CPU SMOKE inputs."""

from __future__ import annotations

import inspect
import re
import time
from dataclasses import dataclass, field
from typing import Any

from mkbsim.catalog._loader import Problem

#: a SMOKE float64 reference must run well under a second on one CPU thread (DESIGN §8)
SMOKE_SECONDS = 1.0


@dataclass
class ProblemCheck:
    problem: Problem
    failures: list[str] = field(default_factory=list)
    anchor_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures


def outputs_of(problem: Problem, inputs: tuple[Any, ...]) -> list[Any]:
    """The reference's outputs as a list, followed by the INPLACE inputs after the call."""
    out = problem.reference(*inputs)
    outs = list(out) if isinstance(out, tuple) else [out]
    names = list(problem.inputs)
    return outs + [inputs[names.index(n)] for n in problem.inplace]


def anchor_inputs(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Every float16/bfloat16/float32 tensor cast to float64 (DESIGN §5), others unchanged."""
    import torch

    floats = (torch.float16, torch.bfloat16, torch.float32)
    return tuple(x.to(torch.float64) if isinstance(x, torch.Tensor) and x.dtype in floats else x for x in inputs)


def check_problem(problem: Problem, *, seed: int = 1234) -> ProblemCheck:
    """Run the contract checks; every failure is recorded, none raises."""
    import torch

    from problems._common import DTYPE_BYTES, DTYPES, Cost

    result = ProblemCheck(problem)
    fail = result.failures.append
    try:
        inputs = problem.make_inputs(problem.smoke, seed=seed)
    except Exception as exc:
        fail(f"make_inputs(SMOKE) raised {type(exc).__name__}: {exc}")
        return result
    if len(inputs) != len(problem.inputs):
        fail(f"make_inputs returned {len(inputs)} inputs, INPUTS declares {len(problem.inputs)}")
        return result
    for (name, spec), x in zip(problem.inputs.items(), inputs, strict=True):
        shape = problem.shape_of(spec, problem.smoke)
        if shape is None:
            if isinstance(x, torch.Tensor):
                fail(f"input {name}: declared a scalar, got a tensor")
        elif not isinstance(x, torch.Tensor) or tuple(x.shape) != shape or x.dtype != DTYPES[spec[1]]:
            got = f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
            fail(f"input {name}: expected {shape} {spec[1]}, got {got}")
    before = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    try:
        anchor_in = anchor_inputs(inputs)
        # CPU time of this process, not wall: the limit is the reference's cost, which a loaded machine's waits
        # for a core would inflate (p64's SMOKE took 1.2-1.4 s of wall at load 6 for ~0.5 s of CPU)
        t0 = time.process_time()
        anchor = outputs_of(problem, anchor_in)
        result.anchor_seconds = time.process_time() - t0
        outs = outputs_of(problem, inputs)
    except Exception as exc:
        fail(f"reference raised {type(exc).__name__}: {exc}")
        return result
    for line in _lowering_lines(problem):
        fail(f"reference lowers precision with `{line}` (use problems._common.upcast)")
    if result.anchor_seconds > SMOKE_SECONDS:
        fail(f"float64 SMOKE reference took {result.anchor_seconds:.2f} s (limit {SMOKE_SECONDS:.0f} s)")
    specs = list(problem.outputs.values()) + [problem.inputs[n] for n in problem.inplace]
    if len(outs) != len(specs):
        fail(f"reference returned {len(outs) - len(problem.inplace)} outputs, OUTPUTS declares {len(problem.outputs)}")
        return result
    names = list(problem.outputs) + list(problem.inplace)
    floats = (torch.float16, torch.bfloat16, torch.float32)
    for name, spec, out, anc in zip(names, specs, outs, anchor, strict=True):
        shape = problem.shape_of(spec, problem.smoke)
        if tuple(out.shape) != shape or out.dtype != DTYPES[spec[1]]:
            fail(f"output {name}: expected {shape} {spec[1]}, got {tuple(out.shape)} {out.dtype}")
            continue
        if out.dtype in floats:
            if anc.dtype != torch.float64:
                fail(f"output {name}: the float64 anchor was lowered to {anc.dtype} (use upcast, not .float())")
            elif not bool(torch.isfinite(anc).all()):
                fail(f"output {name}: anchor has NaN/inf")
            elif float(anc.abs().max()) == 0.0:
                fail(f"output {name}: all zeros")
            else:
                err = float((out.to(torch.float64) - anc).abs().max())
                scale = float(anc.abs().max())
                if err > 0.1 * scale + 1e-6:
                    fail(f"output {name}: reference is {err:.3g} from its float64 anchor (scale {scale:.3g})")
    mutable = {list(problem.inputs).index(n) for n in problem.inplace}
    for i, (b, x) in enumerate(zip(before, inputs, strict=True)):
        if isinstance(b, torch.Tensor) and i not in mutable and not torch.equal(b, x):
            fail(f"reference mutated input {list(problem.inputs)[i]} (not in INPLACE)")
    # determinism per seed, variety across seeds
    again = problem.make_inputs(problem.smoke, seed=seed)
    if not all(_same(a, b) for a, b in zip(before, again, strict=True)):
        fail("make_inputs is not deterministic for a fixed seed")
    other = problem.make_inputs(problem.smoke, seed=seed + 1)
    if all(_same(a, b) for a, b in zip(again, other, strict=True)):
        fail("make_inputs gives the same inputs for different seeds")
    # cost: positive, bounded by the tensors it moves, larger at the production shape
    try:
        smoke_cost, prod_cost = problem.cost(problem.smoke), problem.cost(problem.workload)
    except Exception as exc:
        fail(f"cost raised {type(exc).__name__}: {exc}")
        return result
    if not isinstance(smoke_cost, Cost) or not isinstance(prod_cost, Cost):
        fail("cost must return problems._common.Cost")
        return result
    n_ret = len(problem.outputs)
    out_bytes = sum(o.numel() * DTYPE_BYTES[o.dtype] for o in outs[:n_ret])
    in_bytes = sum(x.numel() * DTYPE_BYTES[x.dtype] for x in again if isinstance(x, torch.Tensor))
    if not out_bytes <= smoke_cost.bytes <= in_bytes + out_bytes + 64:
        fail(f"cost.bytes {smoke_cost.bytes} outside [outputs {out_bytes}, inputs+outputs {in_bytes + out_bytes}]")
    if prod_cost.bytes <= smoke_cost.bytes:
        fail("cost at WORKLOAD is not larger than at SMOKE")
    if hasattr(problem.module, "input_cost"):
        # a draw's own work: near the nominal one (a wrong input's position prices another tensor's numbers)
        try:
            priced = problem.input_cost(problem.smoke, again)
        except Exception as exc:
            fail(f"input_cost raised {type(exc).__name__}: {exc}")
            return result
        if not isinstance(priced, Cost):
            fail("input_cost must return problems._common.Cost")
        elif not 0.2 * smoke_cost.total_flops <= priced.total_flops <= 5 * smoke_cost.total_flops:
            fail(f"input_cost's {priced.total_flops:.3g} FLOPs are far from cost's {smoke_cost.total_flops:.3g}")
    return result


_LOWERING = re.compile(r"\.float\(\)|\.to\(torch\.float32\)|\.to\(dtype=torch\.float32\)")


def _lowering_lines(problem: Problem) -> list[str]:
    """Lines of ``reference`` that cast to float32: on the float64 anchor run they lower precision.

    The float64 anchor still comes back as float64 after such a cast, so only the source shows it.
    """
    try:
        source = inspect.getsource(problem.reference)
    except (OSError, TypeError):
        return []
    return [line.strip() for line in source.splitlines() if _LOWERING.search(line)]


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return bool(a == b)
