"""Plain eager PyTorch, no DSL kernel at all."""

# expect: not_dsl
# problem: p36
import torch


def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(hidden_states.dtype)
