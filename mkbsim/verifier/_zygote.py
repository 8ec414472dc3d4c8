"""The zygote: a process that imports torch and the DSLs once, then forks a fresh worker for every
submission (a fork server). Forking it costs tens of milliseconds where importing the DSLs costs
seconds. It never runs submission code itself and holds nothing secret: it is started with a
scrubbed environment and knows neither seeds nor references.

Run as ``python -m mkbsim.verifier._zygote CONTROL_FD PRELOAD``; it answers requests on the control
socket: ``spawn`` (with the worker's socket attached) → ``{"pid"}``, ``status`` → the exit status
of a finished worker, ``strays`` → the processes a live worker's submission left running (killed as they are
listed: DESIGN §5, background work), ``exit``.

Each worker is forked under the uid the verifier names in ``spawn`` (a fresh one per worker, where the
sandbox runs as root: ``_sandboxing``), with a umask keeping its files to itself.

Nothing a worker started outlives it: the zygote is its workers' *child subreaper*, so a process a
submission detached (a new session, a double fork) is re-parented to the zygote when its parent dies,
and every such orphan is killed before the next worker starts and when a worker's status is asked
(otherwise it would wait, in the workers' uid and namespaces, for the next reference to be copied in).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import sys
import time
import traceback
from typing import Any


def _decode_status(status: int) -> dict[str, Any]:
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status), "exit_code": None}
    return {"signal": None, "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}


def _cuda_initialized() -> bool:
    """Whether a preloaded library initialised the CUDA driver: a forked child could not use it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return True
    try:
        from cuda.bindings import driver

        err, _ = driver.cuCtxGetCurrent()
        return bool(err != driver.CUresult.CUDA_ERROR_NOT_INITIALIZED)
    except Exception:  # no driver or no bindings: nothing can have been initialised
        return False


def _become(uid: int | None) -> None:
    """A new worker: its own uid (every capability goes with the change) and private files."""
    os.umask(0o077)
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)


def _become_subreaper() -> bool:
    """PR_SET_CHILD_SUBREAPER (Linux): orphans of this process's descendants become its children."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(36, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parents(zombies: bool = True) -> dict[int, int]:
    """Every visible process's parent (read from /proc: no library keeps count of orphans); ``zombies``: those
    that ended but were not yet waited for too."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if zombies or fields[0] != b"Z":
            found[int(name)] = int(fields[1])
    return found


def _children() -> set[int]:
    """The processes whose parent is this one."""
    me = os.getpid()
    return {pid for pid, parent in _parents().items() if parent == me}


def _strays(worker: int, workers: set[int]) -> list[int]:
    """Every process the submission of live worker ``worker`` left running: the worker's descendants, and the
    orphans this subreaper inherited (whoever started them: only workers run here) with theirs. Processes that
    ended (zombies) do no work."""
    parents = _parents(zombies=False)
    me = os.getpid()
    roots = {worker} | {pid for pid, parent in parents.items() if parent == me and pid not in workers}
    found: list[int] = [pid for pid in roots if pid != worker]
    pending = list(roots)
    while pending:
        pid = pending.pop()
        for child in (c for c, parent in parents.items() if parent == pid):
            found.append(child)
            pending.append(child)
    return found


def _describe_and_kill(pids: list[int]) -> list[str]:
    """What each stray runs (its command line, as it shows it), then SIGKILL for each."""
    described = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            command = ""
        described.append(f"process {pid} ({command[:120] or 'no command line'})")
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return described


def _kill_orphans(workers: set[int]) -> None:
    """Kill and reap every child that is not a live worker, until none is left (a dying orphan's own
    children are re-parented here in turn)."""
    for _ in range(100):
        orphans = _children() - workers
        if not orphans:
            return
        for pid in orphans:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in orphans:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)


def _wipe_tmp(finished: set[int | None], keep: set[str], others_live: bool) -> set[int | None]:
    """Remove what the ``finished`` workers left in the sandbox's /tmp and /dev/shm, each in a child under the
    worker's uid (its files only); the shared uid (None) only while no worker lives, whose files it would be
    too. The uids still to wipe. A worker that left nothing costs no child (a fork of the zygote: ~70 ms)."""
    from mkbsim.verifier._sandboxing import tmp_owners, wipe_tmp

    left: set[int | None] = set()
    owners = tmp_owners(keep) if finished else set()
    for uid in finished:
        if uid is None and others_live:
            left.add(uid)
            continue
        if (os.getuid() if uid is None else uid) not in owners:
            continue
        pid = os.fork()
        if pid == 0:
            try:
                _become(uid)
                wipe_tmp(keep)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    return left


def main(argv: list[str]) -> None:
    from mkbsim.verifier._channel import Channel, ChannelClosed

    ctrl = Channel(socket.socket(fileno=int(argv[1])))
    preload = [m for m in argv[2].split(",") if m]
    t0 = time.perf_counter()
    errors = {}
    for name in ["mkbsim.verifier._worker", *preload]:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing optional DSL only slows its submissions down
            errors[name] = f"{type(exc).__name__}: {exc}"
    from mkbsim.verifier import _guards, _sandboxing, _warm_launch, _worker

    try:  # before the guards: every worker's vault runs it on cpu (``_warm_launch``)
        _warm_launch.prepare()
    except Exception as exc:
        errors["mkbsim.verifier._warm_launch"] = f"{type(exc).__name__}: {exc}"
    _guards.remember_preloaded()
    # the sandbox's own /tmp and /dev/shm (never the host's): what the zygote holds there now is kept
    own_tmp = os.environ.pop(_sandboxing.OWN_TMP_ENV, None) == "1"
    keep = _sandboxing.tmp_entries() if own_tmp else set()
    uids: dict[int, int | None] = {}  # the live workers' uids
    finished: set[int | None] = set()  # the uids of finished workers whose files may lie in /tmp, /dev/shm

    ctrl.send(
        {
            "ready": True,
            "preload_s": time.perf_counter() - t0,
            "errors": errors,
            "warm_launch": _warm_launch.warmer() is not None,
            "pid": os.getpid(),
            "cuda_initialized": _cuda_initialized(),
        }
    )
    children: set[int] = set()
    subreaper = _become_subreaper()
    while True:
        try:
            msg, fds = ctrl.recv()
        except ChannelClosed:
            break
        op = msg.get("op")
        if op == "spawn":
            if subreaper:
                _kill_orphans(children)
            if own_tmp:
                finished = _wipe_tmp(finished, keep, others_live=bool(children))
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    ctrl.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _become(msg.get("uid"))
                    _worker.serve(fds[0])
                except BaseException:
                    traceback.print_exc()
                    code = 70
                finally:
                    os._exit(code)
            os.close(fds[0])
            children.add(pid)
            uids[pid] = msg.get("uid")
            ctrl.send({"pid": pid})
        elif op == "status":
            pid = msg["pid"]
            if pid in children:
                _, status = os.waitpid(pid, 0)
                children.discard(pid)
                finished.add(uids.pop(pid, None))
                if subreaper:
                    _kill_orphans(children)
                ctrl.send(_decode_status(status))
            else:
                ctrl.send({"signal": None, "exit_code": None})
        elif op == "strays":
            pid = msg["pid"]
            strays = _strays(pid, children) if pid in children else []
            found = _describe_and_kill(strays)
            if subreaper and strays:
                _kill_orphans(children)
            ctrl.send({"strays": found})
        elif op == "exit":
            break
    for pid in children:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    if subreaper:
        _kill_orphans(set())


if __name__ == "__main__":
    main(sys.argv)
