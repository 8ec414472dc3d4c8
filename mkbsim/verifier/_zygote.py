"""The zygote: a process that imports torch and the DSLs once, then forks a fresh worker for every
submission (a fork server). Forking it costs tens of milliseconds where importing the DSLs costs
seconds. It never runs submission code itself and holds nothing secret: it is started with a
scrubbed environment and knows neither seeds nor references.

Run as ``python -m mkbsim.verifier._zygote CONTROL_FD PRELOAD``; it answers requests on the control
socket: ``spawn`` (with the worker's socket attached) → ``{"pid"}``, ``status`` → the exit status
of a finished worker, ``exit``.
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
    from mkbsim.verifier import _worker

    ctrl.send(
        {
            "ready": True,
            "preload_s": time.perf_counter() - t0,
            "errors": errors,
            "pid": os.getpid(),
            "cuda_initialized": _cuda_initialized(),
        }
    )
    children: set[int] = set()
    while True:
        try:
            msg, fds = ctrl.recv()
        except ChannelClosed:
            break
        op = msg.get("op")
        if op == "spawn":
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    ctrl.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _worker.serve(fds[0])
                except BaseException:
                    traceback.print_exc()
                    code = 70
                finally:
                    os._exit(code)
            os.close(fds[0])
            children.add(pid)
            ctrl.send({"pid": pid})
        elif op == "status":
            pid = msg["pid"]
            if pid in children:
                _, status = os.waitpid(pid, 0)
                children.discard(pid)
                ctrl.send(_decode_status(status))
            else:
                ctrl.send({"signal": None, "exit_code": None})
        elif op == "exit":
            break
    for pid in children:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv)
