"""A verifier slot: one long-lived process holding a warm ``VerifierSession``, verifying one request at a time.

An LLM campaign runs ``[limits] gpu_verifier_slots`` of them (``mkbsim.agents.VerifierSlots``). On
cuda the parent gives each its own ``CUDA_VISIBLE_DEVICES`` (slot i → GPU i % n), so a slot's
measurements never share a GPU with another slot's. Requests and replies are length-prefixed
pickles on stdin and on a duplicate of the original stdout; fd 1 itself is pointed at stderr, so a
stray print (a DSL compiler's banner) cannot corrupt the channel. The parent is trusted (it
started this process); the kernels under test never run here but in the session's own workers.

Run as ``python -m mkbsim.verifier._slot BACKEND``; it imports only the verifier and the catalogue,
so it runs on GPU machines without the LLM stack. ``SlotServer`` is the loop's body, also run as a
Ray actor.
"""

from __future__ import annotations

import os
import pickle
import shutil
import struct
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

_HEADER = struct.Struct("!Q")


def write_frame(stream: IO[bytes], obj: Any) -> None:
    blob = pickle.dumps(obj)
    stream.write(_HEADER.pack(len(blob)) + blob)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """The next object, or raises EOFError when the other side has gone."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the channel closed")
    size = _HEADER.unpack(header)[0]
    blob = stream.read(size)
    if len(blob) < size:
        raise EOFError("the channel closed mid-message")
    return pickle.loads(blob)


def handle(session: Any, request: dict[str, Any]) -> tuple[str, Any, str]:
    """Verify one request: ``("ok", payload, feedback)``, or ``("error", None, why)`` when the
    verifier itself failed (the caller records that as infrastructure, not as the agent's fault)."""
    try:
        report = session.verify(request["kernel"], request["problem"], request["dsl"], protocol=request["protocol"])
        payload = report.to_payload(request["attempt_id"], request["submission"])
        return "ok", payload, "\n".join(report.verdict_lines())
    except Exception as exc:  # every verifier failure goes back to the caller as text
        return "error", None, f"{type(exc).__name__}: {exc}"


class SlotServer:
    """A warm session serving requests one at a time: this process's loop, and the Ray executor's
    verifier actor (``mkbsim.agents.RayVerifiers``), which runs on another node than the attempt.

    Starting it starts the session's zygote, so the DSL imports are paid before the first request. A
    request names its kernel file (``kernel``) or carries the code (``code``: the file is on the
    attempt's node); code is written to a file of its own here, since both DSLs read their source.
    """

    def __init__(self, backend: str | None) -> None:
        from mkbsim.verifier import VerifierSession

        self.session = VerifierSession(backend)
        self.backend = self.session.backend
        self.session.zygote()
        self._files = tempfile.TemporaryDirectory(prefix="mkbsim-slot-")

    def verify(self, request: dict[str, Any]) -> tuple[str, Any, str]:
        if "code" not in request:
            return handle(self.session, request)
        folder = tempfile.mkdtemp(dir=self._files.name)
        try:
            kernel = Path(folder) / "kernel.py"
            kernel.write_text(request["code"])
            return handle(self.session, {**request, "kernel": str(kernel)})
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        self.session.close()
        self._files.cleanup()


def main(argv: list[str]) -> None:
    backend = argv[0] if argv else None
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    requests = os.fdopen(0, "rb")
    server = SlotServer(backend or None)
    try:
        write_frame(channel, ("ready", server.backend, ""))
        while True:
            try:
                request = read_frame(requests)
            except EOFError:
                return
            write_frame(channel, server.verify(request))
    finally:
        server.close()


if __name__ == "__main__":
    main(sys.argv[1:])
