"""Attest that a solution file builds and launches the same device code as the file measured on the H200.

    .venv/bin/python benchmarks/attest_device_code.py MEASURED CURRENT [MEASURED CURRENT ...] [--write]

Each file runs in a fresh interpreter the way the verifier runs it (DESIGN §5: `run(*inputs)` of the one
file), on the CPU, at its problem's production workload (`WORKLOAD`, inputs of seed 0), with the DSL's
compile entry point (`tvm.compile`, `cutlass.cute.compile`) wrapped: the real compiler runs for sm_90a
and its artifacts are kept, and the compiled kernel it hands back records each launch instead of running
it. What is compared, per file, in order:

- every build: TIRx - the TVMScript of the IRModule given to `tvm.compile` (grid and block extents, shared
  memory, buffer shapes and dtypes, scalar parameters, the whole kernel body) with the compile options,
  the CUDA C source TVM generates for the cuda target and the host module's LLVM IR (argument checks and
  the launch); CuTe DSL - the MLIR of the `@cute.jit` launch function (`CUTE_DSL_KEEP=ir`: host code,
  grid/block/shared-memory computation and the kernel) and the PTX for sm_90a (`CUTE_DSL_KEEP=ptx`);
- every launch of a compiled kernel, in order: each argument's dtype, shape, strides, storage offset,
  which input it aliases (if any) and the SHA-256 of its bytes at the launch (scalars by exact value);
  uninitialised memory is filled deterministically (`torch.use_deterministic_algorithms`) so fresh
  buffers hash the same;
- what `run` returns and the inputs afterwards: each launch's non-input tensor arguments are filled with
  seeded bytes standing in for the kernel's writes, so host code before or after a launch that changes
  what is computed (a constant, a dtype, a reshape, a post-processing step) changes a hash.

Normalised, because only the name differs: TIRx - each PrimFunc's `global_symbol` (the kernel's name,
which TVM also writes into the host module's strings and value names) is set to kernel0, kernel1, ...
before `tvm.compile`, so every TIRx artifact is compared as it is; CuTe DSL - the symbols the PTX and the
MLIR themselves define (PTX `.entry`/`.func`, MLIR `func.func`/`cuda.kernel`/`gpu.module`/`llvm.func`;
CuTe DSL derives them from the Python class path and argument types) are renamed sym0, sym1, ... in order
of first definition, everywhere they occur (their bodies and signatures are still compared; names only
referred to, such as intrinsics and libdevice calls, are not renamed). Nothing else is: comments,
constants and paths are compared as they are.

Not proven: behaviour at other shapes than the production workload (a branch on shapes that the
production workload does not take), timing effects of anything outside the compiled code, and the NVRTC /
ptxas step after the source (the same toolchain gets the same input). Equal on every pair with `--write`
adds the current file's SHA-256 to its row's `same_device_code_sha256` in h200_measurements.json (with an
`attested` entry: against which measured SHA-256, by which tool, when); the row's own `sha256` must be
the measured file's. Any difference prints a summary, writes nothing and exits 1; bad input exits 2.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).with_name("h200_measurements.json")
TOOL = "benchmarks/attest_device_code.py"
NUMBER_RE = re.compile(r"^(\d{2,3})_")

# Where each artifact kind defines a symbol (group 1 is the name).
DEFINITIONS: dict[str, re.Pattern[str]] = {
    "ptx": re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", re.M),
    "mlir": re.compile(r"^\s*(?:func\.func|cuda\.kernel|gpu\.module|llvm\.func)\s+@([\w$.]+)\s*[({]", re.M),
}


def cute_env(dump_dir: Path, keep: str = "ir,ptx") -> dict[str, str]:
    """The environment under which CuTe DSL compiles for sm_90a and keeps ``keep`` (MLIR, PTX) in ``dump_dir``."""
    return {"CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_KEEP": keep, "CUTE_DSL_DUMP_DIR": str(dump_dir)}


def tirx_sources(executable: Any) -> list[tuple[str, str]]:
    """(kind, text) of a `tvm.compile` result: the host module's LLVM IR, then each imported device module's source."""
    host = executable.mod
    return [("llvm", host.inspect_source()), *(("cuda", m.inspect_source()) for m in host.imports)]


def anonymous(mod: Any) -> Any:
    """``mod`` with each PrimFunc's `global_symbol` (the kernel's name in every artifact, even inside the host
    module's error strings) set to kernel0, kernel1, ... in the IRModule's order: the only change made
    to what TVM compiles."""
    import tvm

    funcs = {gv.name_hint: f for gv, f in mod.functions.items()}
    named = {name: f.with_attr("global_symbol", f"kernel{i}") for i, (name, f) in enumerate(sorted(funcs.items()))}
    return tvm.IRModule(named, attrs=mod.attrs)


def normalise(kind: str, text: str) -> tuple[str, int]:
    """``text`` with the symbols it defines renamed sym0, sym1, ... in order of definition; and how many."""
    names = list(dict.fromkeys(DEFINITIONS[kind].findall(text)))
    mapping = {name: f"sym{i}" for i, name in enumerate(names)}
    if not mapping:
        return text, 0
    # longest first, and not inside a longer identifier on the left (a name's suffixes such as _param_0 stay)
    pattern = re.compile(r"(?<![\w$.])(" + "|".join(re.escape(n) for n in sorted(mapping, key=len, reverse=True)) + ")")
    return pattern.sub(lambda m: mapping[m.group(1)], text), len(mapping)


# --- capture (runs inside the fresh interpreter) -------------------------------------------------------------


def _bytes_sha(t: Any) -> str:
    import torch

    return hashlib.sha256(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


class _Launches:
    """The compiled kernels' stand-in: records each launch and writes seeded bytes into its outputs."""

    def __init__(self, inputs: tuple[Any, ...]) -> None:
        self.inputs = inputs
        self.calls: list[list[dict[str, Any]]] = []

    def alias(self, t: Any) -> int | None:
        ptr = t.untyped_storage().data_ptr()
        storages = [x.untyped_storage().data_ptr() if hasattr(x, "untyped_storage") else None for x in self.inputs]
        return storages.index(ptr) if ptr in storages else None

    def describe(self, value: Any) -> dict[str, Any]:
        import torch

        if isinstance(value, torch.Tensor):
            layout = {"dtype": str(value.dtype), "shape": list(value.shape), "stride": list(value.stride())}
            return {**layout, "offset": value.storage_offset(), "alias_of_input": self.alias(value),
                    "sha256": _bytes_sha(value)}  # fmt: skip
        if isinstance(value, (tuple, list)):
            return {"sequence": [self.describe(v) for v in value]}
        return {"type": type(value).__name__, "value": repr(value)}

    def launch(self, *args: Any, **kwargs: Any) -> None:
        import torch

        keywords = [{"kw": k, **self.describe(v)} for k, v in sorted(kwargs.items())]
        self.calls.append([self.describe(a) for a in args] + keywords)
        g = torch.Generator().manual_seed(len(self.calls))
        for a in args:
            if isinstance(a, torch.Tensor) and self.alias(a) is None:
                seeded = torch.randint(-128, 128, a.shape, generator=g)
                a.copy_(seeded / 64 if a.is_floating_point() else seeded)


