"""The message channel: whole messages, attached descriptors, and nothing but plain data from a worker."""

from __future__ import annotations

import os
import pickle
import socket

import pytest

from mkbsim.verifier._channel import Channel, ChannelClosed, ChannelTimeout, UntrustedMessage, decode_untrusted


class _Exploit:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo pwned",))


def test_untrusted_messages_cannot_name_globals() -> None:
    assert decode_untrusted(pickle.dumps({"ok": True, "ms": [1.5, 2.0], "b": b"x", "t": (1, None)})) == {
        "ok": True,
        "ms": [1.5, 2.0],
        "b": b"x",
        "t": (1, None),
    }
    with pytest.raises(UntrustedMessage, match=r"(posix|os)\.system"):
        decode_untrusted(pickle.dumps(_Exploit()))


def test_messages_carry_descriptors_and_time_out() -> None:
    a, b = socket.socketpair()
    left, right = Channel(a), Channel(b)
    r, w = os.pipe()
    try:
        left.send({"big": b"x" * (64 << 10)}, fds=[r])  # within the socket buffer: one thread
        msg, fds = right.recv(timeout=5)
        assert len(msg["big"]) == 64 << 10 and len(fds) == 1
        os.write(w, b"hi")
        assert os.read(fds[0], 2) == b"hi"
        os.close(fds[0])
        with pytest.raises(ChannelTimeout):
            right.recv(timeout=0.05)
        left.send({"huge": b"x" * 2048})
        with pytest.raises(UntrustedMessage, match="exceeds"):
            right.recv(timeout=5, trusted=False, max_bytes=1024)
        # (the worker is killed after an oversized message: its channel is out of step)
        c, d = socket.socketpair()
        Channel(c).close()
        with pytest.raises(ChannelClosed):
            Channel(d).recv(timeout=5)
        d.close()
    finally:
        os.close(r)
        os.close(w)
        left.close()
        right.close()
