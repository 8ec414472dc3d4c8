"""Shared call memory: inputs keep shapes, strides and values; output slots are seen by both sides."""

from __future__ import annotations

import os

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