class _Recorded:
    def __init__(self, launches: _Launches) -> None:
        self._launches = launches

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self._launches.launch(*args, **kwargs)


@contextmanager
def _patched(owner: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    real = getattr(owner, attr)
    setattr(owner, attr, make(real))
    try:
        yield
    finally:
        setattr(owner, attr, real)


def capture(path: Path, inputs: tuple[Any, ...], dsl: str, dump_dir: Path | None = None) -> dict[str, Any]:
    """Import ``path``, call its ``run(*inputs)`` with the DSL's compiler wrapped; the artifacts and launches.

    CuTe DSL reads its environment at import: the caller sets ``cute_env(dump_dir)`` first."""
    import torch

    launches = _Launches(inputs)
    builds: list[dict[str, Any]] = []

    def tirx_compile(real: Callable[..., Any]) -> Callable[..., Any]:
        def compile_(mod: Any, *args: Any, **kwargs: Any) -> _Recorded:
            mod = anonymous(mod)
            executable = real(mod, *args, **kwargs)
            options = repr(args) + repr(sorted(kwargs.items()))
            tir = mod.script() + "\n# compile options " + options
            builds.append({"artifacts": [("tir", tir), *tirx_sources(executable)]})
            return _Recorded(launches)

        return compile_

    def cute_compile(real: Callable[..., Any]) -> Callable[..., Any]:
        def compile_(*args: Any, **kwargs: Any) -> _Recorded:
            real(*args, **kwargs)
            builds.append({"options": repr(sorted(kwargs.items()))})
            return _Recorded(launches)

        return compile_

    if dsl == "tirx":
        import tvm

        owner, attr, wrap = tvm, "compile", tirx_compile
    else:
        import cutlass.cute

        owner, attr, wrap = cutlass.cute, "compile", cute_compile
    before = [launches.describe(x) for x in inputs]
    spec = importlib.util.spec_from_file_location("submission", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    fill = torch.utils.deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    try:
        with _patched(owner, attr, wrap):
            sys.modules["submission"] = module
            spec.loader.exec_module(module)
            returned = module.run(*inputs)
    finally:
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]
        sys.modules.pop("submission", None)
    if dsl == "cutedsl":
        assert dump_dir is not None
        kept = sorted(dump_dir.iterdir(), key=lambda p: p.stat().st_mtime_ns)
        artifacts = [(p.suffix[1:], p.read_text()) for p in kept if p.suffix in (".mlir", ".ptx")]
        builds = [{"artifacts": [("compile options", "\n".join(b["options"] for b in builds)), *artifacts]}]
    return {"builds": builds, "launches": launches.calls, "returned": launches.describe(returned),
            "inputs_before": before, "inputs_after": [launches.describe(x) for x in inputs]}  # fmt: skip


def production_inputs(path: Path) -> tuple[Any, ...]:
    """The inputs (seed 0) of the production workload of the problem the file's number names."""
    from mkbsim.catalog import load_problem, problems_root

    match = NUMBER_RE.match(path.name)
    found = sorted(problems_root().glob(f"*/{match.group(1)}_*.py")) if match else []
    if len(found) != 1:
        raise ValueError(f"{path.name}: names no one problem (NN_<plan>_<dsl>.py)")
    problem = load_problem(found[0])
    return tuple(problem.make_inputs(problem.workload, seed=0))


def _capture_main(path: Path, out: Path) -> None:
    import torch

    torch.set_num_threads(1)
    dsl = "tirx" if path.stem.endswith("_tirx") else "cutedsl"
    dump = os.environ.get("CUTE_DSL_DUMP_DIR")
    out.write_text(json.dumps(capture(path, production_inputs(path), dsl, Path(dump) if dump else None)))


# --- comparison --------------------------------------------------------------------------------------------


def captured(path: Path) -> dict[str, Any]:
    """`capture` of ``path`` at its production workload, in a fresh interpreter (nothing cached between files)."""
    with tempfile.TemporaryDirectory() as tmp:
        out, dump = Path(tmp) / "capture.json", Path(tmp) / "dump"
        dump.mkdir()
        env = {**os.environ, **cute_env(dump)}
        done = subprocess.run([sys.executable, __file__, "--capture", str(path), str(out)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1800)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{path}: building it failed:\n{done.stderr[-3000:]}")
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def differences(measured: dict[str, Any], current: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(what differs, each with the start of a diff; what was compared) between two captures."""
    diffs: list[str] = []
    compared: list[str] = []
    if len(measured["builds"]) != len(current["builds"]):
        diffs.append(f"builds: {len(measured['builds'])} measured, {len(current['builds'])} current")
    for b, (mb, cb) in enumerate(zip(measured["builds"], current["builds"], strict=False)):
        ma, ca = mb["artifacts"], cb["artifacts"]
        if [k for k, _ in ma] != [k for k, _ in ca]:
            diffs.append(f"build {b}: artifacts {[k for k, _ in ma]} measured, {[k for k, _ in ca]} current")
            continue
        for (kind, mt), (_, ct) in zip(ma, ca, strict=True):
            norm = kind in DEFINITIONS
            (mn, renamed), (cn, _) = (normalise(kind, mt), normalise(kind, ct)) if norm else ((mt, 0), (ct, 0))
            renaming = f", {renamed} defined symbols renamed" if norm else ""
            compared.append(f"build {b} {kind}: {len(mn.splitlines())} lines{renaming}")
            if mn != cn:
                diff = list(difflib.unified_diff(mn.splitlines(), cn.splitlines(), "measured", "current", lineterm=""))
                changed = sum(1 for x in diff if x[:1] in "+-") - 2
                diffs.append(f"build {b} {kind}: {changed} lines differ\n" + "\n".join(diff[:40]))
    for key in ("launches", "returned", "inputs_after"):
        compared.append(f"{key}: {len(measured[key]) if isinstance(measured[key], list) else 1}")
        if measured[key] != current[key]:
            m, c = json.dumps(measured[key])[:1500], json.dumps(current[key])[:1500]
            diffs.append(f"{key} differ:\n  measured {m}\n  current  {c}")
    if current["inputs_after"] != current["inputs_before"]:
        diffs.append("run() changed its inputs")  # neither kernel runs here, so only host code could
    if not current["launches"]:
        diffs.append("no kernel launch was recorded (is the compiler called some other way?)")
    return diffs, compared


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def attest_rows(data: dict[str, Any], pairs: list[tuple[Path, Path]], date: str) -> None:
    """Add each current file's SHA-256 to its row's `same_device_code_sha256`, with an `attested` entry."""
    rows = {row["file"]: row for row in data["rows"]}
    for _, current in pairs:
        row = rows[current.name]
        sha = sha256_of(current)
        if sha != row["sha256"] and sha not in row.get("same_device_code_sha256", []):
            row.setdefault("same_device_code_sha256", []).append(sha)
        entry = {"sha256": sha, "against": row["sha256"], "tool": TOOL, "date": date}
        row["attested"] = [a for a in row.get("attested", []) if a["sha256"] != sha] + [entry]


def _pairs(paths: list[Path], data: dict[str, Any]) -> list[tuple[Path, Path]]:
    """The (measured, current) pairs; ValueError on anything that cannot be attested."""
    if not paths or len(paths) % 2:
        raise ValueError("give MEASURED CURRENT pairs")
    rows = {row["file"]: row for row in data["rows"]}
    pairs = list(zip(paths[::2], paths[1::2], strict=True))
    for measured, current in pairs:
        for p in (measured, current):
            if not p.is_file():
                raise ValueError(f"{p}: no such file")
        if measured.name != current.name:
            raise ValueError(f"{measured.name} vs {current.name}: a pair is one solution file, measured and current")
        row = rows.get(current.name)
        if row is None or row.get("sha256") != sha256_of(measured):
            raise ValueError(f"{measured}: not the file the H200 row of {current.name} measured (sha256 differs)")
    return pairs


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--capture":
        _capture_main(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="MEASURED CURRENT [MEASURED CURRENT ...]")
    parser.add_argument("--write", action="store_true", help="record the attestation in h200_measurements.json")
    args = parser.parse_args()
    data = json.loads(DATA.read_text())
    try:
        pairs = _pairs(args.paths, data)
    except ValueError as exc:
        parser.exit(2, f"attest_device_code: {exc}\n")
    failed = 0
    for measured, current in pairs:
        print(f"{current.name}: building both ...", file=sys.stderr, flush=True)
        diffs, compared = differences(captured(measured), captured(current))
        verdict = "different" if diffs else "equal"
        print(f"{current.name}: {verdict} ({'; '.join(compared)})")
        for d in diffs:
            print("  " + d.replace("\n", "\n  "))
        failed += bool(diffs)
    if failed:
        print(f"{failed} of {len(pairs)} pairs differ; nothing written")
        sys.exit(1)
    if args.write:
        sys.path.insert(0, str(Path(__file__).parent))
        from record_h200 import dump

        attest_rows(data, pairs, datetime.now(UTC).date().isoformat())
        DATA.write_text(dump(data))
        print(f"{len(pairs)} rows attested in {DATA.name}; now run benchmarks/kernel_tables.py")


if __name__ == "__main__":
    main()
