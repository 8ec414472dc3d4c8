"""The decode rule's margins (verifier README "Decoded answers"): each submission verified, and the largest score of
a launch's changed elements under the best map of its eager-made operands (``details.decoded``: the share of the
held-out sample it holds for, beyond chance), against ``_decode.DECODE_SHARE``. Honest submissions must stay far
under it, decodes far over it. Every kind of map is tried (values, bits, moved runs, all operands together); the line
names the one that scored best.

    python benchmarks/decode_margins.py FILE:PROBLEM ... [--backend cpu|cuda]
    python benchmarks/decode_margins.py --cost 1280 131072 1048576
    python benchmarks/decode_margins.py --cost-keyed 1280 131072 1048576
    python benchmarks/decode_margins.py --inputs
    python benchmarks/decode_margins.py --contrast 256 2048 8192 [--seeds 20]

Prints one line per file: passed, failure, the largest score and its map, the launches judged. ``--cost``: the rule's
time on one launch of that many changed elements (an honest residual epilogue over an eager GEMM's result, beside the
output's fresh buffer; a decode; rows of 64 moved), CPU, best of three, per audited draw. ``--cost-keyed``: the
same epilogue's time under the decode rule's maps and under the position-key test (``_keyed``: the sample the first
draw keeps, the comparison each later draw makes), and an integer epilogue's under the maps (the bit maps, odd factors
among them). ``--inputs``: the scores a
problem input would get as a regressor (what the rule does not do): an honest residual epilogue against a decode
mixing in that input. ``--contrast``: what the maps under half (``fitted``'s ``peeled``, which an evidence call's
launch is held to against the draws', ``DECODE_CONTRAST``) measure on outputs of that many elements, over seeds: an
honest integer output beside an eager operand of small integers (chance maps), with and without
``DECODE_CONTRAST_SIGMAS``; an eighth of a bfloat16 output decoded from an eager operand whose other elements are
fresh memory (NaN) or noise (another answer), the rest honest; the lower bound against ``DECODE_CONTRAST``.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

from mkbsim.verifier import VerifierSession, _decode, _keyed


def _margins(cases: list[str], backend: str, dsl: str) -> None:
    with VerifierSession(backend) as session:
        for case in cases:
            path, problem = case.rsplit(":", 1)
            print(f"verifying {path} ({problem})", file=sys.stderr)
            report = session.verify(Path(path), problem, dsl)
            decoded = report.details.get("decoded") or []
            judged = [r for r in decoded if not str(r[4]).startswith("not judged")]
            top = max(judged, key=lambda r: r[3], default=None)
            share, what = (top[3], top[4]) if top else (None, "no launch judged")
            print(
                f"{Path(path).name:50s} {problem:4s} passed={report.passed!s:5s} failure={report.failure!s:14s} "
                f"max_share={share if share is None else round(share, 4)!s:7s} "
                f"(line {_decode.DECODE_SHARE}) {what}; judged {len(judged)}/{len(decoded)}"
            )
            if not report.passed:  # which rule, in the verifier's words (a cuda failure cannot be re-run cheaply)
                print("    " + " ".join(report.feedback.split())[:600])


def _fit(y: torch.Tensor, operands: list[torch.Tensor]) -> tuple[float, Any]:
    """The best of three CPU times of one launch's judgement (ms), and its result."""
    changed = torch.ones(y.numel(), dtype=torch.bool)
    best, found = float("inf"), None
    for _ in range(3):
        start = time.thread_time()  # the thread's CPU time: the machine's load does not inflate it
        found = _decode.fitted(_decode.bound(), y, changed, operands, torch.Generator().manual_seed(5))
        best = min(best, (time.thread_time() - start) * 1e3)
    return best, found


def _cost(sizes: list[int]) -> None:
    g = torch.Generator().manual_seed(1)
    for n in sizes:
        acc, residual = torch.randn(n, generator=g) * 10, torch.randn(n, generator=g) * 10
        fresh = torch.full((n,), float("nan"))
        honest, found = _fit((acc + residual).bfloat16(), [acc, fresh])
        decode, _ = _fit((acc * 3 / 3).bfloat16(), [acc * 3, fresh])
        # rows of 64 moved in reverse order (a moved map: its index, then every changed element's source)
        moved, by_rows = _fit(acc.view(-1, 64).flip(0).reshape(-1).bfloat16(), [acc, fresh])
        score = found[1] if found else None
        print(
            f"{n:9d} elements: honest epilogue {honest:8.1f} ms (score {score}), decode {decode:8.1f} ms, rows moved "
            f"{moved:8.1f} ms (score {by_rows[1] if by_rows else None})"
        )


def _best_of_three(work: Any) -> tuple[float, Any]:
    """The best of three CPU times of ``work()`` (ms), and its result."""
    best, found = float("inf"), None
    for _ in range(3):
        start = time.thread_time()
        found = work()
        best = min(best, (time.thread_time() - start) * 1e3)
    return best, found


