"""Carry both kernel DSLs to a GPU machine that has no package registry, in parts that fit one run each.

    python3 benchmarks/gpu_pack.py                       # download the wheels, write .gpu/dsl/p1 .. pN
    python3 benchmarks/gpu_pack.py --wheels DIR          # pack wheels already downloaded (no network)

Here (a machine with a package index) it downloads, for the GPU machine's Python (3.12, x86-64 Linux):
- the DSL wheels, without their dependencies: apache-tvm and apache-tvm-ffi (TIRx), nvidia-cutlass-dsl
  with its base and core libraries and the CUDA 13 flavour `nvidia-cutlass-dsl-libs-cu13` (CuTe DSL);
- their dependencies (ml_dtypes, protobuf, cuda-bindings, typing-extensions and what those need), each
  installed there only where that machine's python3 lacks the distribution, so its torch keeps its own numpy.

All of it goes into one tar, cut into parts of at most --part-mib MiB (default 56: a run carries at most
64 MiB). Part k is `.gpu/dsl/pk/` (git-ignored) with the bytes and a `stage.sh`. On the GPU machine, one
run per part, in any order, while the machine stays warm (README, "Bringing the DSLs to a GPU machine"):

    carry=[".gpu/dsl/p1"]  command="bash .gpu/dsl/p1/stage.sh"      ... then p2 .. pN

Each stage script copies its part to `$DSL_PREFIX-parts` (DSL_PREFIX defaults to /opt/dsl). The run that
brings the last missing part joins them, checks the SHA-256 of the whole, installs with `pip --target
$DSL_PREFIX --no-index --no-deps`, tries `import tvm, cutlass` and prints the environment every later run
exports:

    export PYTHONPATH=$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages CUDA_PATH=/usr/local/cuda

(`pip --target` does not process .pth files: the second entry is the CuTe DSL package path one would add.)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".gpu" / "dsl"
PART_MIB = 56
TVM_VERSION = "0.27.0.post1"
TVM_FFI_VERSION = "0.1.15.post2"
CUTLASS_DSL_VERSION = "4.8.1"
DSL_WHEELS = (
    f"apache-tvm=={TVM_VERSION}",
    f"apache-tvm-ffi=={TVM_FFI_VERSION}",
    f"nvidia-cutlass-dsl=={CUTLASS_DSL_VERSION}",
    f"nvidia-cutlass-dsl-libs-base=={CUTLASS_DSL_VERSION}",
    f"nvidia-cutlass-dsl-libs-core=={CUTLASS_DSL_VERSION}",
    f"nvidia-cutlass-dsl-libs-cu13=={CUTLASS_DSL_VERSION}",
)
# what the DSL wheels require (their metadata), resolved with their own dependencies
DEPENDENCIES = ("ml_dtypes", "protobuf>=4.21.12", "cuda-bindings>=12.8", "typing-extensions>=4.10")
# the GPU machine: CPython 3.12 on x86-64 Linux
PLATFORMS = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_24", "manylinux_2_17", "manylinux2014")
TARGET = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"]
TARGET += [arg for plat in PLATFORMS for arg in ("--platform", f"{plat}_x86_64")]
STAGE = """\
#!/usr/bin/env bash
# Part {k} of {n} of the DSL wheels (benchmarks/gpu_pack.py). Copies this part next to the others; the run
# that brings the last missing one joins them, checks them and installs into $DSL_PREFIX (default /opt/dsl).
set -euo pipefail
prefix=${{DSL_PREFIX:-/opt/dsl}}
py=${{PYTHON:-python3}}
here=$(cd "$(dirname "$0")" && pwd)
parts="$prefix-parts"
mkdir -p "$parts"
if ! echo "{part_sha}  $here/part" | sha256sum -c --quiet; then
  echo "part {k}: damaged in transit, pack again" >&2; exit 3
fi
cp "$here/part" "$parts/part.{k}"
missing=""
for i in $(seq 1 {n}); do [ -f "$parts/part.$i" ] || missing="$missing $i"; done
if [ -n "$missing" ]; then
  echo "staged part {k} of {n}; still to carry:$missing (while the machine is warm)"
  exit 0
fi
work="$prefix-unpack"
rm -rf "$work" && mkdir -p "$work"
for i in $(seq 1 {n}); do cat "$parts/part.$i"; done > "$work/wheels.tar"
if ! echo "{total_sha}  $work/wheels.tar" | sha256sum -c --quiet; then
  echo "the joined parts do not match: pack again" >&2; exit 3
