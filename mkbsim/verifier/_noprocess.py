"""No process starts from a candidate's worker once its file is loaded, however it asks (red team rt11 F2).

Why below Python: the guards' process rule rests on audit events, and ``_posixsubprocess.fork_exec`` (reached as
``subprocess._fork_exec`` of any module that imported ``subprocess``) starts a process raising none; such a child's
CPU is outside the worker's clock, and a forked copy of the worker (``preexec_fn``) shares the block's arena and the
control page. So the worker installs a seccomp filter (classic BPF, built here) once its file is loaded, on every
thread at once (``SECCOMP_FILTER_FLAG_TSYNC``), refusing with EPERM ``fork``, ``vfork``, ``clone`` without
``CLONE_THREAD``, ``execve`` and ``execveat``, and answering ``clone3`` with ENOSYS (its flags are out of a filter's
reach; the C library then falls back to ``clone``, where threads are told from processes). A system call of another
ABI (x32, i386) is refused too: its numbers differ.

When: after the file's import, before its first call. The DSLs' builds need no process then: TVM compiles ``llvm``
in process, TIRx compiles CUDA with NVRTC (``tvm.support.nvcc.compile_cuda``'s default; ``CUDA_PATH`` spares its
``which nvcc``), and the CuTe DSL runs ptxas as a library (libnvptxcompiler, in ``_cutlass_ir``); only a TVM export
(``export_library``: g++) or ``TVM_CUDA_COMPILE_MODE=nvcc`` runs a compiler, which the guards allow inside a build or
export, and which the file may do while it loads. A process still running when the filter is installed is found by
the verifier's census of the worker's processes (the zygote's ``strays``) and refused; one started and ended while the
file loaded is left to the guards' audit-event rules.

The verifier does not believe the worker: it reads the number of seccomp filters of the worker's process from the
kernel (``/proc/PID/status``) when the worker is forked and once it answered its import (``filters``).
"""

from __future__ import annotations

import ctypes
import platform
from typing import Any

from mkbsim._seccomp_bpf import ABIS, ARG0, JEQ, JSET, LD_ABS, head, op, tail

_CLONE_THREAD = 0x00010000


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or None where there is none: a process (``fork``,
    ``vfork``, ``execve``, ``execveat``, ``clone`` without ``CLONE_THREAD``) is refused with EPERM, a thread is not."""
    abi = ABIS.get(machine or platform.machine())
    if abi is None:
        return None
    refused = list(abi.processes.values())
    ops = [
        *head(abi),
        op(JEQ, abi.clone, jt=0, jf=2),
        op(LD_ABS, ARG0),
        op(JSET, _CLONE_THREAD, jt=len(refused), jf=len(refused) + 1),  # a thread: ALLOW; a process: EPERM
        *tail(refused),
    ]
    return b"".join(ops)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _install(*, _prctl: Any, _syscall: Any, _nr: int, _fprog: int, _errno: Any, _str: Any, _keep: Any) -> str | None:
    """Install the filter on every thread of this process; None, or why it could not be. A hook (``_vault``): it runs
    after the submission loaded, with no globals and everything it calls bound before (``_keep``: the program)."""
    if _prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: a filter needs it without CAP_SYS_ADMIN
        return "prctl(PR_SET_NO_NEW_PRIVS) failed, errno " + _str(_errno())
    answer = _syscall(_nr, 1, 1, _fprog)  # SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC
    if answer == 0:
        return None
    if answer > 0:
        return "thread " + _str(answer) + " could not take the filter"
    return "seccomp(SECCOMP_SET_MODE_FILTER) failed, errno " + _str(_errno())


def installer(protect: Any) -> tuple[Any, str | None]:
    """The hook that installs the filter (bound now, before the submission exists), or None and why none can be."""
    code = program()
    abi = ABIS.get(platform.machine())
    if code is None or abi is None:
        return None, f"no process filter for this machine ({platform.machine()})"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl, syscall = libc.prctl, libc.syscall
    except (OSError, AttributeError) as exc:
        return None, f"no C library to install a process filter with ({exc})"
    prctl.restype = syscall.restype = ctypes.c_long
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    syscall.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_void_p]
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _Fprog(len(code) // 8, ctypes.addressof(buffer))
    hook = protect(
        _install, _prctl=prctl, _syscall=syscall, _nr=abi.seccomp, _fprog=ctypes.addressof(fprog),
        _errno=ctypes.get_errno, _str=str, _keep=(fprog, buffer),
    )  # fmt: skip
    return hook, None


def filters(pid: int) -> int | None:
    """How many seccomp filters process ``pid`` runs under, as the kernel says (None: it does not say)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Seccomp_filters:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None
