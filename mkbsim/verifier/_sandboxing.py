"""What the verifier's zygote, and so every worker it forks, sees of the machine (DESIGN §4, §5).

The zygote runs in a bubblewrap sandbox (``mkbsim.sandbox``): new PID, mount, IPC, UTS and network
namespaces, a private ``/tmp``. Started as root, the zygote keeps only the capabilities to change uid and
to end its workers (``Policy.child_uids``) and forks every worker under a fresh unprivileged uid of its
own, with its own folder (0700) and a umask that keeps its other files private: no worker can read, write
or signal another's files or processes, a reference worker's included. Started by an ordinary user, the
sandbox is a user namespace that maps one uid, which all its workers share. Read-only: the interpreter and
its packages, the folders the DSLs and torch are installed in, and of the project only
``mkbsim/__init__.py``, ``mkbsim/_version.py``, ``mkbsim/_seccomp_bpf.py`` (the process filter's parts) and
the verifier's own package (the harness). Writable: one folder of the session's, holding each worker's working
directory; a submission is copied into its worker's directory, a problem's reference (the ``problems`` package) into
the reference worker's for as long as it imports it, and no candidate worker runs meanwhile. Nothing else of the host
exists inside: no ``problems/``, no other checkout, no home directory, no store, so no call whatever (``open``,
``os.rename``, a DSL kernel reading memory at an address) reaches a reference or writes outside the
worker's folder.

``/tmp`` and ``/dev/shm`` are the sandbox's own tmpfs, shared by every worker of the zygote: before a worker
starts, the zygote removes what every finished worker left there (``wipe_tmp``, run under that worker's uid:
a uid of its own, so nothing of another's is touched; where all workers share the sandbox's uid, only while
no other worker lives), so no worker sees what an earlier one left.

Where bubblewrap cannot run, the zygote runs unsandboxed and every result says why
(``env["sandbox"]``); ``MKBSIM_VERIFIER_SANDBOX=0`` asks for that explicitly, ``=1`` makes a missing
sandbox an error. A cuda worker's call memory is staged through a memfd (``_arena``): CUDA IPC handles cannot
be mapped across the sandbox (the H200, 2026-12-01).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import queue
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Top-level packages whose installation folders the zygote must see (found without importing them).
_PACKAGES = ("torch", "numpy", "tvm", "tvm_ffi", "cutlass", "cuda", "nvidia_cutlass_dsl", "triton")
#: Enough tasks for a worker's threads (torch, TVM, the CUDA driver) and the zygote's forks.
MAX_PROCESSES = 512
#: The sandbox's own tmpfs folders, which every worker of a zygote could write in.
SHARED_TMP = ("/tmp", "/dev/shm")
#: In a sandboxed zygote's environment (taken out before any worker starts): its ``SHARED_TMP`` are the
#: sandbox's, never the host's, so it may empty them between workers.
OWN_TMP_ENV = "MKBSIM_VERIFIER_OWN_TMP"


def _install_folders() -> list[Path]:
    """The folders on the import path that hold the packages a worker imports."""
    found = []
    for name in _PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(Path(location).resolve().parent)
        if spec is not None and spec.origin not in (None, "namespace", "built-in"):
            found.append(Path(spec.origin).resolve().parent.parent)
    return list(dict.fromkeys(found))


def shared_namespaces() -> tuple[str, ...]:
    """``MKBSIM_VERIFIER_SANDBOX_SHARE``: namespaces a cuda zygote keeps from the host ("ipc", "pid"), should
    CUDA IPC between the verifier and its workers need them on a machine (benchmarks/gpu_verifier.sh finds out)."""
    value = os.environ.get("MKBSIM_VERIFIER_SANDBOX_SHARE", "")
    return tuple(ns for ns in value.split(",") if ns in ("ipc", "pid"))


def wanted() -> bool | None:
    """``MKBSIM_VERIFIER_SANDBOX``: "0" off, "1" required, unset: when available."""
    value = os.environ.get("MKBSIM_VERIFIER_SANDBOX")
    return None if value in (None, "") else value not in ("0", "false", "no")


@dataclass
class WorkerSandbox:
    """A session's sandbox: the bubblewrap policy of its zygote and the folder its workers write in."""

    policy: object  # mkbsim.sandbox.Policy
    env: dict[str, str]  # the zygote's complete environment
    root: Path
    description: str
    released: threading.Event = field(default_factory=threading.Event)

    def hand_over(self, path: Path, uid: int | None = None) -> None:
        self.policy.hand_over(path, uid)  # type: ignore[attr-defined]

    def worker_uid(self) -> int | None:
        """A fresh uid for the next worker (None where the workers share the sandbox's)."""
        from mkbsim.sandbox import sandbox_uid

        return sandbox_uid() if self.policy.child_uids else None  # type: ignore[attr-defined]

    def spawn(self, command: list[str], **popen: Any) -> subprocess.Popen[Any]:
        """Start ``command`` in the sandbox from a thread of its own that lives until ``release``: bubblewrap's
        ``--die-with-parent`` follows the thread that started it, and a session is used from whichever thread
        (a campaign's attempt threads) happens to verify first."""
        from mkbsim.sandbox import spawn

        started: queue.SimpleQueue[subprocess.Popen[Any] | BaseException] = queue.SimpleQueue()

        def keep() -> None:
            try:
                started.put(spawn(self.policy, command, **popen))  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the caller
                started.put(exc)
                return
            self.released.wait()

        threading.Thread(target=keep, name="verifier-sandbox", daemon=True).start()
        result = started.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def release(self) -> None:
        """The sandboxed process has ended: its keeper thread may end too."""
        self.released.set()


