"""benchmarks/gpu_pack.py: the DSL wheels in parts that each fit one GPU-machine run, joined and installed there."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_pack.py"


@pytest.fixture(scope="module")
def pack() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_pack", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _wheel(folder: Path, dist: str, payload: bytes = b"") -> Path:
    """A minimal pure-Python wheel of `dist` 1.0 holding module `dist` (and `payload` as incompressible filler)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-1.0-py3-none-any.whl"
    info = f"{dist}-1.0.dist-info"
    files = {
        f"{dist}/__init__.py": f"NAME = {dist!r}\n".encode(),
        f"{dist}/filler.bin": payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/RECORD", record)
    return path


@pytest.fixture()
def wheels(tmp_path: Path) -> Path:
    root = tmp_path / "wheels"
    _wheel(root / "dsl", "fakedsl", random.Random(0).randbytes(40_000))
    _wheel(root / "dsl", "fakedsl_libs", random.Random(1).randbytes(30_000))
    _wheel(root / "deps", "mkbsim_missing_dep")
    _wheel(root / "deps", "pytest")  # present on this machine: the stage keeps the machine's own
    return root


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 12_345])
def test_split_gives_bounded_parts_that_join_back(pack: ModuleType, size: int) -> None:
    data = random.Random(size).randbytes(size)
    parts = pack.split(data, 1000)
    assert b"".join(parts) == data
    assert len(parts) == max(1, -(-size // 1000))
    assert all(len(p) <= 1000 for p in parts)
    with pytest.raises(ValueError, match="positive"):
        pack.split(data, 0)


def test_the_same_wheels_give_the_same_tar(pack: ModuleType, wheels: Path) -> None:
    first = pack.wheel_tar(wheels)
    os.utime(next((wheels / "dsl").iterdir()), (1, 1))  # file times do not leak into the tar
    assert pack.wheel_tar(wheels) == first


def _stage(folder: Path, prefix: Path) -> subprocess.CompletedProcess:
    check = "fakedsl fakedsl_libs mkbsim_missing_dep"
    env = {**os.environ, "DSL_PREFIX": str(prefix), "PYTHON": sys.executable, "DSL_IMPORT_CHECK": check}
    return subprocess.run(["bash", str(folder / "stage.sh")], env=env, capture_output=True, text=True, timeout=120)


def test_parts_staged_in_any_order_install_the_dsl_and_only_missing_dependencies(
    pack: ModuleType, wheels: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert pack.main(["--wheels", str(wheels), "--out", str(out), "--part-mib", str(20_000 / 2**20)]) == 0
    folders = sorted(out.iterdir())
    assert len(folders) >= 4
    assert all((f / "part").stat().st_size <= 20_000 for f in folders)
    prefix = tmp_path / "opt" / "dsl"
    order = folders[:]
    random.Random(2).shuffle(order)
    for folder in order[:-1]:
        staged = _stage(folder, prefix)
        assert staged.returncode == 0, staged.stderr
        assert "still to carry" in staged.stdout
        assert not prefix.exists()
    last = _stage(order[-1], prefix)
    assert last.returncode == 0, last.stderr
    assert "imports ok" in last.stdout and "kept the machine's pytest" in last.stdout
    assert (prefix / "fakedsl" / "__init__.py").is_file() and (prefix / "mkbsim_missing_dep").is_dir()
    assert not (prefix / "pytest").exists()
    assert not Path(f"{prefix}-parts").exists() and not Path(f"{prefix}-unpack").exists()
    # the installed files are the packed ones
    filler = (prefix / "fakedsl" / "filler.bin").read_bytes()
    assert hashlib.sha256(filler).digest() == hashlib.sha256(random.Random(0).randbytes(40_000)).digest()


def test_a_part_damaged_in_transit_is_refused(pack: ModuleType, wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pack.main(["--wheels", str(wheels), "--out", str(out), "--part-mib", str(50_000 / 2**20)])
    first = out / "p1"
    data = bytearray((first / "part").read_bytes())
    data[100] ^= 0xFF
    (first / "part").write_bytes(bytes(data))
    staged = _stage(first, tmp_path / "opt" / "dsl")
    assert staged.returncode == 3
    assert "damaged in transit" in staged.stderr


def test_parts_larger_than_a_run_carries_are_refused(pack: ModuleType, wheels: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as err:
        pack.main(["--wheels", str(wheels), "--out", str(tmp_path / "out"), "--part-mib", "64"])
    assert err.value.code == 2
    with pytest.raises(SystemExit) as err:
        pack.main(["--wheels", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")])
    assert err.value.code == 2
