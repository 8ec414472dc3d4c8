"""The verifier's side of the process isolation: starting the zygote, forking workers from it,
talking to them under deadlines and a memory watchdog, and killing them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkbsim.sandbox import read_tail, remove_tree
from mkbsim.verifier import _schema
from mkbsim.verifier._allocator import MALLOC_TUNABLES
from mkbsim.verifier._channel import CHANNEL_LOST, Channel, ChannelClosed, ChannelTimeout, UntrustedMessage
from mkbsim.verifier._noprocess import filters
from mkbsim.verifier._sandboxing import WorkerSandbox, make_sandbox
from mkbsim.verifier._trusted import ProcessClock, ThreadClock, Trusted

#: The only variables of the verifier's environment a worker gets, by exact name (DESIGN §4, §5): what
#: torch, the CUDA driver, TVM and the CuTe DSL need to find their libraries and the GPU this slot may use.
#: No prefix: ``mkbsim run`` loads a campaign's ``.env`` into its environment (``NVIDIA_API_KEY``, ...).
WORKER_ENV_NAMES = frozenset((
    "PATH", "HOME", "LANG", "LC_ALL", "LD_LIBRARY_PATH",
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    "TVM_HOME", "TVM_LIBRARY_PATH", "CUTE_DSL_ARCH",
))  # fmt: skip
#: A name holding one of these never reaches a worker, even if allow-listed.
_CREDENTIAL_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE")
_WATCH_INTERVAL_S = 0.05
#: How many of a call's time limits the gate vault's work on a watched call may extend the wait to (``wait``): a
#: production draw's checks on cpu took 30-90 s of a loaded 2-core VM (red team rt23's honest ``fp4``, p28).
VAULT_GRACE = 10
_EXIT_GRACE_S = 1.0


class WorkerFailed(Exception):
    """The worker stopped answering: ``kind`` is timeout, memory, crash or protocol."""

    def __init__(self, kind: str, message: str, status: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status or {}


def looks_like_credential(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _CREDENTIAL_WORDS)


def worker_env(cpu_threads: int, source: Mapping[str, str] = os.environ, device_type: str = "cpu") -> dict[str, str]:
    """The complete environment of the zygote and its workers: ``source``'s allow-listed variables that do not
    look like credentials, plus the verifier's own settings (import path, thread counts; on the cpu, glibc's malloc
    filling every block it hands out: ``_allocator.MALLOC_TUNABLES``)."""
    env = {k: v for k, v in source.items() if k in WORKER_ENV_NAMES and not looks_like_credential(k)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["PYTHONNOUSERSITE"] = "1"
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = env["TVM_NUM_THREADS"] = str(cpu_threads)
    if device_type == "cpu":
        env["GLIBC_TUNABLES"] = MALLOC_TUNABLES
    return env


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _exited(pid: int) -> bool:
    """Whether ``pid`` has finished (gone, or a zombie waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _exiting(pid: int) -> bool:
    """Whether ``pid`` has finished or is on its way out (the kernel's ``PF_EXITING``: closing its descriptors,
    which can take a while for a CUDA process, is part of its exit)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0] in ("Z", "X") or bool(int(fields[6]) & 0x4)
    except (OSError, IndexError, ValueError):
        return True


class Zygote:
    """A running zygote (see `mkbsim.verifier._zygote`)."""

    def __init__(
        self, preload: list[str], cpu_threads: int, device_type: str = "cpu", sandbox: bool | None = None
    ) -> None:
        """Start the zygote; ``sandbox``: True requires bubblewrap, False runs without, None uses it where it runs."""
        ours, theirs = socket.socketpair()
        # Kept open for the zygote's lifetime (its stdout and stderr); closed in close().
        self.log = tempfile.NamedTemporaryFile(prefix="mkbsim-zygote-", suffix=".log", delete=False)  # noqa: SIM115
        command = [sys.executable, "-m", "mkbsim.verifier._zygote", str(theirs.fileno()), ",".join(preload)]
        io: dict[str, Any] = {
            "pass_fds": [theirs.fileno()],
            "stdin": subprocess.DEVNULL,
            "stdout": self.log,
            "stderr": self.log,
        }
        env = worker_env(cpu_threads, device_type=device_type)
        made: WorkerSandbox | str = make_sandbox(env, device_type) if sandbox is not False else "switched off"
        if isinstance(made, str) and sandbox:
            raise RuntimeError(f"the verifier's sandbox cannot run here: {made}")
        self.box: WorkerSandbox | None = None if isinstance(made, str) else made
        self.sandbox = made.description if self.box is not None else f"none ({made})"  # type: ignore[union-attr]
        #: the names (never the values) of the environment the workers got, for the result's ``env``
        self.env_names = sorted(self.box.env if self.box is not None else env)
        if self.box is not None:
            self.proc = self.box.spawn(command, **io)
        else:
            self.proc = subprocess.Popen(command, env=env, start_new_session=True, **io)
        theirs.close()
        self.ctrl = Channel(ours)
        try:
            self.ready, _ = self.ctrl.recv(timeout=600)
        except (ChannelClosed, ChannelTimeout) as exc:
            self.close()
            raise RuntimeError(f"the verifier's zygote did not start; see {self.log.name}") from exc

    def alive(self) -> bool:
        return self.proc.poll() is None

    def confinement(self) -> dict[str, Any]:
        """How the workers are confined, for a result's ``env``: the sandbox and their environment's names."""
        return {"sandbox": self.sandbox, "worker_env": self.env_names}

    def workdir(self, prefix: str, uid: int | None = None) -> Path:
        """A new folder a worker (of uid ``uid``, where each has its own) can write in (inside the sandbox's
        folder when there is one)."""
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=self.box.root if self.box is not None else None))
        if self.box is not None:
            self.box.hand_over(folder, uid)
        return folder

    def spawn(self) -> WorkerHandle:
        ours, theirs = socket.socketpair()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        log_offset = self.log_size()
        uid = self.box.worker_uid() if self.box is not None else None
        self.ctrl.send({"op": "spawn", "uid": uid}, fds=[theirs.fileno()])
        theirs.close()
        spawned, _ = self.ctrl.recv(timeout=60)
        chan = Channel(ours)
        # the worker's pid as the kernel translates it into this process's PID namespace; the zygote knows
        # it by its pid in the sandbox's namespace, which is what its exit status is asked by
        pid = chan.recv_credentials(timeout=60)
        return WorkerHandle(self, pid, chan, self.workdir("worker-", uid), int(spawned["pid"]), log_offset, uid)

    def status(self, zygote_pid: int) -> dict[str, Any]:
        """How a finished worker ended (asked by its pid in the zygote's namespace); when the zygote itself
        is gone, how it ended."""
        try:
            self.ctrl.send({"op": "status", "pid": zygote_pid})
            reply, _ = self.ctrl.recv(timeout=60)
        except (ChannelClosed, ChannelTimeout, OSError):
            return {"zygote_exit_code": self.proc.poll()}
        return dict(reply)

    def strays(self, zygote_pid: int) -> list[str]:
        """The processes a live worker's submission left running, killed as they are listed (see the zygote)."""
        try:
            self.ctrl.send({"op": "strays", "pid": zygote_pid})
            reply, _ = self.ctrl.recv(timeout=60)
        except (ChannelClosed, ChannelTimeout, OSError):
            return []  # the zygote is gone: so is every process it held (a worker's death is judged where it shows)
        return [str(s) for s in reply.get("strays") or []]

    def log_size(self) -> int:
        try:
            return os.path.getsize(self.log.name)
        except OSError:
            return 0

    def log_since(self, offset: int, n: int = 1500) -> str:
        """The zygote's stdout and stderr written since ``offset`` (a forked worker's own until it redirects
        them, a traceback of its death included), its last ``n`` characters."""
        try:
            with open(self.log.name, "rb") as f:
                f.seek(max(offset, os.path.getsize(self.log.name) - n))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        with contextlib.suppress(ChannelClosed, OSError):
            self.ctrl.send({"op": "exit"})
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            if self.box is not None:
                from mkbsim.sandbox import kill

                kill(self.proc)
            else:
                self.proc.kill()
                self.proc.wait()
        self.ctrl.close()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)
        if self.box is not None:
            self.box.release()
            with contextlib.suppress(OSError):
                remove_tree(self.box.root)  # however deep a submission nested its folders


@dataclass(frozen=True)
class Exchange:
    """One answer with the verifier's own measures of it (``_trusted``)."""

    reply: dict[str, Any]
    trusted: Trusted


class WorkerHandle:
    """One worker process; every answer is decoded as untrusted plain data."""

    def __init__(
        self, zygote: Zygote, pid: int, chan: Channel, workdir: Path, zygote_pid: int, log_offset: int = 0,
        uid: int | None = None,
    ) -> None:  # fmt: skip
        self.zygote = zygote
        self.pid = pid
        self.zygote_pid = zygote_pid
        self.log_offset = log_offset
        self.chan = chan
        self.workdir = str(workdir)
        self.uid = uid  # its own, where each worker has one (a sandbox started as root)
        self.memory_bytes = 0
        self.closed = False
        self.clock = ProcessClock(pid)
        self.thread_clock = ThreadClock(pid, pid)  # its main thread, which runs the calls
        # the kernel's count of its seccomp filters as forked, before it runs any setup (``_noprocess``)
        self.filters_at_spawn = filters(pid)
        self._last_cpu: int | None = None
        self._last_t: float | None = None
        self._sent: tuple[float, int | None] | None = None
        self.answer_key: tuple[bytes, Callable[[], int]] | None = None  # its answers' key and the call's nonce

    def sign_answers(self, key: bytes, nonce: Callable[[], int]) -> None:
        """Accept only answers signed with ``key`` for the call ``nonce()`` names (``_channel``)."""
        self.answer_key = (key, nonce)

    def send(self, msg: dict[str, Any], fds: list[int] | None = None) -> None:
        """Send a call, taking the verifier's measures at the moment it leaves."""
        cpu = self.clock.cpu_ns()
        self._sent = (time.perf_counter(), cpu)
        try:
            self.chan.send(msg, fds or [])
        except ChannelClosed:
            raise self._died() from None

    def answer(self, timeout: float, progress: Callable[[], tuple[int, int]] | None = None) -> Exchange:
        """Wait for the answer to the call (or block) just sent, with the verifier's measures of it."""
        assert self._sent is not None
        t0, cpu0 = self._sent
        reply = self.wait(timeout, progress)
        round_trip_ms = (time.perf_counter() - t0) * 1e3
        cpu1 = self.clock.cpu_ns()
        both = cpu0 is not None and cpu1 is not None
        idle = (cpu0 - self._last_cpu) / 1e6 if cpu0 is not None and self._last_cpu is not None else None
        waited = (t0 - self._last_t) * 1e3 if self._last_t is not None else None
        self._last_cpu, self._last_t = cpu1, time.perf_counter()
        cpu_ms = (cpu1 - cpu0) / 1e6 if both else None  # type: ignore[operator]
        return Exchange(reply, Trusted(round_trip_ms, cpu_ms, idle, waited))

    def request(self, msg: dict[str, Any], fds: list[int] | None = None, *, timeout: float) -> Exchange:
        """Send ``msg`` and wait for the answer, measured by the verifier's own clocks."""
        self.send(msg, fds)
        return self.answer(timeout)

    def wait(self, timeout: float, progress: Callable[[], tuple[int, int]] | None = None) -> dict[str, Any]:
        """The next answer; ``timeout`` runs from the last change of ``progress``: (a block's calls started, the gate
        vault's work on watched calls, ``ControlPage.progress``). The vault's work restarts it within
        ``VAULT_GRACE`` timeouts of the call's start only: the submission decides how much work it hands the vault
        (launches, their arguments), so the vault's work cannot keep a call alive for ever."""
        now = time.monotonic()
        deadline, ceiling = now + timeout, now + timeout * VAULT_GRACE
        seen = progress() if progress is not None else (0, 0)
        while not self.chan.wait_readable(_WATCH_INTERVAL_S):
            latest = progress() if progress is not None else seen
            if latest != seen:
                now = time.monotonic()
                if latest[0] != seen[0]:  # a call started
                    ceiling = now + timeout * VAULT_GRACE
                deadline = min(now + timeout, ceiling)
                seen = latest
            if self.memory_bytes and _rss_bytes(self.pid) > self.memory_bytes:
                self.kill()
                raise WorkerFailed("memory", f"resident memory exceeded {self.memory_bytes >> 20} MiB")
            if time.monotonic() > deadline:
                self.kill()
                if deadline >= ceiling:
                    raise WorkerFailed("timeout", f"no answer within {timeout * VAULT_GRACE:g} s of a call's start "
                                       f"(the verifier's checks of it included)")  # fmt: skip
                raise WorkerFailed("timeout", f"no answer within {timeout:g} s")
        try:
            signed = None if self.answer_key is None else (self.answer_key[0], self.answer_key[1]())
            message, _ = self.chan.recv(timeout=max(1.0, deadline - time.monotonic()), trusted=False, signed=signed)
            return _schema.reply(message)
        except ChannelClosed:
            raise self._died() from None
        except (ChannelTimeout, UntrustedMessage) as exc:
            self.kill()
            raise WorkerFailed("protocol", f"malformed answer: {exc}") from exc

    def _died(self) -> WorkerFailed:
        # its channel closes while it is still exiting: a moment's grace, so it is its own exit status we read
        deadline = time.monotonic() + _EXIT_GRACE_S
        while not _exited(self.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        running = not _exiting(self.pid)
        self.kill()
        status = self.zygote.status(self.zygote_pid)
        self.closed = True
        # before its setup a worker writes to the zygote's log, after it to its own folder's .output
        status["stderr_tail"] = (self.zygote.log_since(self.log_offset) + self.output_tail(1500))[-1500:]
        if "zygote_exit_code" in status:
            how = f"its zygote is gone too, exit status {status['zygote_exit_code']}"
        elif status.get("signal"):
            how = f"signal {status['signal']}"
        else:
            how = f"exit code {status.get('exit_code')}"
        stderr = status["stderr_tail"].strip()
        said = f"; its stderr ended with:\n{stderr[-600:]}" if stderr else "; it wrote nothing to stderr"
        if running or status.get("exit_code") == CHANNEL_LOST:  # the worker's own end closed or shut down
            return WorkerFailed("protocol", f"its channel to the verifier was closed, shut down or replaced by the "
                                f"worker's process{' while it kept running' if running else ''}", status)  # fmt: skip
        return WorkerFailed("crash", f"the process ended ({how}){said}", status)

    def strays(self) -> list[str]:
        return [] if self.closed else self.zygote.strays(self.zygote_pid)

    def output_tail(self, n: int = 2000) -> str:
        """The end of what the worker printed, read without following its links: the worker owns its folder, and
        a ``.output`` it replaced with a link to a host file (read as root, outside the sandbox) or with a FIFO
        (``open`` blocked for good) is no output (red team rt38 F3, F4)."""
        try:
            data = read_tail(Path(self.workdir), ".output", n)
        except (OSError, ValueError):
            return ""
        return data.decode(errors="replace")

    def kill(self) -> None:
        for send in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                send(self.pid, signal.SIGKILL)

    def close(self) -> None:
        if not self.closed:
            try:
                self.chan.send({"op": "exit"})
                self.chan.wait_readable(2.0)
            except (ChannelClosed, OSError):
                pass
            self.kill()
            self.zygote.status(self.zygote_pid)
            self.closed = True
        self.chan.close()
        with contextlib.suppress(OSError):
            remove_tree(Path(self.workdir))
