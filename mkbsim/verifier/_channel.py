"""Length-prefixed pickle messages over a Unix socket, with file descriptors attached.

The verifier decodes what a worker sends with `decode_untrusted`, which refuses every global: a
message from the candidate's process can carry only plain data (dicts, lists, numbers, strings,
bytes), never an object whose unpickling would run code in the verifier.

A worker's answers are signed (DESIGN §5): its socket is a descriptor of its own process, which the
submission can find and write to by any call, so the verifier accepts an answer only with a keyed BLAKE2b
tag over the call's nonce and the payload. The key goes to the worker in its setup and from there only into
a vault (``answer_signer``), which signs one answer per nonce of the control page: bytes written to the
socket by any other route, a second answer to a call, or an answer replayed from an earlier call fail the
tag (``harness_tamper``). The submission can still ask the vault to sign its own answer first, which is
what patching the harness's Python would give it anyway: judged as its own answer (``README``).
"""

from __future__ import annotations

import _blake2
import _struct
import array
import hmac
import io
import os
import pickle
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct("!Q")
_MAX_FDS = 16
#: Bytes of an answer's tag, after its payload.
TAG_BYTES = 32
#: A worker's exit status when its channel to the verifier failed under it (closed, shut down, replaced):
#: only the worker's own process can do that, so it is the submission's tampering, not a crash.
CHANNEL_LOST = 86


class ChannelClosed(ConnectionError):
    """The other side closed the socket (it exited or was killed)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


class UntrustedMessage(ValueError):
    """A message that is not plain data, or is too large."""


class _PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UntrustedMessage(f"message refers to {module}.{name}; only plain data is accepted")


def decode_untrusted(payload: bytes) -> Any:
    """Plain data from ``payload``; ``UntrustedMessage`` for anything else, whatever the bytes (truncated,
    garbage, a global): the unpickler's own errors are many (``UnpicklingError``, ``EOFError``, ``KeyError``...)."""
    try:
        return _PlainDataUnpickler(io.BytesIO(payload)).load()
    except UntrustedMessage:
        raise
    except Exception as exc:
        raise UntrustedMessage(f"message does not decode ({type(exc).__name__}: {str(exc)[:200]})") from None


def answer_tag(key: bytes, nonce: int, payload: bytes) -> bytes:
    """The tag the signing vault puts on an answer to the call of ``nonce``."""
    return _blake2.blake2b(_struct.pack("<Q", nonce) + payload, key=key, digest_size=TAG_BYTES).digest()


def signer_lib() -> Any:
    """The C functions ``answer_signer`` calls, bound before the submission exists."""
    return (_blake2.blake2b, _blake2.blake2b.digest, _struct.Struct("<Q"), bytes, type)


def answer_signer(key: bytes, page: Any, nonce_at: int, lib: Any) -> Any:
    """The vault (``_vault.Registry.open``) that signs a worker's answers: a request is the payload (bytes),
    the reply its tag, for the first payload of each nonce the control page holds (at ``nonce_at``) and None
    for any other (a second answer to a call). The key lives only here."""
    blake2b, digest, u64, exact_bytes, type_of = lib
    signed = -1
    reply: Any = None
    while True:
        payload = yield reply
        reply = None
        nonce = u64.unpack_from(page, nonce_at)[0]
        if nonce != signed and type_of(payload) is exact_bytes:
            signed = nonce
            reply = digest(blake2b(u64.pack(nonce) + payload, key=key, digest_size=32))
        payload = None


# What the worker's loop over blocks calls, bound when the harness loads (its hooks look nothing up on a module or a
# class the submission could change by then: ``_vault.Registry.protect``).
_dumps, _loads, _PROTOCOL = pickle.dumps, pickle.loads, pickle.HIGHEST_PROTOCOL
_select, _monotonic, _int_array = select.select, time.monotonic, array.array
_SOL_SOCKET, _SCM_RIGHTS = socket.SOL_SOCKET, socket.SCM_RIGHTS
_FDS_SPACE = socket.CMSG_SPACE(_MAX_FDS * 4)


def send_message(obj: Any, fds: tuple[int, ...] | list[int] = (), *, _sendmsg: Any, _sendall: Any, _sign: Any) -> None:
    """``obj`` as one message through a socket's ``sendmsg``/``sendall``, with ``fds`` attached and, where ``_sign``
    is the signing vault's hook, its tag (none from the vault: a second answer to the call, one that fails)."""
    payload = _dumps(obj, protocol=_PROTOCOL)
    if _sign is not None:
        payload += _sign(payload) or bytes(TAG_BYTES)
    data = _HEADER.pack(len(payload)) + payload
    ancillary = [(_SOL_SOCKET, _SCM_RIGHTS, _int_array("i", fds))] if fds else []
    try:
        sent = _sendmsg([data], ancillary)
        if sent < len(data):
            _sendall(data[sent:])
    except OSError as exc:  # the other side gone, or this socket closed or shut down under us
        raise ChannelClosed(str(exc)) from exc


def wait_readable(timeout: float | None, *, _fd: int) -> bool:
    """Whether the descriptor ``_fd`` has bytes (or an end of file) to read within ``timeout`` seconds."""
    ready, _, _ = _select([_fd], [], [], timeout)
    return bool(ready)


