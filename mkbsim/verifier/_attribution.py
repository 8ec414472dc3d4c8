"""Which code is library code and which is the submission's: computed once, before the submission is
loaded, as plain immutable data that the guards' vault copies (DESIGN §5).

Library code: site-packages, the harness, the DSLs' and torch's installation folders, the files pip
installed into any other folder on the import path (a ``--target`` folder on PYTHONPATH, which may
shadow site-packages), and every module imported before the submission. Anything else the submission
imports, or loads from its own folder, is its own. The standard library is transparent: its frames are
looked past, to whoever called it. Paths are compared once resolved, so a symbolic link changes nothing.
"""

from __future__ import annotations

import csv
import glob
import importlib.util
import os
import site
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass


def _package_roots(names: Iterable[str]) -> list[str]:
    """The folders holding these top-level packages, found without importing them (a DSL left out of
    the zygote must still count as library code when the submission imports it later)."""
    roots = []
    for name in names:
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None)
        if not path:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            path = spec.origin if spec is not None and spec.origin not in (None, "namespace") else None
        if path:
            roots.append(os.path.dirname(os.path.dirname(os.path.abspath(path))))
    return roots


def writable_prefixes() -> tuple[str, ...]:
    """The folders a submission may write in (resolved, each ending in a separator)."""
    return tuple({os.path.realpath(p) + os.sep for p in (tempfile.gettempdir(), "/tmp", "/dev/shm")})


def _loaded_modules(outside: str) -> tuple[list[str], list[str]]:
    """Where the top-level modules already imported live, as real paths: (package folders, single-file
    modules), leaving out any in the folder ``outside`` or holding it."""
    folders, files = [], []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if "." not in name and name != "__main__" else None
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        real = os.path.realpath(path)
        if os.path.basename(real) == "__init__.py":
            folder = os.path.dirname(real) + os.sep
            if not (outside.startswith(folder) or folder.startswith(outside)):
                folders.append(folder)
        elif not real.startswith(outside):
            files.append(real)
    return folders, files


def _installed_files(folder: str) -> list[str]:
    """The Python files pip installed into ``folder`` (each distribution's RECORD), as real paths; only
    entries inside the folder count (a RECORD naming files elsewhere is not pip's)."""
    files = []
    for record in glob.glob(os.path.join(glob.escape(folder), "*.dist-info", "RECORD")):
        with open(record, newline="") as rows:
            for row in csv.reader(rows):
                real = os.path.realpath(os.path.join(folder, row[0])) if row and row[0].endswith(".py") else ""
                if real.startswith(folder) and not os.path.isabs(row[0]):
                    files.append(real)
    return files


@dataclass(frozen=True)
class AttributionConfig:
    candidate: frozenset[str]  # the submission's file, as named and resolved
    trusted: tuple[str, ...]  # library folders, longest first, each ending in a separator
    trusted_files: frozenset[str]
    stdlib: tuple[str, ...]
    writable: tuple[str, ...]
    off_limits: tuple[str, ...]
    cwd: str


def attribution_config(harness_dir: str, candidate_file: str, off_limits: Iterable[str]) -> AttributionConfig:
    trusted = [*site.getsitepackages(), site.getusersitepackages()]
    paths = sysconfig.get_paths()
    trusted += [paths["purelib"], paths["platlib"], harness_dir]
    trusted += _package_roots(("torch", "numpy", "tvm", "tvm_ffi", "cutlass", "cuda", "nvidia_cutlass_dsl"))
    stdlib = tuple({os.path.realpath(p) + os.sep for p in (paths["stdlib"], paths["platstdlib"]) if p})
    candidate = os.path.realpath(candidate_file)
    folders, files = _loaded_modules(os.path.dirname(candidate) + os.sep)
    trusted += [folder for folder in folders if not folder.startswith(stdlib)]
    trusted_real = tuple(sorted({os.path.realpath(p) + os.sep for p in trusted if p}, key=len, reverse=True))
    # other installation folders (pip --target): exactly the files pip put there; never a folder the
    # submission could have written a RECORD into (its own, or one under the temporary directory)
    untrusted = (os.path.dirname(candidate) + os.sep, *writable_prefixes())
    for entry in sys.path:
        folder = os.path.realpath(entry or os.curdir) + os.sep
        skip = folder.startswith((*trusted_real, *stdlib, *untrusted)) or untrusted[0].startswith(folder)
        if os.path.isdir(folder) and not skip:
            files += _installed_files(folder)
    return AttributionConfig(
        candidate=frozenset((candidate_file, os.path.abspath(candidate_file), candidate)),
        trusted=trusted_real,
        trusted_files=frozenset(f for f in files if not f.startswith(stdlib)),
        stdlib=stdlib,
        writable=(*writable_prefixes(), "/dev/null"),
        off_limits=tuple(os.path.abspath(p) + os.sep for p in off_limits),
        cwd=os.getcwd(),
    )
