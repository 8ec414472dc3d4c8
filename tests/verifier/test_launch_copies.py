"""What an evidence call's launches copied (``_provenance.launch_copies``, the control page's ``WORK_COPIED``), and what
judging it costs: the provenance vault driven directly, as in ``test_provenance_bytes.py``, on an evidence call (no
dispatch mode: only the gate reports). A Python "kernel" behind a counted gate stands for native code.

The windowed and order-free copy checks (a few hundred tensor operations a launch: 40-60 ms of p51's 8-launch evidence
calls, which the scored-time rule then missed by ~2 ms of run() slowed by them) run only for a launch whose other
arguments hold ``COPY_PRESENT`` of the values it wrote; the decoys of the windowed check (``randperm``) say whether
they ran."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from mkbsim.verifier import _coverage, _provenance
from mkbsim.verifier._provenance import provenance_lib
from tests.kits.evidence_vault import EvidenceVault, evidence_vault

TOKENS, HIDDEN = 32, 64
N = TOKENS * HIDDEN


@dataclass
class Evidence:
    vault: EvidenceVault
    searched: list[int]  # calls of the windowed check's reversed windows (``held_runs``)

    def launch(self, kernel: Callable[..., Any], *args: Any) -> None:
        self.vault.launch(kernel, *args)

    def copied(self, out: torch.Tensor) -> float:
        """The output's copied share the vault wrote once run() returned."""
        return float(self.vault.work(out)["copied"][0])


@pytest.fixture(params=["whole", "in_pieces"])
def evidence(request: pytest.FixtureRequest) -> Iterator[Evidence]:
    """Each case twice: the held arguments read whole, and in pieces of 64 elements (``HELD_PIECE``: a production
    argument's readings are made a piece at a time), which must find the same copies."""
    lib = provenance_lib(torch.device("cpu"))
    if request.param == "in_pieces":
        lib.held_piece = 64
    searched: list[int] = []
    flip = lib.flip

    def counted(*args: Any, **kwargs: Any) -> Any:
        searched.append(1)
        return flip(*args, **kwargs)

    lib.flip = counted
    for vault in evidence_vault(N, lib):
        vault.call()
        yield Evidence(vault, searched)


def expert(x: torch.Tensor, w: torch.Tensor, rows: torch.Tensor, out: torch.Tensor) -> None:
    out.index_add_(0, rows, torch.tanh(x @ w))


def copy_rows(answer: torch.Tensor, rows: torch.Tensor, out: torch.Tensor) -> None:
    out[rows] = answer[rows]


def test_launches_computing_their_rows_are_not_searched_for_copies(evidence: Evidence) -> None:
    """p51's shape: one launch per expert over the rows routed to it, each adding into the output. What they write is
    in none of their arguments: the copy checks do not run (before: their windows and decoys, on every launch)."""
    out, x, w = torch.zeros(TOKENS, HIDDEN), torch.randn(TOKENS, HIDDEN), torch.randn(8, HIDDEN, HIDDEN)
    for e in range(8):
        rows = torch.arange(e, TOKENS, 8)
        evidence.launch(expert, x[rows].contiguous(), w[e], rows, out)
    assert evidence.copied(out) == 0.0
    assert not evidence.searched


def test_a_launch_copying_an_answer_it_is_given_copies_every_element(evidence: Evidence) -> None:
    out, answer = torch.zeros(TOKENS, HIDDEN), torch.randn(TOKENS, HIDDEN)
    evidence.launch(copy_rows, answer, torch.arange(TOKENS), out)
    assert evidence.copied(out) == 1.0
    assert evidence.searched


def test_an_answer_copied_a_quarter_per_launch_is_copied_whole(evidence: Evidence) -> None:
    """Four launches each copy a quarter of the rows: the copied share is of the launch that last changed each sampled
    element (before: of the last launch alone, a quarter, within ``COPIED_MARGIN``)."""
    out, answer = torch.zeros(TOKENS, HIDDEN), torch.randn(TOKENS, HIDDEN)
    for part in range(4):
        evidence.launch(copy_rows, answer, torch.arange(part, TOKENS, 4), out)
    assert evidence.copied(out) > 1.0 - _coverage.COPIED_MARGIN


