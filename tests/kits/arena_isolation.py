"""What a worker sees of a block's memory: every call's tensors end at the call's own arena (red team rt12 F0).

A module of its own so that the CUDA IPC case can run it in a spawned process: CUDA does not open an IPC handle in
the process that exported it, and the verifier's workers are always other processes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from mkbsim.verifier._mapped import bound_steps
from mkbsim.verifier._vault import Registry


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes a tensor's storage spans: what the tensor reaches by ``untyped_storage()`` and any view of it."""
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def assert_calls_isolated(desc: dict[str, Any], fds: list[int], device_type: str) -> None:
    """Map the block as the worker does (``fds`` are this process's own descriptors) and check that call i holds its
    own draw (``torch.full(..., i)`` first) and that no storage of its tensors reaches another call's memory."""
    device = torch.device(device_type)
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    steps = bound_steps(Registry().protect, device, sync)
    _, mapped = steps["map"](desc, fds, device)
    tensors = [[t for t in (*args, *outputs) if isinstance(t, torch.Tensor)] for args, outputs in mapped]
    for i, own in enumerate(tensors):
        assert torch.equal(own[0].cpu(), torch.full(own[0].shape, float(i)))
        others = [t for j, ts in enumerate(tensors) if j != i for t in ts]
        for t in own:
            lo, hi = _span(t)
            for other in others:
                start = other.data_ptr()
                end = start + other.numel() * other.element_size()
                assert end <= lo or hi <= start, f"call {i} reaches another call's memory through its storage"
        with pytest.raises(RuntimeError, match="out of bounds"):  # the view a look-ahead takes of the next arena
            torch.as_strided(own[0], own[0].shape, own[0].stride(), own[0].untyped_storage().nbytes() // 4)


def in_another_process(desc: dict[str, Any], device_type: str) -> int:
    """``assert_calls_isolated`` in a spawned process (no descriptors: a CUDA IPC block travels in ``desc``); its
    exit code (0: every check held; an assertion's traceback goes to stderr)."""
    process = torch.multiprocessing.get_context("spawn").Process(
        target=assert_calls_isolated, args=(desc, [], device_type)
    )
    process.start()
    process.join(120)
    if process.exitcode is None:
        process.kill()
        process.join()
    return -1 if process.exitcode is None else process.exitcode