def read_exactly(n: int, deadline: float | None, fds: list[int], *, _recvmsg: Any, _fd: int) -> bytes:
    """``n`` bytes from the socket (``_recvmsg``, on descriptor ``_fd``) by ``deadline`` (``time.monotonic``), the
    descriptors that came with them added to ``fds``."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        remaining = None if deadline is None else max(0.0, deadline - _monotonic())
        try:
            readable = wait_readable(remaining, _fd=_fd)
        except (OSError, ValueError) as exc:  # this socket closed under us
            raise ChannelClosed(str(exc)) from exc
        if not readable:
            raise ChannelTimeout(f"no message within the time limit ({got}/{n} bytes)")
        try:
            data, ancdata, _, _ = _recvmsg(n - got, _FDS_SPACE)
        except OSError as exc:  # reset, or this socket closed under us
            raise ChannelClosed(str(exc)) from exc
        for level, kind, raw in ancdata:
            if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
                received = _int_array("i")
                received.frombytes(raw[: len(raw) - len(raw) % received.itemsize])
                fds.extend(received)
        if not data:
            raise ChannelClosed("the other side closed the connection")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def receive_message(*, _recvmsg: Any, _fd: int) -> tuple[Any, list[int]]:
    """The next message from the verifier (trusted: the worker's side) and the descriptors sent with it."""
    fds: list[int] = []
    (length,) = _HEADER.unpack(read_exactly(_HEADER.size, None, fds, _recvmsg=_recvmsg, _fd=_fd))
    return _loads(read_exactly(length, None, fds, _recvmsg=_recvmsg, _fd=_fd)), fds


def worker_io(protect: Any, sock: socket.socket, sign: Any, quiet: Any = None) -> dict[str, Any]:
    """The hooks a worker's loop over blocks talks to the verifier through (``_recv``, ``_ready``, ``_send``), bound to
    the socket's C methods and descriptor: the ``Channel`` object and the ``socket`` class stay out of it. ``quiet``
    (a candidate's: ``Guards.quiet``) runs a request with the guards' judging of its events off: the audited
    ``socket.sendmsg`` is the harness's own, made from a hook, which the guards look past to its caller."""
    fd = sock.fileno()
    sendmsg = sock.sendmsg if quiet is None else protect(_unpacked, _call=quiet(protect(_applied, _fn=sock.sendmsg)))
    return {
        "_recv": protect(receive_message, _recvmsg=sock.recvmsg, _fd=fd),
        "_ready": protect(wait_readable, _fd=fd),
        "_send": protect(send_message, _sendmsg=sendmsg, _sendall=sock.sendall, _sign=sign),
    }


def _unpacked(*args: Any, _call: Any) -> Any:
    return _call(args)


def _applied(args: Any, *, _fn: Any) -> Any:
    return _fn(*args)


class Channel:
    """One end of a socketpair; `send` and `recv` move whole messages. A worker's end has ``sign`` (the
    signing vault's hook, set once its vaults are open): its messages carry their tag."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(True)
        self.sign: Any = None

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, obj: Any, fds: tuple[int, ...] | list[int] = ()) -> None:
        send_message(obj, fds, _sendmsg=self.sock.sendmsg, _sendall=self.sock.sendall, _sign=self.sign)

    def pending(self) -> bool:
        """Whether bytes wait to be read (not an end of file): the other side sent what nobody asked for."""
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:  # nothing waiting (EAGAIN), or the other side is gone (sending the next message says so)
            return False

    def wait_readable(self, timeout: float | None) -> bool:
        return wait_readable(timeout, _fd=self.sock.fileno())

    def recv(
        self, timeout: float | None = None, *, trusted: bool = True, max_bytes: int = 64 << 20,
        signed: tuple[bytes, int] | None = None,
    ) -> tuple[Any, list[int]]:  # fmt: skip
        """The next message and the descriptors sent with it. ``trusted=False`` decodes plain data
        only and caps its size; a deadline covers the whole message. ``signed`` (key, nonce): the message
        must carry the signing vault's tag for that nonce, or it is ``UntrustedMessage``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fds: list[int] = []
        header = self._read(_HEADER.size, deadline, fds)
        (length,) = _HEADER.unpack(header)
        if not trusted and length > max_bytes:
            raise UntrustedMessage(f"message of {length} bytes exceeds {max_bytes}")
        payload = self._read(length, deadline, fds)
        if signed is not None:
            payload, tag = payload[:-TAG_BYTES], payload[-TAG_BYTES:]
            if not hmac.compare_digest(tag, answer_tag(*signed, payload)):
                raise UntrustedMessage("a message without the harness's signature for this call (written to the "
                                       "verifier's channel by another route, or a second answer)")  # fmt: skip
        obj = pickle.loads(payload) if trusted else decode_untrusted(payload)
        return obj, fds

    def _read(self, n: int, deadline: float | None, fds: list[int]) -> bytes:
        return read_exactly(n, deadline, fds, _recvmsg=self.sock.recvmsg, _fd=self.sock.fileno())

    def send_credentials(self) -> None:
        """Send this process's pid, uid and gid as the kernel vouches for them (SCM_CREDENTIALS)."""
        creds = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
        self.sock.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])

    def recv_credentials(self, timeout: float) -> int:
        """The pid the other side sent with ``send_credentials``, in this process's PID namespace
        (``SO_PASSCRED`` must be set on this socket before it was sent)."""
        if not self.wait_readable(timeout):
            raise ChannelTimeout("no credentials within the time limit")
        _, ancdata, _, _ = self.sock.recvmsg(1, socket.CMSG_SPACE(struct.calcsize("3i")))
        for level, kind, raw in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                return int(struct.unpack("3i", raw[: struct.calcsize("3i")])[0])
        raise UntrustedMessage("the other side sent no credentials")

    def close(self) -> None:
        self.sock.close()
