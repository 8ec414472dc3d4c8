"""Sentence segmentation of natural-language skills (Markdown-ish text written by agents).

Headings are structure, not claims, so they are skipped; list items and paragraphs break sentences;
inside a paragraph a sentence ends at ``.``, ``!`` or ``?`` followed by space and a capital, digit or
quote — except after common abbreviations and inside decimals such as ``2.5x``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# only abbreviations that rarely end a sentence: "ms." and "etc." often do in skills
_ABBREVIATIONS = frozenset({"e.g", "i.e", "vs", "approx", "cf", "fig", "eq", "resp", "al", "incl", "esp"})
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s|={3,}\s*$|-{3,}\s*$)")
_BOUNDARY = re.compile(r"([.!?])([\"')\]]*)(\s+)(?=[\"'(\[]?[A-Z0-9])")


@dataclass(frozen=True, slots=True)
class Segment:
    """One sentence: its text (whitespace-normalised) and its character span in the source text."""

    text: str
    start: int
    end: int


def segment(text: str) -> list[Segment]:
    """The sentences of ``text`` in order, with spans into ``text``; headings and blank lines excluded."""
    segments: list[Segment] = []
    for block_start, block in _blocks(text):
        cut = 0
        for m in _BOUNDARY.finditer(block):
            end = m.end(2)
            if _is_abbreviation(block, m.start(1)):
                continue
            _emit(segments, block, block_start, cut, end)
            cut = m.end(3)
        _emit(segments, block, block_start, cut, len(block))
    return segments


def _blocks(text: str) -> list[tuple[int, str]]:
    """Paragraphs and list items as (offset, text): a bullet or blank line starts a new block."""
    blocks: list[tuple[int, str]] = []
    current_start: int | None = None
    current_end = 0
    offset = 0
    for line in text.splitlines(keepends=True):
        line_start, offset = offset, offset + len(line)
        stripped = line.strip()
        bullet = _BULLET.match(line)
        if not stripped or _HEADING.match(line) or bullet:
            if current_start is not None:
                blocks.append((current_start, text[current_start:current_end]))
                current_start = None
            if bullet and stripped:
                current_start = line_start + bullet.end()
                current_end = line_start + len(line.rstrip("\r\n"))
            continue
        if current_start is None:
            current_start = line_start + (len(line) - len(line.lstrip()))
        current_end = line_start + len(line.rstrip("\r\n"))
    if current_start is not None:
        blocks.append((current_start, text[current_start:current_end]))
    return blocks


def _is_abbreviation(block: str, dot: int) -> bool:
    if block[dot] != ".":
        return False
    word = re.search(r"([A-Za-z.]+)$", block[:dot])
    return word is not None and word.group(1).lower().rstrip(".") in _ABBREVIATIONS


def _emit(segments: list[Segment], block: str, block_start: int, lo: int, hi: int) -> None:
    piece = block[lo:hi]
    stripped = piece.strip()
    if not stripped:
        return
    lead = len(piece) - len(piece.lstrip())
    start = block_start + lo + lead
    segments.append(Segment(" ".join(stripped.split()), start, start + len(stripped)))
