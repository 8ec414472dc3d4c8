"""Interop with the FlashInfer-Trace definition format (FlashInfer-Bench, SOL-ExecBench).

A definition is JSON: name, op_type, axes (const with a value, or var), named input/output tensors
(shape = list of axis names, null for a Python scalar; dtype), and a PyTorch `reference` string
defining `run`. Export turns a catalogue problem into one; import validates definitions, matches
them against the catalogue, and writes problem modules for those whose inputs a generic generator
can draw honestly (floating-point tensors and scalars — index structures need a hand-written one).
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkbsim.catalog._loader import FAMILIES, Problem

FI_DTYPES = (
    "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
    "int64", "int32", "int16", "int8", "bool",
)  # fmt: skip
_FLOAT_DTYPES = ("float32", "float16", "bfloat16")
_OP_FAMILY = {
    "gqa_paged": "attention", "gqa_ragged": "attention", "mla_paged": "attention", "mla_ragged": "attention",
    "dsa_paged": "attention", "rope": "attention", "gdn": "linear_attention", "mamba_ssu": "linear_attention",
    "moe": "moe", "rmsnorm": "mlp_norm", "fused_add_rmsnorm": "mlp_norm", "gemm": "mlp_norm",
    "sampling": "mlp_norm",
}  # fmt: skip


class FiFormatError(ValueError):
    """A definition that does not follow the format; names the source and the field."""


@dataclass(frozen=True)
class FiAxis:
    type: str  # "const" | "var"
    value: int | None = None
    parent: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class FiTensor:
    shape: tuple[str, ...] | None
    dtype: str
    description: str | None = None


@dataclass(frozen=True)
class FiDefinition:
    name: str
    op_type: str
    axes: dict[str, FiAxis]
    inputs: dict[str, FiTensor]
    outputs: dict[str, FiTensor]
    reference: str
    description: str | None = None
    tags: tuple[str, ...] = ()
    constraints: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        def axis(a: FiAxis) -> dict[str, Any]:
            out: dict[str, Any] = {"type": a.type}
            for key in ("value", "parent", "description"):
                if getattr(a, key) is not None:
                    out[key] = getattr(a, key)
            return out

        def tensor(t: FiTensor) -> dict[str, Any]:
            out: dict[str, Any] = {"shape": list(t.shape) if t.shape is not None else None, "dtype": t.dtype}
            if t.description is not None:
                out["description"] = t.description
            return out

        data: dict[str, Any] = {"name": self.name, "op_type": self.op_type}
        if self.description is not None:
            data["description"] = self.description
        if self.tags:
            data["tags"] = list(self.tags)
        data["axes"] = {k: axis(a) for k, a in self.axes.items()}
        if self.constraints:
            data["constraints"] = list(self.constraints)
        data["inputs"] = {k: tensor(t) for k, t in self.inputs.items()}
        data["outputs"] = {k: tensor(t) for k, t in self.outputs.items()}
        data["reference"] = self.reference
        return data


def parse_definition(data: Any, source: str = "<definition>") -> FiDefinition:
    """Validate a decoded definition; raises FiFormatError naming ``source`` and the field."""

    def fail(msg: str) -> FiFormatError:
        return FiFormatError(f"{source}: {msg}")

    if not isinstance(data, dict):
        raise fail("a definition must be a JSON object")
    for key, kind in (("name", str), ("op_type", str), ("axes", dict), ("inputs", dict), ("outputs", dict),
                      ("reference", str)):  # fmt: skip
        if not isinstance(data.get(key), kind):
            raise fail(f"`{key}` is required and must be a {'string' if kind is str else 'object'}")
    axes: dict[str, FiAxis] = {}
    for name, spec in data["axes"].items():
        if not isinstance(spec, dict) or spec.get("type") not in ("const", "var"):
            raise fail(f"axes.{name}.type must be 'const' or 'var'")
        value = spec.get("value")
        if spec["type"] == "const" and (not isinstance(value, int) or isinstance(value, bool)):
            raise fail(f"axes.{name}.value must be an integer for a const axis")
        axes[name] = FiAxis(spec["type"], value, spec.get("parent"), spec.get("description"))

    def tensors(kind: str) -> dict[str, FiTensor]:
        out = {}
        for name, spec in data[kind].items():
            if not isinstance(spec, dict) or "shape" not in spec or "dtype" not in spec:
                raise fail(f"{kind}.{name} needs `shape` and `dtype`")
            if spec["dtype"] not in FI_DTYPES:
                raise fail(f"{kind}.{name}.dtype {spec['dtype']!r} is not one of {', '.join(FI_DTYPES)}")
            shape = spec["shape"]
            if shape is not None:
                if not isinstance(shape, list) or not all(isinstance(a, str) for a in shape):
                    raise fail(f"{kind}.{name}.shape must be a list of axis names or null")
                unknown = [a for a in shape if a not in axes]
                if unknown:
                    raise fail(f"{kind}.{name}.shape uses undeclared axes {unknown}")
                shape = tuple(shape)
            out[name] = FiTensor(shape, spec["dtype"], spec.get("description"))
        return out

    inputs, outputs = tensors("inputs"), tensors("outputs")
    try:
        tree = ast.parse(data["reference"])
    except SyntaxError as exc:
        raise fail(f"reference does not parse: line {exc.lineno}: {exc.msg}") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
        raise fail("reference must define a top-level function `run`")
    return FiDefinition(
        name=data["name"], op_type=data["op_type"], axes=axes, inputs=inputs, outputs=outputs,
        reference=data["reference"], description=data.get("description"), tags=tuple(data.get("tags", ())),
        constraints=tuple(data.get("constraints", ())),
    )  # fmt: skip


def load_definitions(path: Path) -> tuple[list[FiDefinition], list[FiFormatError]]:
    """Every definition in a JSON file or under a directory (recursively); bad ones are collected."""
    files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
    good, bad = [], []
    for f in files:
        try:
            good.append(parse_definition(json.loads(f.read_text()), str(f)))
        except json.JSONDecodeError as exc:
            bad.append(FiFormatError(f"{f}: not JSON: {exc.msg} at line {exc.lineno}"))
        except FiFormatError as exc:
            bad.append(exc)
    return good, bad


def export_problem(problem: Problem) -> FiDefinition:
    """A catalogue problem as a definition. Its reference is the module's own source plus `run`.

    The reference imports ``problems._common`` (and family helpers): it runs where the ``problems``
    package is importable, which the tag ``mkbsim:requires=problems`` states.
    """
    axes = {
        name: FiAxis("var") if value == "var" else FiAxis("const", int(value))
        for name, value in problem.axes.items()
    }

    def tensors(specs: dict[str, Any]) -> dict[str, FiTensor]:
        out = {}
        for name, (dims, dtype) in specs.items():
            if dims is None:
                out[name] = FiTensor(None, dtype)
                continue
            shape = []
            for d in dims:
                if isinstance(d, int):  # an anonymous literal dimension becomes a const axis
                    axes.setdefault(f"dim_{d}", FiAxis("const", d))
                    d = f"dim_{d}"
                shape.append(d)
            out[name] = FiTensor(tuple(shape), dtype)
        return out

    inputs = tensors(problem.inputs)
    outputs = tensors(problem.outputs)
    for name in problem.inplace:  # FlashInfer-Trace has no in-place outputs: list them, tag them
        outputs[name] = inputs[name]
    source = inspect.getsource(problem.module).rstrip() + "\n\n\ndef run(*inputs):\n    return reference(*inputs)\n"
    tags = [f"mkbsim:id:{problem.id}", f"mkbsim:family:{problem.family}", f"source:{problem.source}",
            "mkbsim:requires=problems"] + [f"mkbsim:inplace:{n}" for n in problem.inplace]  # fmt: skip
    return FiDefinition(
        name=problem.name, op_type=problem.family, axes=axes, inputs=inputs, outputs=outputs, reference=source,
        description=problem.description, tags=tuple(tags),
    )  # fmt: skip


def interface_differences(defn: FiDefinition, problem: Problem) -> list[str]:
    """How a definition's interface differs from a problem's (names, dtypes, const axes)."""
    diffs = []
    if list(defn.inputs) != list(problem.inputs):
        diffs.append(f"inputs {list(defn.inputs)} vs {list(problem.inputs)}")
    for name, t in defn.inputs.items():
        if name in problem.inputs and problem.inputs[name][1] != t.dtype:
            diffs.append(f"input {name} dtype {t.dtype} vs {problem.inputs[name][1]}")
    if list(defn.outputs) != list(problem.outputs) + list(problem.inplace):
        diffs.append(f"outputs {list(defn.outputs)} vs {list(problem.outputs)}")
    for name, a in defn.axes.items():
        if a.type == "const" and name in problem.axes and problem.axes[name] != a.value:
            diffs.append(f"axis {name} = {a.value} vs {problem.axes[name]}")
    return diffs


def generic_inputs_ok(defn: FiDefinition) -> str | None:
    """None if every input can be drawn generically; else why not (e.g. index tensors)."""
    special = [n for n, t in defn.inputs.items() if t.shape is not None and t.dtype not in _FLOAT_DTYPES]
    if special:
        return f"inputs {special} are not floating point (index structures need a hand-written make_inputs)"
    return None


def family_of(defn: FiDefinition) -> str:
    family = _OP_FAMILY.get(defn.op_type, "")
    for tag in defn.tags:
        if tag.startswith("mkbsim:family:"):
            family = tag.split(":", 2)[2]
    return family if family in FAMILIES else "mlp_norm"


def workload_axes(defn: FiDefinition, workloads_file: Path | None) -> dict[str, int]:
    """The largest value seen for each var axis in a FlashInfer-Trace workload JSONL (the production shape)."""
    seen: dict[str, int] = {}
    if workloads_file is not None and workloads_file.exists():
        for line in workloads_file.read_text().splitlines():
            if line.strip():
                for axis, value in json.loads(line).get("workload", {}).get("axes", {}).items():
                    seen[axis] = max(seen.get(axis, 0), int(value))
    return seen


class _UpcastFloat32(ast.NodeTransformer):
    """`x.to(torch.float32)` / `x.float()` → `upcast(x)`: keeps the verifier's float64 anchor float64."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if not isinstance(func, ast.Attribute):
            return node
        plain = not node.keywords
        to_float32 = func.attr == "to" and len(node.args) == 1 and ast.unparse(node.args[0]) == "torch.float32"
        if plain and ((func.attr == "float" and not node.args) or to_float32):
            return ast.copy_location(ast.Call(ast.Name("upcast", ast.Load()), [func.value], []), node)
        return node


