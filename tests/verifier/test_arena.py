"""Shared call memory: inputs keep shapes, strides and values; output slots are seen by both sides."""

from __future__ import annotations

import os

import pytest
import torch

from mkbsim.verifier._arena import Arena, map_arena


def test_inputs_and_output_slots_round_trip_through_a_memfd() -> None:
    transposed = torch.arange(6.0).reshape(2, 3).t()
    broadcast = torch.tensor(3.0).expand(4)
    scalar_tensor = torch.tensor(5, dtype=torch.int64)
    arena = Arena([transposed, 2.5, broadcast, scalar_tensor], [((2, 2), torch.bfloat16), None], torch.device("cpu"))
    desc, fds = arena.descriptor()
    mapped = map_arena(desc, [os.dup(fds[0])])  # the worker receives its own descriptor
    arena.release_fd()
    x, s, b, t = mapped.args
    assert x.stride() == (1, 3) and torch.equal(x, transposed)
    assert s == 2.5 and torch.equal(b, broadcast) and torch.equal(t, scalar_tensor)
    slot, scalar_slot = mapped.outputs
    assert scalar_slot is None and slot is not None and slot.dtype == torch.bfloat16
    slot.fill_(7)
    x.zero_()  # a mutation by the worker is visible to the verifier
    assert torch.equal(arena.out_views[0], torch.full((2, 2), 7.0, dtype=torch.bfloat16))
    assert not torch.equal(arena.args[0], transposed)


def test_a_refilled_arena_is_reused_by_the_worker_with_the_new_draw() -> None:
    outputs = [((2, 3), torch.float32), None]
    arena = Arena([torch.zeros(2, 3), 1.5], outputs, torch.device("cpu"))
    desc, fds = arena.descriptor()
    first = map_arena(desc, [os.dup(fds[0])])
    arena.release_fd()
    assert first.outputs[0] is not None
    first.outputs[0].fill_(9)  # the previous call's output
    new = torch.arange(6.0).reshape(2, 3)
    assert arena.refill([new, -2.0])
    desc, fds = arena.descriptor(reuse=True)
    assert fds == [] and "cuda_ipc" not in desc
    again = map_arena(desc, fds, first)
    x, s = again.args
    assert torch.equal(x, new) and s == -2.0
    assert again.outputs[0] is not None and not again.outputs[0].any(), "stale outputs must not survive a refill"
    assert x.data_ptr() == first.args[0].data_ptr()  # the same mapping: nothing mapped between calls


def test_a_refill_with_another_layout_is_refused() -> None:
    arena = Arena([torch.zeros(2, 3), 1.5], [((2, 3), torch.float32)], torch.device("cpu"))
    assert not arena.refill([torch.zeros(3, 2), 1.5])
    assert not arena.refill([torch.zeros(2, 3, dtype=torch.float64), 1.5])
    assert not arena.refill([torch.zeros(2, 3).t().contiguous().t(), 1.5])  # other strides
    assert not arena.refill([1.5, torch.zeros(2, 3)])
    assert not arena.refill([torch.zeros(2, 3)])
    arena.release_fd()


def test_reusing_an_arena_the_worker_does_not_hold_fails() -> None:
    arena = Arena([torch.zeros(4)], [((4,), torch.float32)], torch.device("cpu"))
    desc, _ = arena.descriptor(reuse=True)
    arena.release_fd()
    try:
        map_arena(desc, [], None)
    except ValueError:
        return
    raise AssertionError("a reuse request without a mapped arena must fail")


def test_a_staged_arena_copies_the_draw_in_and_what_the_worker_wrote_back() -> None:
    # a sandboxed cuda worker cannot map CUDA IPC handles: each side keeps its own copy, the bytes travel by memfd
    arena = Arena([torch.arange(6.0).reshape(2, 3), 1.5], [((2, 3), torch.float32)], torch.device("cpu"), staged=True)
    desc, fds = arena.descriptor()
    assert desc["staged"] and "cuda_ipc" not in desc
    mapped = map_arena(desc, [os.dup(fds[0])], device=torch.device("cpu"))
    arena.release_fd()
    assert mapped.base is not None and mapped.host is not None
    assert mapped.base.data_ptr() != mapped.host.data_ptr()  # the worker's own memory, not the shared bytes
    x, s = mapped.args
    assert torch.equal(x, torch.arange(6.0).reshape(2, 3)) and s == 1.5
    assert mapped.outputs[0] is not None
    mapped.outputs[0].fill_(4)
    x.add_(1)  # an in-place update
    assert not arena.out_views[0].any(), "nothing reaches the verifier before the worker stages out"
    mapped.stage_out()
    arena.arrived()
    assert torch.equal(arena.out_views[0], torch.full((2, 3), 4.0))
    assert torch.equal(arena.args[0], torch.arange(6.0).reshape(2, 3) + 1)
    # the next draw: refilled on the verifier's side, copied in again when the worker reuses its memory
    assert arena.refill([torch.full((2, 3), -1.0), 0.5])
    desc, fds = arena.descriptor(reuse=True)
    again = map_arena(desc, fds, mapped, device=torch.device("cpu"))
    assert torch.equal(again.args[0], torch.full((2, 3), -1.0)) and again.args[1] == 0.5
    assert again.outputs[0] is not None and not again.outputs[0].any()
    assert again.base is mapped.base


def test_an_arena_of_another_kind_is_not_reused() -> None:
    arena = Arena([torch.zeros(4)], [((4,), torch.float32)], torch.device("cpu"))
    desc, fds = arena.descriptor()
    shared = map_arena(desc, [os.dup(fds[0])])
    arena.release_fd()
    with pytest.raises(ValueError, match="another kind"):
        map_arena({**desc, "reuse": True, "staged": True}, [], shared)
