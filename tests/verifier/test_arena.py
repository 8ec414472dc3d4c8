"""Shared call memory: inputs keep shapes, strides and values; output slots are seen by both sides."""

from __future__ import annotations

import os

import pytest
import torch

from kits.arena_isolation import assert_calls_isolated, in_another_process
from mkbsim.verifier._arena import BlockArenas
from mkbsim.verifier._mapped import bound_steps
from mkbsim.verifier._vault import Registry

CPU = torch.device("cpu")
STEPS = bound_steps(Registry().protect, CPU, None)  # the worker's steps, as it binds them
map_block = STEPS["map"]  # an arena: (its arguments, its output slots)


def test_inputs_and_output_slots_round_trip_through_a_memfd() -> None:
    transposed = torch.arange(6.0).reshape(2, 3).t()
    broadcast = torch.tensor(3.0).expand(4)
    scalar_tensor = torch.tensor(5, dtype=torch.int64)
    block = BlockArenas([[transposed, 2.5, broadcast, scalar_tensor]], [((2, 2), torch.bfloat16), None], CPU)
    desc, fds = block.descriptor()
    _, (mapped,) = map_block(desc, [os.dup(fds[0])], CPU)  # the worker receives its own descriptor
    block.release_fd()
    arena = block.arenas[0]
    x, s, b, t = mapped[0]
    assert x.stride() == (1, 3) and torch.equal(x, transposed)
    assert s == 2.5 and torch.equal(b, broadcast) and torch.equal(t, scalar_tensor)
    slot, scalar_slot = mapped[1]
    assert scalar_slot is None and slot is not None and slot.dtype == torch.bfloat16
    slot.fill_(7)
    x.zero_()  # a mutation by the worker is visible to the verifier
    assert torch.equal(arena.out_views[0], torch.full((2, 2), 7.0, dtype=torch.bfloat16))
    assert not torch.equal(arena.args[0], transposed)


def test_every_call_of_a_block_has_its_own_inputs_and_output_slots() -> None:
    draws = [[torch.full((2, 3), float(i)), float(i)] for i in range(3)]
    block = BlockArenas(draws, [((2, 3), torch.float32)], CPU)
    desc, fds = block.descriptor()
    _, mapped = map_block(desc, [os.dup(fds[0])], CPU)
    block.release_fd()
    for i, arena in enumerate(mapped):
        args, outputs = arena
        assert torch.equal(args[0], torch.full((2, 3), float(i))) and args[1] == float(i)
        assert outputs[0] is not None and not outputs[0].any()  # output slots start zeroed
        outputs[0].fill_(10 + i)
    spans = {a[0][0].data_ptr() for a in mapped} | {o.data_ptr() for a in mapped for o in a[1] if o is not None}
    assert len(spans) == 6  # no two calls share a buffer
    assert [int(a.out_views[0][0, 0]) for a in block.arenas] == [10, 11, 12]


def test_a_staged_block_copies_the_draws_in_and_what_the_worker_wrote_back() -> None:
    # a sandboxed cuda worker cannot map CUDA IPC handles: each side keeps its own copy, the bytes travel by memfd
    block = BlockArenas([[torch.arange(6.0).reshape(2, 3), 1.5]], [((2, 3), torch.float32)], CPU, staged=True)
    desc, fds = block.descriptor()
    assert desc["staged"] and "cuda_ipc" not in desc
    memory, (mapped,) = map_block(desc, [os.dup(fds[0])], CPU)
    block.release_fd()
    (base,), host = memory[0], memory[1]
    assert base.data_ptr() != host.data_ptr()  # the worker's own memory, not the shared bytes
    arena = block.arenas[0]
    x, s = mapped[0]
    assert torch.equal(x, torch.arange(6.0).reshape(2, 3)) and s == 1.5
    assert mapped[1][0] is not None
    mapped[1][0].fill_(4)
    x.add_(1)  # an in-place update
    assert not arena.out_views[0].any(), "nothing reaches the verifier before the worker stages out"
    STEPS["stage_out"](memory)
    block.arrived()
    assert torch.equal(arena.out_views[0], torch.full((2, 3), 4.0))
    assert torch.equal(arena.args[0], torch.arange(6.0).reshape(2, 3) + 1)


def test_an_arena_outside_the_block_s_memory_is_refused() -> None:
    block = BlockArenas([[torch.zeros(4)]], [((4,), torch.float32)], CPU)
    desc, fds = block.descriptor()
    fd = os.dup(fds[0])
    block.release_fd()
    desc["arenas"][0]["offset"] = desc["nbytes"]
    with pytest.raises(ValueError, match="outside its memory"):
        map_block(desc, [fd], CPU)


NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.parametrize(
    ("device_type", "staged"),
    [("cpu", False), ("cpu", True), *(pytest.param("cuda", staged, marks=NO_CUDA) for staged in (False, True))],
    ids=["cpu-memfd", "cpu-staged", "cuda-ipc", "cuda-staged"],
)  # fmt: skip
def test_no_call_reaches_another_call_s_memory_through_its_storage(device_type: str, staged: bool) -> None:
    """Every tensor a call receives (inputs, output slots) has a storage that ends at the call's own arena: a call
    cannot view a later call's inputs (red team rt12 F0: a look-ahead through ``untyped_storage()`` and
    ``as_strided`` computed later calls' answers early, later calls copied them)."""
    device = torch.device(device_type)
    draws = [[torch.full((2, 3), float(i)), torch.arange(4, dtype=torch.int64) + i] for i in range(3)]
    block = BlockArenas(draws, [((2, 3), torch.float32)], device, staged=staged)
    desc, fds = block.descriptor()
    if "cuda_ipc" in desc:  # CUDA opens an IPC handle only in another process, as the worker is
        assert in_another_process(desc, device_type) == 0, "the worker's view of the block (stderr above)"
        return
    assert_calls_isolated(desc, [os.dup(fd) for fd in fds], device_type)
    block.release_fd()
