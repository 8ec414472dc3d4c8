"""Stores in trouble for the CLI's fault tests: a transfer campaign to report on, damaged pages, and a
process that sees a file or folder read-only, or a disk that fills up (a private mount namespace).

A read-only file or folder is made by the file system, not by permission bits (which root ignores): a
read-only bind mount, or a small tmpfs for a full disk, in a mount namespace of the command alone
(``unshare``; a user namespace where the tests do not run as root). Where no namespace can be made, the
tests that need one are skipped with the reason.
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from metrics.transfer_kit import interleave, random_campaign

from mkbsim.events import EventStore
from mkbsim.lab import Lab

ROOT = Path(__file__).parents[2]
PAGE = 4096


def campaign_store(path: Path, *, seed: int = 3, with_projections: bool = True) -> Path:
    """A store holding a transfer campaign (every complication pairing handles), projections built."""
    with EventStore(path, create=True) as store:
        store.append(list(interleave(random.Random(seed), random_campaign(seed, models=2, problems=6))))
    if with_projections:
        Lab(path).close()
    checkpoint(path)
    return path


def checkpoint(path: Path) -> None:
    """Fold the write-ahead log into the file and remove it (as the last writer closing does)."""
    with EventStore(path) as store:
        store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.connection.execute("PRAGMA journal_mode = DELETE")
        store.connection.execute("PRAGMA journal_mode = WAL")
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def damage_events(path: Path) -> None:
    """Overwrite some leaf pages of the `events` table and of its type index with noise; the projections'
    pages stay intact."""
    with EventStore(path) as store:
        pages = {
            name: [r[0] for r in store.connection.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", (name,))]
            for name in ("events", "events_by_type")
        }  # fmt: skip
    checkpoint(path)
    rng = random.Random(0)
    with path.open("r+b") as f:
        for leaves in pages.values():
            for page in leaves[len(leaves) // 3 : len(leaves) // 3 + 3]:
                f.seek((page - 1) * PAGE)
                f.write(rng.randbytes(PAGE))


def namespace_prefix() -> list[str]:
    """A command prefix giving the command its own mount namespace, or a skip where none can be made."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a private mount namespace")
    prefix = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.strip()}")
    return prefix


def mkbsim_in_namespace(setup: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m mkbsim ARGV`` after the shell commands ``setup`` (mounts) in a private mount namespace."""
    command = f"{setup} && exec {shlex.join([sys.executable, '-m', 'mkbsim', *argv])}"
    return subprocess.run([*namespace_prefix(), "sh", "-c", command], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)  # fmt: skip


def readonly_mount(path: Path) -> str:
    """Shell commands making ``path`` (a file or a folder) read-only in the namespace."""
    quoted = shlex.quote(str(path))
    return f"mount --bind {quoted} {quoted} && mount -o remount,bind,ro {quoted}"


def tmpfs_mount(folder: Path, kib: int) -> str:
    quoted = shlex.quote(str(folder))
    return f"mount -t tmpfs -o size={kib}k tmpfs {quoted}"
