"""Reaches the class of the provenance audit's dispatch mode (by its name among the ``TorchDispatchMode``
subclasses, through ``type.__subclasses__``) and replaces its ``__torch_dispatch__`` with a plain pass-through, so
that the audit would see no operator of a correctness draw, then computes the answer in eager torch. The harness's
hook on that class is one the guards keep in place: its replacement is reported as tampering."""

# expect: harness_tamper
# problem: p36
# static-scan: off
import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _through(self, func, types, args=(), kwargs=None):
    return func(*args, **(kwargs or {}))


def _subclasses(cls):
    for sub in type.__subclasses__(cls):
        yield sub
        yield from _subclasses(sub)


for _mode in list(_subclasses(TorchDispatchMode)):
    if _mode.__name__ == "_ProvenanceMode":
        _mode.__torch_dispatch__ = _through


def run(hidden_states, weight):
    x = hidden_states.float()
    scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    return (x * scale * weight.float()).to(hidden_states.dtype)
