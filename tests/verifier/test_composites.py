"""The Python kernels of the composite operators whose C++ reads a tensor's elements (``_composites``; red team rt68
F2): each computes what torch's kernel does, and once installed every way of calling the operator reads the elements
through the ``tolist`` it was given (the worker's hook reporting them leaving for Python), whether autograd
decomposes it (grad on, as run() is called) or it reaches a dispatch mode whole (inference mode)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from mkbsim.verifier import _composites

_tolist = torch._C.TensorBase.tolist


def _kernel(name: str) -> Any:
    return dict(_composites.KERNELS)[name](_tolist)


@pytest.mark.parametrize(
    ("shape", "given", "dim"),
    [((10,), [2, 5], 0), ((10,), [7, 3, 12], 0), ((4, 9), [1, -2], 1), ((4, 9), [], 0), ((10,), 3, 0), ((4, 9), 4, 1)],
)
def test_tensor_split_by_a_tensor_is_torch_s(shape: tuple[int, ...], given: Any, dim: int) -> None:
    x = torch.randn(shape)
    points = torch.tensor(given, dtype=torch.int64)
    expected = torch.ops.aten.tensor_split.tensor_indices_or_sections(x, points, dim)
    got = _kernel("tensor_split.tensor_indices_or_sections")(x, points, dim)
    assert len(got) == len(expected) and all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    with pytest.raises(RuntimeError):  # torch's conditions: int64 on the cpu
        _kernel("tensor_split.tensor_indices_or_sections")(x, points.to(torch.int32), dim)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("total_length", [0, 7])
def test_pad_packed_sequence_is_torch_s(batch_first: bool, total_length: int) -> None:
    lengths = torch.tensor([5, 3, 3, 1])
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.randn(4, 5, 3), lengths, batch_first=True)
    args = (packed.data, packed.batch_sizes, batch_first, -1.5, total_length)
    expected = torch.ops.aten._pad_packed_sequence.default(*args)
    got = _kernel("_pad_packed_sequence")(*args)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    with pytest.raises(RuntimeError):
        _kernel("_pad_packed_sequence")(packed.data, packed.batch_sizes, batch_first, 0.0, 3)


def test_ctc_loss_by_tensors_of_lengths_is_torch_s() -> None:
    log_probs = torch.randn(12, 3, 6).log_softmax(-1)
    targets = torch.randint(1, 6, (3, 5))
    lengths = (torch.tensor([12, 10, 8]), torch.tensor([5, 3, 4]))
    for reduction in (0, 1, 2):
        expected = torch.ops.aten.ctc_loss.Tensor(log_probs, targets, *lengths, 0, reduction, False)
        got = _kernel("ctc_loss.Tensor")(log_probs, targets, *lengths, 0, reduction, False)
        assert torch.allclose(got, expected)


@pytest.fixture
def read() -> Iterator[list[list[Any]]]:
    """The kernels installed with a ``tolist`` recording what it read; torch's own kernels back afterwards."""
    found: list[list[Any]] = []

    def tolist(t: torch.Tensor) -> Any:
        values = _tolist(t)
        found.append(values if isinstance(values, list) else [values])
        return values

    library = _composites.install(tolist)
    try:
        yield found
    finally:
        _composites.remove(library)


class _Seen(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def test_every_way_of_calling_an_installed_composite_reads_through_the_hook(read: list[list[Any]]) -> None:
    x, points = torch.randn(10), torch.tensor([2, 5])
    calls = [
        lambda: torch.tensor_split(x, points),
        lambda: x.tensor_split(points),
        lambda: torch.ops.aten.tensor_split.tensor_indices_or_sections(x, points),
        lambda: torch.tensor_split(x.requires_grad_(), points),
    ]
    for call in calls:
        seen = _Seen()
        with seen:
            pieces = call()
        assert [p.shape[0] for p in pieces] == [2, 3, 5] and seen.names == ["aten.slice.Tensor"] * 3
    y = torch.randn(10)
    with torch.inference_mode(), _Seen() as seen:  # whole to the mode, then its kernel below it
        torch.tensor_split(y, points)
    assert seen.names[0] == "aten.tensor_split.tensor_indices_or_sections"
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.randn(3, 4, 2), torch.tensor([4, 2, 1]), batch_first=True)
    torch.nn.utils.rnn.pad_packed_sequence(packed)
    log_probs = torch.randn(6, 1, 4).log_softmax(-1)
    F.ctc_loss(log_probs, torch.tensor([[1, 2]]), torch.tensor([6]), torch.tensor([2]))
    assert read == [[2, 5]] * 5 + [[3, 2, 1, 1]] + [[6], [2]]


def test_torch_s_kernels_are_back_once_the_library_is_gone() -> None:
    found: list[Any] = []
    _composites.remove(_composites.install(lambda t: found.append(t) or _tolist(t)))
    torch.tensor_split(torch.randn(10), torch.tensor([2, 5]))
    assert found == []
