"""The message channel: whole messages, attached descriptors, nothing but plain data from a worker, and only
answers the harness's signing vault signed for the call (DESIGN §5)."""

from __future__ import annotations

import mmap
import os
import pickle
import socket
from collections.abc import Iterator

import pytest

from mkbsim.verifier import _control
from mkbsim.verifier._channel import (
    _HEADER,
    TAG_BYTES,
    Channel,
    ChannelClosed,
    ChannelTimeout,
    UntrustedMessage,
    answer_signer,
    answer_tag,
    decode_untrusted,
    signer_lib,
)
from mkbsim.verifier._vault import Registry


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


@pytest.fixture
def signed_pair() -> Iterator[tuple[Channel, Channel, mmap.mmap]]:
    """A worker's end whose answers the signing vault signs, the verifier's end, and the control page."""
    control = _control.ControlPage()
    a, b = socket.socketpair()
    worker, verifier = Channel(a), Channel(b)
    worker.sign = Registry().open(answer_signer, KEY, control.buf, _control.BLOCK_NONCE[0], signer_lib())
    yield worker, verifier, control.buf
    worker.close()
    verifier.close()
    control.close()


KEY = bytes(range(32))


def test_the_verifier_accepts_only_the_harness_signed_answer_to_this_call(
    signed_pair: tuple[Channel, Channel, mmap.mmap],
) -> None:
    worker, verifier, page = signed_pair
    worker.send({"ok": True, "import_s": 0.1})  # the import's answer, at nonce 0
    assert verifier.recv(timeout=5, trusted=False, signed=(KEY, 0))[0] == {"ok": True, "import_s": 0.1}
    _control.put(page, _control.BLOCK_NONCE, 1)
    payload = pickle.dumps({"ok": True}, protocol=pickle.HIGHEST_PROTOCOL)
    raw = worker.fileno()  # what a submission finds by os.fstat: written to without the vault
    os.write(raw, _HEADER.pack(len(payload) + TAG_BYTES) + payload + bytes(TAG_BYTES))
    with pytest.raises(UntrustedMessage, match="signature"):
        verifier.recv(timeout=5, trusted=False, signed=(KEY, 1))
    # the vault signs one answer per call: the harness's answer after the submission's own fails
    worker.send({"ok": True, "forged": 1})
    worker.send({"ok": True})
    assert verifier.recv(timeout=5, trusted=False, signed=(KEY, 1))[0] == {"ok": True, "forged": 1}
    with pytest.raises(UntrustedMessage, match="signature"):
        verifier.recv(timeout=5, trusted=False, signed=(KEY, 1))
    # an answer signed for one call is no answer to another (replayed bytes)
    _control.put(page, _control.BLOCK_NONCE, 2)
    worker.send({"ok": True})
    data, _ = b"", None
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack(data[: _HEADER.size])[0]:
        data += verifier.sock.recv(1 << 16)
    os.write(raw, data)
    _control.put(page, _control.BLOCK_NONCE, 3)
    with pytest.raises(UntrustedMessage, match="signature"):
        verifier.recv(timeout=5, trusted=False, signed=(KEY, 3))
    assert answer_tag(KEY, 2, data[_HEADER.size : -TAG_BYTES]) == data[-TAG_BYTES:]  # the vault's tag, as computed


def test_a_channel_closed_or_shut_down_under_the_worker_is_channel_closed_on_either_side() -> None:
    a, b = socket.socketpair()
    worker = Channel(a)
    os.close(a.fileno())  # the submission closes the harness's descriptor
    with pytest.raises(ChannelClosed):
        worker.send({"ok": True})
    with pytest.raises(ChannelClosed):
        worker.recv(timeout=1)
    a.detach()
    b.close()
    c, d = socket.socketpair()
    worker, verifier = Channel(c), Channel(d)
    c.shutdown(socket.SHUT_RDWR)  # shut down under the harness (native code could)
    with pytest.raises(ChannelClosed):
        worker.send({"ok": True})
    with pytest.raises(ChannelClosed):
        verifier.recv(timeout=1)
    worker.close()
    verifier.close()
