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
