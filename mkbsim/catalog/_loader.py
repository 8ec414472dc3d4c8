"""Discovery and validation of problem modules (stdlib + torch only: runs on the GPU machine)."""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

FAMILIES = ("attention", "kv_cache", "linear_attention", "mlp_norm", "moe", "quantization")
SOURCES = ("FI", "vLLM", "FLA", "SOL")
_FILE_RE = re.compile(r"^(\d{2,3})_([a-z0-9_]+)\.py$")
_REQUIRED = (
    "ID", "NAME", "FAMILY", "SOURCE", "DESCRIPTION", "NOTES", "AXES", "INPUTS", "OUTPUTS",
    "INPLACE", "WORKLOAD", "SMOKE", "make_inputs", "reference", "cost",
)  # fmt: skip

TensorSpec = tuple[tuple[str | int, ...] | None, str]


class ProblemLoadError(Exception):
    """A problem module that cannot be used; names the file and what is wrong."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class Problem:
    """One loaded problem module (DESIGN §8), with its metadata checked."""

    id: str
    name: str
    family: str
    source: str
    description: str
    notes: str
    axes: dict[str, int | str]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    inplace: tuple[str, ...]
    workload: dict[str, int]
    smoke: dict[str, int]
    path: Path
    module: ModuleType = field(repr=False, compare=False)

    @property
    def number(self) -> int:
        return int(self.id[1:])

    @property
    def dtype(self) -> str:
        """The dtype suffix of the study's name (bf16, fp32, fp8, nvfp4, ...)."""
        return self.name.rsplit("_", 1)[-1]

    def make_inputs(self, workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[Any, ...]:
        return tuple(self.module.make_inputs(workload, seed=seed, device=device))

    @property
    def reference(self) -> Callable[..., Any]:
        fn: Callable[..., Any] = self.module.reference
        return fn

    def cost(self, workload: dict[str, int] | None = None) -> Any:
        """The problem's ``problems._common.Cost`` for ``workload`` (default: WORKLOAD)."""
        return self.module.cost(dict(workload if workload is not None else self.workload))

    def input_cost(self, workload: dict[str, int], inputs: Sequence[Any]) -> Any:
        """The work of one call on ``inputs`` where it depends on their values (sequence lengths in a page table:
        the module's ``input_cost``), else ``cost(workload)``."""
        priced = getattr(self.module, "input_cost", None)
        return self.cost(workload) if priced is None else priced(dict(workload), tuple(inputs))

    def shape_of(self, spec: TensorSpec, workload: dict[str, int]) -> tuple[int, ...] | None:
        dims, _ = spec
        if dims is None:
            return None
        return tuple(d if isinstance(d, int) else workload[d] for d in dims)

    def __reduce__(self) -> tuple[Callable[[str, str], Problem], tuple[str, str]]:
        # a module does not pickle: another process (a Ray worker of an LLM campaign) loads the problem
        # from its own ``problems`` package, by family and file name
        return _load_installed, (self.family, self.path.name)


@dataclass
class Catalog:
    problems: list[Problem]
    errors: list[ProblemLoadError]

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)

    def __len__(self) -> int:
        return len(self.problems)

    def get(self, key: str) -> Problem:
        """Look up by id (``p28``, ``28``) or full name; raises ``KeyError`` with a helpful message."""
        k = key.strip()
        if k.isdigit():
            k = f"p{int(k):02d}"
        for p in self.problems:
            if k.lower() in (p.id, p.name):
                return p
        raise KeyError(f"unknown problem {key!r} (use an id p01..p74 or a full name; see `mkbsim problems list`)")

    def select(self, spec: str | None) -> list[Problem]:
        """Problems matching a comma-separated spec of ids, names, families, ranges (p01-p09) or globs."""
        import fnmatch

        if not spec or spec.strip() in ("all", "*"):
            return list(self.problems)
        chosen: dict[str, Problem] = {}
        for term in (t.strip() for t in spec.split(",")):
            if not term:
                continue
            if term in FAMILIES:
                matched = [p for p in self.problems if p.family == term]
            elif re.fullmatch(r"p?\d+-p?\d+", term):
                lo, hi = (int(x.lstrip("p")) for x in term.split("-"))
                matched = [p for p in self.problems if lo <= p.number <= hi]
            elif any(c in term for c in "*?["):
                matched = [p for p in self.problems if fnmatch.fnmatch(p.name, term) or fnmatch.fnmatch(p.id, term)]
            else:
                matched = [self.get(term)]
            if not matched:
                raise KeyError(f"problem selection {term!r} matches nothing")
            for p in matched:
                chosen[p.id] = p
        return sorted(chosen.values(), key=lambda p: p.number)


