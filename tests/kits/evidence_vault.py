"""The gate's provenance vault driven directly on an evidence call (no dispatch mode: only the gate, the harness's
INPUTS report and the RESULT report), for the tests of the work rule's measures; a Python "kernel" behind a counted gate
stands for native code."""

from __future__ import annotations

import _thread
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from mkbsim.verifier import _control, _provenance
from mkbsim.verifier._provenance import gate, page_layout, provenance_lib, provenance_vault
from mkbsim.verifier._vault import Registry

_SEEDS = iter(range(1, 1 << 30))


@dataclass
class EvidenceVault:
    control: _control.ControlPage
    send: Any
    registry: Registry
    lib: Any
    numel: int

    def call(self, *inputs: torch.Tensor, inplace: tuple[int, ...] = ()) -> None:
        """A new evidence call, and its problem inputs as the harness reports them before run() (the decode rule masks
        their bytes as given)."""
        self.control.begin_call(suppress=False, audit=False, evidence=True)
        self.registry.protect(_provenance.report_inputs, _send=self.send)(list(inputs), inplace)

    def launch(self, kernel: Callable[..., Any], *args: Any) -> None:
        self.send((0, kernel, "launch"))
        self.registry.protect(gate, _send=self.send, _original=kernel, _count=True, _serial=_thread.RLock())(*args)

    def work(self, out: torch.Tensor) -> dict[str, Any]:
        """The call's work record, written once run() returned ``out``."""
        self.registry.protect(_provenance.report_result, _send=self.send)([out])
        found = self.control.report([self.numel])["work"]
        assert found is not None
        return found


def evidence_vault(numel: int, lib: Any = None) -> Iterator[EvidenceVault]:
    """A vault watching outputs of ``numel`` elements at 512 sampled positions. A seed of its own for each case: memory
    an earlier case freed must not hold the values this one draws (a block holding a map of this case's data is no
    stale memory a verification's fresh inputs give)."""
    torch.manual_seed(next(_SEEDS))
    lib = lib or provenance_lib(torch.device("cpu"))
    control = _control.ControlPage()
    registry = Registry()
    positions = [torch.randperm(numel)[:512]]
    send = registry.open(provenance_vault, control.buf, lib, page_layout(), positions, [numel], {})
    yield EvidenceVault(control, send, registry, lib, numel)
    control.close()