def rms_norm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    xf = x.float()
    out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float())


def test_a_bf16_output_whose_values_its_input_holds_by_chance_is_not_searched_for_runs(evidence: Evidence) -> None:
    """p36's RMSNorm in bf16: ~95% of its values are among its input's by chance (the order-free check's chance
    measure rejects them), none of its pairs of consecutive values: the windowed check does not run (before: its
    windows of 8, then of 32, on every evidence call: ~4 ms of a 0.5 ms call)."""
    x, w = torch.randn(TOKENS, HIDDEN).to(torch.bfloat16), (1 + 0.1 * torch.randn(HIDDEN)).to(torch.bfloat16)
    out = torch.empty(TOKENS, HIDDEN, dtype=torch.bfloat16)
    evidence.launch(rms_norm, x, w, out)
    assert evidence.copied(out) == 0.0
    assert not evidence.searched


def test_half_a_bf16_answer_copied_in_order_is_found_by_its_runs(evidence: Evidence) -> None:
    out, answer = torch.zeros(TOKENS, HIDDEN, dtype=torch.bfloat16), torch.randn(TOKENS, HIDDEN).to(torch.bfloat16)
    evidence.launch(copy_rows, answer, torch.arange(TOKENS // 2), out)
    assert 0.4 < evidence.copied(out) < 0.6
    assert evidence.searched  # once run() returned


def test_a_copy_skipped_for_what_its_arguments_hold_is_one_the_rule_cannot_judge() -> None:
    """A launch's copies are judged only where its arguments hold ``COPY_PRESENT`` of what it wrote: a launch copies no
    more than they hold, so a share skipped is below the margin the rule allows."""
    assert _provenance.COPY_PRESENT <= _coverage.COPIED_MARGIN


def copy_all(source: torch.Tensor, out: torch.Tensor) -> None:
    out[: source.shape[0]] = source


def test_a_launch_copying_what_an_earlier_launch_of_the_call_made_copies_nothing(evidence: Evidence) -> None:
    """A staging copy: one launch computes into a workspace, another copies it into the output. The workspace is the
    DSL's own result, no copy's source (rt14 F2: before, 1.0 on the draws, which made every later copy pass)."""
    x, w = torch.randn(TOKENS, HIDDEN), 1 + 0.1 * torch.randn(HIDDEN)
    staged, out = torch.zeros(TOKENS, HIDDEN), torch.zeros(TOKENS, HIDDEN)
    evidence.launch(rms_norm, x, w, staged)
    evidence.launch(copy_all, staged, out)
    assert evidence.copied(out) == 0.0


def test_an_answer_copied_through_two_workspaces_is_copied(evidence: Evidence) -> None:
    """A copy of a launch's copy is a copy: the first launch copied the answer, so what it left stays a source."""
    answer = torch.randn(TOKENS, HIDDEN)
    first, second, out = torch.zeros(TOKENS, HIDDEN), torch.zeros(TOKENS, HIDDEN), torch.zeros(TOKENS, HIDDEN)
    evidence.launch(copy_all, answer, first)
    evidence.launch(copy_all, first, second)
    evidence.launch(copy_all, second, out)
    assert evidence.copied(out) == 1.0


def test_a_copy_into_a_larger_buffer_is_judged_by_the_output_s_memory(evidence: Evidence) -> None:
    """The output a view of a buffer one row larger, or of the output's bytes as another dtype: no argument of the
    output's element count (rt14 F3: before, 0.0)."""
    answer = torch.randn(TOKENS, HIDDEN)
    buffer = torch.zeros(TOKENS + 1, HIDDEN)
    evidence.launch(copy_all, answer, buffer)
    assert evidence.copied(buffer[:TOKENS]) == 1.0


def test_a_copy_through_a_dtype_view_is_judged_by_the_output_s_memory(evidence: Evidence) -> None:
    answer, out = torch.randn(TOKENS, HIDDEN), torch.zeros(TOKENS, HIDDEN)
    evidence.launch(copy_all, answer.view(torch.int16), out.view(torch.int16))
    assert evidence.copied(out) == 1.0