def problems_root() -> Path:
    """The directory of the ``problems`` package (next to ``mkbsim`` in a checkout or install)."""
    spec = importlib.util.find_spec("problems")
    if spec is None or not spec.submodule_search_locations:
        raise ProblemLoadError(Path("problems"), "the `problems` package is not importable")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def _load_installed(family: str, filename: str) -> Problem:
    return load_problem(problems_root() / family / filename)


def load_problem(path: Path) -> Problem:
    """Import one problem module from its file and check its metadata."""
    m = _FILE_RE.match(path.name)
    if not m:
        raise ProblemLoadError(path, "file name must be NN_<name>.py")
    family = path.parent.name
    mod_name = f"problems.{family}._p{m.group(1)}_{m.group(2)}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ProblemLoadError(path, "cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a broken module must not take the catalogue down
        sys.modules.pop(mod_name, None)
        raise ProblemLoadError(path, f"import failed: {type(exc).__name__}: {exc}") from exc
    missing = [n for n in _REQUIRED if not hasattr(module, n)]
    if missing:
        raise ProblemLoadError(path, f"missing {', '.join(missing)}")
    if not (module.__doc__ or "").strip():
        raise ProblemLoadError(path, "missing the one-line docstring")
    problem = Problem(
        id=module.ID, name=module.NAME, family=module.FAMILY, source=module.SOURCE,
        description=module.DESCRIPTION, notes=module.NOTES, axes=dict(module.AXES),
        inputs=dict(module.INPUTS), outputs=dict(module.OUTPUTS), inplace=tuple(module.INPLACE),
        workload=dict(module.WORKLOAD), smoke=dict(module.SMOKE), path=path, module=module,
    )  # fmt: skip
    _check(problem, m.group(1), m.group(2))
    return problem


def _check(p: Problem, number: str, stem: str) -> None:
    def fail(msg: str) -> None:
        raise ProblemLoadError(p.path, msg)

    if p.id != f"p{number}":
        fail(f"ID {p.id!r} does not match the file number {number}")
    if p.name != stem:
        fail(f"NAME {p.name!r} does not match the file name {stem!r}")
    if p.family != p.path.parent.name or p.family not in FAMILIES:
        fail(f"FAMILY {p.family!r} must be the folder name, one of {FAMILIES}")
    if p.source not in SOURCES:
        fail(f"SOURCE {p.source!r} must be one of {SOURCES}")
    if not p.description.strip():
        fail("DESCRIPTION is empty")
    for label, shape in (("WORKLOAD", p.workload), ("SMOKE", p.smoke)):
        missing = [a for a in p.axes if a not in shape]
        if missing:
            fail(f"{label} lacks axes {missing}")
        bad = [a for a, v in shape.items() if not isinstance(v, int) or v <= 0]
        if bad:
            fail(f"{label} has non-positive or non-int axes {bad}")
    for a, v in p.axes.items():
        if v != "var" and (not isinstance(v, int) or p.workload[a] != v):
            fail(f"AXES[{a!r}] is the constant {v!r} but WORKLOAD has {p.workload.get(a)!r}")
    for label, specs in (("INPUTS", p.inputs), ("OUTPUTS", p.outputs)):
        for name, spec in specs.items():
            if not (isinstance(spec, tuple) and len(spec) == 2):
                fail(f"{label}[{name!r}] must be (shape, dtype)")
            dims, _ = spec
            for d in dims or ():
                if not isinstance(d, int) and d not in p.axes:
                    fail(f"{label}[{name!r}] uses unknown axis {d!r}")
    for name in p.inplace:
        if name not in p.inputs:
            fail(f"INPLACE names {name!r}, which is not an input")


def load_catalog(root: Path | None = None) -> Catalog:
    """Load every problem module under ``root`` (default: the installed ``problems`` package)."""
    base = root or problems_root()
    problems: list[Problem] = []
    errors: list[ProblemLoadError] = []
    for family in FAMILIES:
        for path in sorted((base / family).glob("[0-9][0-9]*_*.py")):
            try:
                problems.append(load_problem(path))
            except ProblemLoadError as exc:
                errors.append(exc)
    problems.sort(key=lambda p: p.number)
    return Catalog(problems=problems, errors=errors)
