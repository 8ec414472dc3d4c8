"""Python kernels for the composite aten operators whose C++ reads a tensor argument's elements itself.

``tensor_split`` by a tensor of indices, ``_pad_packed_sequence``'s batch sizes and ``ctc_loss``'s lengths are read in
C++ through ``data_ptr``, with no operator dispatched: no record of the values leaving the tensor, while they come back
to Python as the pieces' lengths, the slices' offsets, integer lists. Red teams rt67 F1 and rt68 F2 carried a whole
eager answer out to Python as ``tensor_split``'s piece lengths (of a view of a problem input in rt68, whose pieces are
no values in), and back in by one channel or another: full plans at 0%. In the worker these composites are given the
kernels below (``install``, before the submission loads), which read the same elements through ``Tensor.tolist``, the
hook that reports them leaving for Python (``_eagerwork.to_python_hook``), then call the overload that takes integers:
the elements count 8 bytes out each and the operators behind them are reached (``_provenance.priced_trail``). Each
kernel computes what torch's does (``tests/verifier/test_composites.py`` compares them)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

ToList = Callable[[torch.Tensor], Any]


def _tensor_split(tolist: ToList) -> Callable[..., Any]:
    def tensor_split(self: torch.Tensor, tensor_indices_or_sections: torch.Tensor, dim: int = 0) -> Any:
        given = tensor_indices_or_sections
        if given.device.type != "cpu" or given.dtype != torch.int64 or given.dim() > 1:  # (torch's own conditions)
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional int64 "
                f"tensor on the CPU, but got a {given.dim()}-dimensional {given.dtype} tensor on {given.device}"
            )
        points = tolist(given)
        if tensor_indices_or_sections.dim() == 0:
            return torch.ops.aten.tensor_split.sections(self, points, dim)
        return torch.ops.aten.tensor_split.indices(self, points, dim)

    return tensor_split


def _ctc_loss(tolist: ToList) -> Callable[..., Any]:
    def ctc_loss(
        log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: torch.Tensor, target_lengths: torch.Tensor,
        blank: int = 0, reduction: int = 1, zero_infinity: bool = False,
    ) -> torch.Tensor:  # fmt: skip
        return torch.ops.aten.ctc_loss.IntList(
            log_probs, targets, tolist(input_lengths), tolist(target_lengths), blank, reduction, zero_infinity
        )

    return ctc_loss


def _pad_packed_sequence(tolist: ToList) -> Callable[..., Any]:
    def pad_packed_sequence(
        data: torch.Tensor, batch_sizes: torch.Tensor, batch_first: bool, padding_value: Any, total_length: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        sizes = tolist(batch_sizes)
        steps = len(sizes)
        if total_length > 0:
            if total_length < steps:
                raise RuntimeError(
                    f"Expected total_length to be at least the length of the longest sequence ({steps}), but got "
                    f"total_length={total_length}"
                )
            steps = total_length
        batch = sizes[0]
        padded = data.new_full((steps, batch, *data.shape[1:]), padding_value)
        offset = 0
        for step, size in enumerate(sizes):
            padded[step, :size] = data[offset : offset + size]
            offset += size
        lengths = torch.tensor([sum(1 for size in sizes if size > b) for b in range(batch)], dtype=torch.int64)
        return (padded.transpose(0, 1) if batch_first else padded), lengths

    return pad_packed_sequence


#: (the operator's schema name, its kernel made from the ``tolist`` that reports the elements it reads)
KERNELS: tuple[tuple[str, Callable[[ToList], Callable[..., Any]]], ...] = (
    ("tensor_split.tensor_indices_or_sections", _tensor_split),
    ("ctc_loss.Tensor", _ctc_loss),
    ("_pad_packed_sequence", _pad_packed_sequence),
)


#: The libraries holding the kernels installed, for the process's life: the worker drops its own objects once the hooks
#: it serves with are bound, and a library collected takes its kernels with it (torch's are back).
_HELD: list[torch.library.Library] = []


def install(tolist: ToList) -> torch.library.Library:
    """Give each composite of ``KERNELS`` its Python kernel reading through ``tolist``, in this process, until
    ``remove``; the library holding them."""
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # (torch warns that a kernel it has is replaced: that is the point)
        warnings.simplefilter("ignore")
        for name, kernel in KERNELS:
            library.impl(name, kernel(tolist), "CompositeImplicitAutograd")
    _HELD.append(library)
    return library


def remove(library: torch.library.Library) -> None:
    """Torch's own kernels back for the composites ``library`` holds."""
    _HELD.remove(library)
    library._destroy()
