"""What the verifier's zygote, and so every worker it forks, sees of the machine (DESIGN §4, §5).

The zygote runs in a bubblewrap sandbox (``mkbsim.sandbox``): new PID, mount, IPC, UTS and network
namespaces, a private ``/tmp``. Started as root, the zygote keeps only the capabilities to change uid and
to end its workers (``Policy.child_uids``) and forks every worker under a fresh unprivileged uid of its
own, with its own folder (0700) and a umask that keeps its other files private: no worker can read, write
or signal another's files or processes, a reference worker's included. Started by an ordinary user, the
sandbox is a user namespace that maps one uid, which all its workers share. Read-only: the interpreter and
its packages, the folders the DSLs and torch are installed in, and of the project only
``mkbsim/__init__.py``, ``mkbsim/_version.py`` and the verifier's own package (the harness). Writable: one
folder of the session's, holding each worker's working directory; a submission is copied into its worker's
directory, a problem's reference (the ``problems`` package) into the reference worker's for as long as it
imports it, and no candidate worker runs meanwhile. Nothing else of the host exists inside: no
``problems/``, no other checkout, no home directory, no store, so no call whatever (``open``,
``os.rename``, a DSL kernel reading memory at an address) reaches a reference or writes outside the
worker's folder.

Where bubblewrap cannot run, the zygote runs unsandboxed and every result says why
(``env["sandbox"]``); ``MKBSIM_VERIFIER_SANDBOX=0`` asks for that explicitly, ``=1`` makes a missing
sandbox an error. A cuda worker's call memory is staged through a memfd (``_arena``): CUDA IPC handles cannot
be mapped across the sandbox (the H200, 2026-12-01).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import queue
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
    package = [verifier.parent / "__init__.py", verifier.parent / "_version.py", verifier]
    ro = [*python_paths(), *_install_folders(), *package]
    devices: tuple[str, ...] = ()
    if device_type == "cuda":
        devices = tuple(sorted(p for p in glob.glob("/dev/nvidia*") if not os.path.isdir(p)))
        ro += [Path("/sys")]  # the CUDA driver reads the PCI topology there
        ro += [Path(p) for p in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")) if p and os.path.isdir(p)]
    sandbox_env = {**env, "HOME": str(root), "TMPDIR": "/tmp", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
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