def problem_module_source(
    defn: FiDefinition, *, number: int, workload: dict[str, int], smoke: dict[str, int], origin: str
) -> str:
    """A problem module (problems/FORMAT.md) for a definition whose inputs are generic-drawable."""
    reason = generic_inputs_ok(defn)
    if reason:
        raise FiFormatError(f"{defn.name}: {reason}")
    reference = ast.unparse(_UpcastFloat32().visit(ast.parse(defn.reference)))
    axes = {k: (a.value if a.type == "const" else "var") for k, a in defn.axes.items()}
    summary = (defn.description or defn.name).strip().splitlines()[0].rstrip(".")
    inputs = {k: (t.shape, t.dtype) for k, t in defn.inputs.items()}
    outputs = {k: (t.shape, t.dtype) for k, t in defn.outputs.items()}
    shape_of = "tuple(workload[a] for a in dims)"
    return f'''"""{summary} (imported from FlashInfer-Trace)."""

# Source: FlashInfer-Trace definition `{defn.name}` (op_type {defn.op_type}), imported by
#   `mkbsim problems import-fi` from {origin}. Reference: the definition's own, with float32 casts
#   turned into upcast() so the verifier's float64 anchor stays float64.
# Production shape: var axes from the definition's workload file where one was found.

from __future__ import annotations

import math

import torch

from problems._common import DTYPE_BYTES, DTYPES, Cost, generator, randn, upcast

ID = "p{number:02d}"
NAME = {defn.name!r}
FAMILY = {family_of(defn)!r}
SOURCE = "FI"
DESCRIPTION = {(defn.description or defn.name)!r}
NOTES = "Imported definition: inputs are drawn as standard normal floats; FLOPs are not derived (bytes only)."
AXES = {axes!r}
INPUTS = {inputs!r}
OUTPUTS = {outputs!r}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {workload!r}
SMOKE = {smoke!r}

{reference}


def reference(*inputs):
    return run(*inputs)


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple:
    gen = generator(seed, device)
    out = []
    for dims, dtype in INPUTS.values():
        if dims is None:
            out.append(float(randn((1,), torch.float32, gen, device).abs().item()) + 0.5)
        else:
            out.append(randn({shape_of}, DTYPES[dtype], gen, device))
    return tuple(out)


def cost(workload: dict[str, int]) -> Cost:
    specs = list(INPUTS.values()) + list(OUTPUTS.values())
    moved = sum(math.prod({shape_of}) * DTYPE_BYTES[DTYPES[dtype]] for dims, dtype in specs if dims is not None)
    return Cost(bytes=max(moved, 1))
'''


_NUMBER_RE = re.compile(r"^(\d\d)_")


def next_free_number(root: Path, start: int = 75) -> int:
    """The first problem number >= ``start`` not used under ``root``."""
    used = {int(m.group(1)) for f in root.rglob("*.py") if (m := _NUMBER_RE.match(f.name))}
    n = start
    while n in used:
        n += 1
    return n
