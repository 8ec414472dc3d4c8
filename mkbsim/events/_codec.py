"""Payload JSON (DESIGN §3: ``payload TEXT``, a JSON object), encoded and decoded with msgspec.

msgspec's C encoder and decoder are 3–4× faster than the standard library's and agree with it where
payloads need it: integers of any size both ways, non-string dict keys written as strings, UTF-8 text
kept as it is. Two differences are handled here or in validation: a subclass of float, str or int
(``numpy.float64``, a ``str`` subclass; enums msgspec writes itself) is written as its plain value, as
``json`` does; NaN and infinities, which msgspec would write as ``null``, are refused by payload
validation (``mkbsim.events._schema``) before anything is encoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec


def _plain_value(value: Any) -> Any:
    # the base class's own conversion: it returns the plain value whatever the subclass overrides
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_encoder = msgspec.json.Encoder(enc_hook=_plain_value)
_decoder = msgspec.json.Decoder()

#: Raised by ``encode`` for a value JSON cannot hold, and by ``decode`` for text that is not JSON.
CodecError = (TypeError, ValueError, msgspec.EncodeError, msgspec.DecodeError)


def encode(payload: Any) -> str:
    """Compact JSON text of ``payload`` (keys in insertion order, no spaces)."""
    return _encoder.encode(payload).decode()


def encode_many(payloads: Sequence[Any]) -> list[str]:
    """``encode`` of each payload (a batch append): the encoder's own method called in one comprehension,
    without a Python call per payload around it."""
    encode_one = _encoder.encode
    return [encode_one(payload).decode() for payload in payloads]


def decode(text: str | bytes) -> Any:
    """The value of JSON ``text``."""
    return _decoder.decode(text)