def _keyed_cost(sizes: list[int]) -> None:
    """Per launch of ``n`` changed elements: the maps (``fitted``) and the position-key test (``_keyed``) of an honest
    float32 residual epilogue on two draws, and the maps of an int64 one (slots plus a page base, the input)."""
    d = _keyed.bound(_decode.bound())
    for n in sizes:
        draws = []
        for seed in (1, 2):
            g = torch.Generator().manual_seed(seed)
            acc, residual = torch.randn(n, generator=g) * 10, torch.randn(n, generator=g) * 10
            draws.append((acc + residual, [(0, acc), (1, torch.full((n,), float("nan")))], [(2, residual)]))
        changed = torch.ones(n, dtype=torch.bool)
        maps, _ = _fit(draws[0][0], [r for _, r in draws[0][1]])
        first, later = draws
        kept, made = _best_of_three(partial(_keyed.kept, d, first[0], changed, *first[1:], torch.Generator()))
        judged, (found, _) = _best_of_three(partial(_keyed.judged, d, later[0], changed, *later[1:], made[0]))
        g = torch.Generator().manual_seed(3)
        slots = torch.randint(0, 1 << 20, (n,), generator=g)
        ints, _ = _fit(slots + torch.randint(0, 1 << 20, (n,), generator=g) * 16, [slots, torch.zeros(n).long()])
        print(
            f"{n:9d} elements: float32 epilogue, maps {maps:8.1f} ms, position keys kept {kept:6.2f} ms, judged "
            f"{judged:6.2f} ms (score {found[0] if found else None}); int64 epilogue, maps {ints:8.1f} ms"
        )


def _inputs() -> None:
    """Problem inputs as regressors: the rule would hold an honest residual epilogue as it holds the decode."""
    g = torch.Generator().manual_seed(2)
    acc, x = torch.randn(64, 96, generator=g) * 10, torch.randn(64, 96, generator=g) * 10
    answer = acc + x
    cases = {
        "honest: eager GEMM acc, the kernel adds the residual input x": ((acc + x).bfloat16(), [acc, x]),
        "decode: eager e = 3y - x, the kernel computes (e + x) / 3": (((3 * answer - x) + x) / 3, [3 * answer - x, x]),
    }
    for name, (y, operands) in cases.items():
        _, found = _fit(y.bfloat16(), operands)
        print(f"{name}: score {found[1]:.3f} ({found[2]}) with x as a regressor")


def _contrast(sizes: list[int], seeds: int) -> None:
    """``--contrast``: the lower bound of the maps under half, per case and size, over ``seeds`` seeds."""

    def integers(n: int, g: torch.Generator) -> tuple[torch.Tensor, list[torch.Tensor]]:
        return torch.randint(0, 4, (n,), generator=g, dtype=torch.int32), [
            torch.randint(0, 4, (n,), generator=g, dtype=torch.int32)
        ]

    def eighth(n: int, g: torch.Generator, rest: str) -> tuple[torch.Tensor, list[torch.Tensor]]:
        answer, other, honest = (torch.randn(n, generator=g) * 3 for _ in range(3))
        decoded = torch.arange(n) >= n - n // 8
        filler = torch.full((n,), float("nan")) if rest == "fresh" else other
        stored = torch.where(decoded, answer.bfloat16().float(), filler) * 2 + 1
        return torch.where(decoded, (stored - 1) / 2, honest).bfloat16(), [stored]

    cases = {
        "honest int32 ids beside eager ids (chance maps)": integers,
        "an eighth decoded beside fresh memory": lambda n, g: eighth(n, g, "fresh"),
        "an eighth decoded beside noise": lambda n, g: eighth(n, g, "noise"),
    }
    for name, make in cases.items():
        for n in sizes:
            rows = []
            for sigmas in (_decode.DECODE_CONTRAST_SIGMAS, 0.0):
                lows, unions = [], []
                for seed in range(seeds):
                    y, operands = make(n, torch.Generator().manual_seed(seed))
                    d = _decode.bound()
                    d.contrast_sigmas = sigmas
                    found = _decode.fitted(d, y, torch.ones(n, dtype=torch.bool), operands,
                                           torch.Generator().manual_seed(seed))  # fmt: skip
                    peeled = found[3] if found is not None else None
                    lows.append(peeled[1] if peeled is not None else 0.0)
                    held = peeled[0] if peeled is not None else None
                    unions.append(float(held.float().mean()) if held is not None else 0.0)
                over = sum(low >= _decode.DECODE_CONTRAST for low in lows)
                rows.append(
                    f"{sigmas:.0f} errors: lower bound {min(lows):.3f}-{max(lows):.3f}, over {_decode.DECODE_CONTRAST} "
                    f"in {over}/{seeds}, peeled {min(unions):.2f}-{max(unions):.2f}"
                )
            print(f"{name:50s} {n:6d}: " + "; ".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="FILE:PROBLEM")
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dsl", default="tirx")
    parser.add_argument("--cost", nargs="+", type=int, metavar="ELEMENTS", help="time the rule on one launch")
    parser.add_argument("--cost-keyed", nargs="+", type=int, metavar="ELEMENTS", help="maps vs position keys")
    parser.add_argument("--inputs", action="store_true", help="scores with a problem input as a regressor")
    parser.add_argument("--contrast", nargs="+", type=int, metavar="ELEMENTS", help="the maps under half's bounds")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.cost:
        _cost(args.cost)
    if args.cost_keyed:
        _keyed_cost(args.cost_keyed)
    if args.inputs:
        _inputs()
    if args.contrast:
        _contrast(args.contrast, args.seeds)
    if args.cases:
        _margins(args.cases, args.backend, args.dsl)


if __name__ == "__main__":
    main()
