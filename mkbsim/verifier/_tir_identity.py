"""A TIRx kernel's identity up to the sizes its parameters' buffers were specialised to: the kernel a launch kind names
(verifier README, "Timed calls run what the correctness draws checked"). Two modules built from the same TIR but for
another static row count, or built again on every call, are one kernel; a module of other TIR is another (red team
rt57 FP3: a kernel compiled per routed-token count was a new kernel on every count, so timed calls did not repeat a
draw's kinds; rt55 F2: a decoder launched in an honest kernel's place must stay another kernel)."""

from __future__ import annotations

from typing import Any

#: (its TVMScript's tokens, each (kind, text); the integer sizes of its parameters' buffers' shapes, in order)
Printed = tuple[tuple[tuple[int, str], ...], tuple[int, ...]]


def printed_kernel(
    mod: Any, *, _script: Any, _tokens: Any, _reader: Any, _NUMBER: int, _NAME: int, _OP: int, _int: Any, _len: Any,
    _enumerate: Any, _tuple: Any
) -> Printed:  # fmt: skip
    """``mod`` (a trusted PrimFunc or IRModule) as ``Printed``: each token's kind and text, no layout (the same kernel
    printed from two builds is the same text), and the integers in the first tuple of each parameter buffer, in the
    order they stand: a ``T.Buffer`` of a function's signature (TVM prints a parameter's ``match_buffer`` so), or a
    ``T.match_buffer`` of a bare handle. Not a name spelled ``Buffer`` (red team rt60 F2: a scratch buffer so named
    made its size a parameter's), nor a buffer of the body (``T.alloc_buffer``, a region's ``match_buffer``)."""
    tokens = _tuple((kind, text) for kind, text, *_ in _tokens(_reader(_script(mod)).readline))
    sizes: list[int] = []
    signature, depth = False, 0  # within a ``def``'s parameters; the parentheses open there
    for k, (kind, text) in _enumerate(tokens):
        if kind == _NAME and text == "def":
            signature, depth = True, 0
        elif signature and kind == _OP and text in "([":
            depth += 1
        elif signature and kind == _OP and text in ")]":
            depth -= 1
        elif signature and depth == 0 and kind == _OP and text == ":":
            signature = False
        if k < 2 or kind != _NAME or tokens[k - 2] != (_NAME, "T") or tokens[k - 1] != (_OP, "."):
            continue
        bare = k + 3 < _len(tokens) and tokens[k + 1] == (_OP, "(") and tokens[k + 2][0] == _NAME
        shaped = (text == "Buffer" and signature) or (text == "match_buffer" and bare and tokens[k + 3] == (_OP, ","))
        if not shaped:
            continue
        level, at = 0, k + 1
        while at < _len(tokens):  # the call's first parenthesised tuple: its integer literals
            kind_at, text_at = tokens[at]
            if kind_at == _OP and text_at in "([":
                level += 1
            elif kind_at == _OP and text_at in ")]":
                level -= 1
                if level <= 1:
                    break
            elif level == 2 and kind_at == _NUMBER and text_at.isdigit():
                sizes.append(_int(text_at))
            at += 1
    return tokens, _tuple(sizes)


def same_kernel(a: Printed, b: Printed, *, _len: Any, _zip: Any, _int: Any) -> bool:
    """Whether ``a`` and ``b`` are one kernel: the same tokens but integer literals, and where a literal differs, the
    pair is one the buffers' shapes make, a size of ``a``'s in the place ``b`` has the other (5 rows -> 7 rows: a
    ``range(5)`` that is ``range(7)`` in the other). A literal the same in both constrains nothing (``2 * col`` in a
    kernel for 2 rows); one that differs where no shape differs so is another kernel, a size elsewhere or not (red
    team rt59 F1: ``i < 64`` on the draws, ``i < 2`` on the timed calls, both sizes of a buffer of each)."""
    (tokens_a, sizes_a), (tokens_b, sizes_b) = a, b
    if _len(tokens_a) != _len(tokens_b) or _len(sizes_a) != _len(sizes_b):
        return False
    pairs = {(x, y) for x, y in _zip(sizes_a, sizes_b)}
    for (kind_a, text_a), (kind_b, text_b) in _zip(tokens_a, tokens_b):
        if kind_a != kind_b:
            return False
        if text_a == text_b:
            continue
        if not (text_a.isdigit() and text_b.isdigit()) or (_int(text_a), _int(text_b)) not in pairs:
            return False
    return True
