"""The decode rule's margins (verifier README "Decoded answers"): each submission verified, and the largest share of
a launch's changed elements the best map of its eager-made operands held for (``details.decoded``), against
``_decode.DECODE_SHARE``. Honest submissions must stay far under it, decodes far over it.

    python benchmarks/decode_margins.py FILE:PROBLEM ... [--backend cpu|cuda]

Prints one line per file: passed, failure, the largest share and its map, the launches judged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from mkbsim.verifier import VerifierSession, _decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="FILE:PROBLEM")
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dsl", default="tirx")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with VerifierSession(args.backend) as session:
        for case in args.cases:
            path, problem = case.rsplit(":", 1)
            print(f"verifying {path} ({problem})", file=sys.stderr)
            report = session.verify(Path(path), problem, args.dsl)
            decoded = report.details.get("decoded") or []
            judged = [r for r in decoded if not str(r[4]).startswith("not judged")]
            top = max(judged, key=lambda r: r[3], default=None)
            share, what = (top[3], top[4]) if top else (None, "no launch judged")
            print(
                f"{Path(path).name:50s} {problem:4s} passed={report.passed!s:5s} failure={report.failure!s:14s} "
                f"max_share={share if share is None else round(share, 4)!s:7s} "
                f"(line {_decode.DECODE_SHARE}) {what}; judged {len(judged)}/{len(decoded)}"
            )


if __name__ == "__main__":
    main()