def make_sandbox(env: dict[str, str], device_type: str) -> WorkerSandbox | str:
    """The sandbox of a new zygote, or why there is none."""
    from mkbsim.sandbox import Policy, probe, python_paths

    support = probe()
    if not support.ok:
        return support.describe()
    verifier = Path(__file__).resolve().parent
    root = Path(tempfile.mkdtemp(prefix="mkbsim-verifier-"))
    package = [
        verifier.parent / "__init__.py",
        verifier.parent / "_version.py",
        verifier.parent / "_seccomp_bpf.py",
        verifier,
    ]
    ro = [*python_paths(), *_install_folders(), *package]
    devices: tuple[str, ...] = ()
    if device_type == "cuda":
        devices = tuple(sorted(p for p in glob.glob("/dev/nvidia*") if not os.path.isdir(p)))
        ro += [Path("/sys")]  # the CUDA driver reads the PCI topology there
        ro += [Path(p) for p in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")) if p and os.path.isdir(p)]
    sandbox_env = {**env, "HOME": str(root), "TMPDIR": "/tmp", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                   OWN_TMP_ENV: "1"}  # fmt: skip
    policy = Policy(
        ro=tuple(p for p in dict.fromkeys(ro) if p.exists()), rw=(root,), cwd=root, env=sandbox_env,
        memory_bytes=None, max_processes=MAX_PROCESSES, devices=devices,
        share=shared_namespaces() if device_type == "cuda" else (), child_uids=True,
    )  # fmt: skip
    if policy.child_uids:  # the zygote (root, without CAP_DAC_OVERRIDE) owns it; workers only pass through
        os.chmod(root, 0o711)
    else:
        policy.hand_over(root)
    shared = f", sharing the host's {'/'.join(policy.share)} namespace" if policy.share else ""
    shared += ", a uid of its own for every worker" if policy.child_uids else ""
    return WorkerSandbox(policy, sandbox_env, root, support.describe() + shared)


def tmp_entries() -> set[str]:
    """The paths ``SHARED_TMP`` hold now (the zygote's own, kept when it empties them)."""
    found: set[str] = set()
    for folder in SHARED_TMP:
        with contextlib.suppress(OSError):
            found.update(os.path.join(folder, name) for name in os.listdir(folder))
    return found


def tmp_owners(keep: set[str]) -> set[int]:
    """The uids owning an entry of ``SHARED_TMP`` but ``keep`` (whom a wipe has something to remove for)."""
    owners: set[int] = set()
    for path in tmp_entries() - keep:
        with contextlib.suppress(OSError):
            owners.add(os.lstat(path).st_uid)
    return owners


def wipe_tmp(keep: set[str]) -> None:
    """Remove every entry of ``SHARED_TMP`` but ``keep`` that this process may remove: run under a finished
    worker's uid, what that worker left (a sticky folder lets nobody else's go)."""
    for path in tmp_entries() - keep:
        with contextlib.suppress(OSError):
            if os.path.islink(path) or not os.path.isdir(path):
                os.unlink(path)
            else:
                _empty(path)
                os.rmdir(path)


def _empty(path: str) -> None:
    """Remove what folder ``path`` holds, as far as this process may, however deep: by directory descriptors
    with an explicit stack (no path or recursion grows with the depth, no symbolic link is followed), each
    folder opened to its owner first (a worker may have closed one to itself). Inside the sandbox, where
    ``mkbsim.sandbox.remove_tree`` is not importable and an entry this process may not remove is skipped."""
    os.chmod(path, 0o700)
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    stack: list[tuple[int, list[str]]] = [(top, os.listdir(top))]
    names: list[str] = []  # the entry each deeper level came from, to remove once emptied
    while stack:
        fd, entries = stack[-1]
        if not entries:
            os.close(fd)
            stack.pop()
            if names:
                with contextlib.suppress(OSError):
                    os.rmdir(names.pop(), dir_fd=stack[-1][0])
            continue
        name = entries.pop()
        try:
            if stat.S_ISDIR(os.lstat(name, dir_fd=fd).st_mode):
                os.chmod(name, 0o700, dir_fd=fd)
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                stack.append((child, os.listdir(child)))
                names.append(name)
            else:
                os.unlink(name, dir_fd=fd)
        except OSError:
            continue
