"""Counter-based random draws: every draw is addressed by (seed, purpose, indices), not by call order.

Addressing draws makes counterfactual runs paired: re-running a treatment with a filtered skill
reuses the very same implementation luck for the same plan and try, so the only difference between
the runs is what the skill said. It also makes an attempt's outcome independent of which other
attempts ran before it (subsets, reruns and parallel runs agree).
"""

from __future__ import annotations

import hashlib
import math

_MASK = (1 << 64) - 1
_TWO_PI = 2.0 * math.pi
_UNIT = 1.0 / 9007199254740992.0  # 2**-53


def seed_of(*parts: object) -> int:
    """A 64-bit seed from text parts (stable across processes, unlike ``hash``)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _mix(z: int) -> int:
    # splitmix64 finaliser: a bijection on 64-bit ints with full avalanche
    z = (z + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


class Draws:
    """Uniform and normal draws addressed by integer keys under one seed."""

    __slots__ = ("seed",)

    def __init__(self, seed: int) -> None:
        self.seed = seed & _MASK

    def _prefix(self, key: tuple[int, ...]) -> int:
        # _mix folded over the key, written out: draws are the simulator's hottest path
        z = self.seed
        for k in key:
            z = ((z ^ (k & _MASK)) + 0x9E3779B97F4A7C15) & _MASK
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
            z ^= z >> 31
        return z

    def _bits(self, key: tuple[int, ...]) -> int:
        return _mix(self._prefix(key))

    def uniform(self, *key: int) -> float:
        """A float in [0, 1)."""
        return (_mix(self._prefix(key)) >> 11) * _UNIT

    def normal(self, *key: int) -> float:
        """A standard normal (Box-Muller on two addressed uniforms: keys ``(*key, 1)`` and ``(*key, 2)``)."""
        z = self._prefix(key)
        u1 = 1.0 - (_mix(_mix(z ^ 1)) >> 11) * _UNIT
        u2 = (_mix(_mix(z ^ 2)) >> 11) * _UNIT
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)

    def child(self, *key: int) -> Draws:
        """An independent stream for a sub-purpose."""
        return Draws(self._bits(key))
