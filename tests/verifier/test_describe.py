"""What the harness reads of run()'s result (DESIGN §5): a tuple subclass (a NamedTuple) is a tuple, its items
read through tuple's own iterator, never a method the subclass defines."""

from __future__ import annotations

from typing import NamedTuple

import torch

from mkbsim.verifier._worker import describe


class QKV(NamedTuple):
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


class Lying(tuple):
    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((torch.zeros(1),) * 3)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        return torch.zeros(1)


def test_a_namedtuple_is_a_tuple_of_its_items() -> None:
    q, k, v = torch.ones(2), torch.ones(3), torch.ones(4)
    facts, items = describe(QKV(q, k, v), 3)
    assert facts["container"] == "tuple"
    assert items[0] is q and items[1] is k and items[2] is v


def test_a_tuple_subclass_s_own_methods_are_not_used() -> None:
    q, k, v = torch.ones(2), torch.ones(3), torch.ones(4)
    _, items = describe(Lying((q, k, v)), 3)
    assert items[0] is q and items[1] is k and items[2] is v


def test_a_list_is_not_a_tuple() -> None:
    facts, items = describe([torch.ones(2), torch.ones(2)], 2)
    assert facts["container"] == "list" and items == []