fi
tar xf "$work/wheels.tar" -C "$work"
rm -rf "$prefix" && mkdir -p "$prefix"
install=("$work"/wheels/dsl/*.whl)
for whl in "$work"/wheels/deps/*.whl; do
  [ -e "$whl" ] || continue
  dist=$(basename "$whl" | cut -d- -f1)
  if "$py" -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$dist" 2>/dev/null; then
    echo "kept the machine's $dist"
  else
    install+=("$whl")
  fi
done
"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$prefix" "${{install[@]}}"
rm -rf "$work" "$parts"
export PYTHONPATH="$prefix:$prefix/nvidia_cutlass_dsl/dsl_packages${{PYTHONPATH:+:$PYTHONPATH}}"
echo "installed ${{#install[@]}} of {n_wheels} wheels into $prefix"
check=${{DSL_IMPORT_CHECK-tvm cutlass}}  # modules to import once installed (empty: none)
if [ -n "$check" ]; then
  "$py" -c "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]" $check
  echo "imports ok: $check"
fi
echo "every later run: export PYTHONPATH=\\$PWD:$prefix:$prefix/nvidia_cutlass_dsl/dsl_packages \\
  CUDA_PATH=/usr/local/cuda"
"""


def download(dest: Path) -> None:
    """The DSL wheels (no dependencies) into dest/dsl, their dependencies into dest/deps."""
    pip = [sys.executable, "-m", "pip", "download", "-q", *TARGET]
    print("downloading the DSL wheels and their dependencies ...", file=sys.stderr)
    subprocess.run([*pip, "--no-deps", "-d", str(dest / "dsl"), *DSL_WHEELS], check=True)
    subprocess.run([*pip, "-d", str(dest / "deps"), *DEPENDENCIES], check=True)


def wheel_tar(wheels: Path) -> bytes:
    """A tar of wheels/dsl/*.whl and wheels/deps/*.whl (sorted, fixed metadata: the same wheels give the same bytes)."""
    dsl = sorted((wheels / "dsl").glob("*.whl"))
    if not dsl:
        raise SystemExit(f"{wheels}/dsl holds no wheels")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in dsl + sorted((wheels / "deps").glob("*.whl")):
            info = tarfile.TarInfo(f"wheels/{path.parent.name}/{path.name}")
            info.size, info.mode = path.stat().st_size, 0o644
            with path.open("rb") as f:
                tar.addfile(info, f)
    return buffer.getvalue()


def split(data: bytes, part_bytes: int) -> list[bytes]:
    """Consecutive slices of at most part_bytes (at least one part)."""
    if part_bytes <= 0:
        raise ValueError(f"part size must be positive, got {part_bytes}")
    return [data[i : i + part_bytes] for i in range(0, max(len(data), 1), part_bytes)]


def write_parts(data: bytes, out: Path, part_bytes: int, n_wheels: int) -> list[Path]:
    """out/p1 .. out/pN, each with `part` and `stage.sh`; returns the part folders."""
    parts = split(data, part_bytes)
    total_sha = hashlib.sha256(data).hexdigest()
    if out.exists():
        shutil.rmtree(out)
    folders = []
    for k, chunk in enumerate(parts, start=1):
        folder = out / f"p{k}"
        folder.mkdir(parents=True)
        (folder / "part").write_bytes(chunk)
        stage = STAGE.format(
            k=k, n=len(parts), part_sha=hashlib.sha256(chunk).hexdigest(), total_sha=total_sha, n_wheels=n_wheels
        )
        (folder / "stage.sh").write_text(stage)
        (folder / "stage.sh").chmod(0o755)
        folders.append(folder)
    return folders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, help="pack DIR/dsl/*.whl and DIR/deps/*.whl instead of downloading")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the parts go (default {OUT.relative_to(ROOT)})")
    parser.add_argument("--part-mib", type=float, default=PART_MIB, help="largest part in MiB (default %(default)s)")
    args = parser.parse_args(argv)
    if args.part_mib <= 0 or args.part_mib > 63:
        parser.error("--part-mib must be in (0, 63]: a run carries at most 64 MiB")
    with tempfile.TemporaryDirectory() as tmp:
        wheels = args.wheels
        if wheels is None:
            wheels = Path(tmp)
            download(wheels)
        elif not (wheels / "dsl").is_dir():
            parser.error(f"--wheels {wheels}: expected {wheels}/dsl/*.whl (and optionally {wheels}/deps/*.whl)")
        n_wheels = len(list(wheels.glob("*/*.whl")))
        data = wheel_tar(wheels)
        folders = write_parts(data, args.out, int(args.part_mib * 2**20), n_wheels)
    print(f"{n_wheels} wheels, {len(data) / 2**20:.1f} MiB in {len(folders)} parts under {args.out}")
    print("on the GPU machine, one run per part, back to back (any order):")
    for folder in folders:
        rel = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
        print(f'  carry=["{rel}"]  command={shlex.quote(f"bash {rel}/stage.sh")}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
