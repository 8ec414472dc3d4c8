"""A skill as its sentences, each tagged and coloured by rubric category (DESIGN §7), optionally marked
with what a reading attempt did with it."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from mkbsim.claims import extract_claims
from tui import format as fmt
from tui.data.replay import SkillSentence

_DECISION_MARKS = {"adopted": ("✓", "bold green"), "ignored": ("✗", "dim"), "reverified": ("↻", "cyan")}


def legend() -> Text:
    return Text(" ").join(
        Text.assemble((tag, f"bold {colour}"), (f" {category.replace('_', ' ')}", "dim"))
        for category, (tag, colour) in fmt.CATEGORY_STYLES.items()
    )


def sentence_line(tag_category: str, text: str, *, marker: tuple[str, str] = (" ", ""), bold: bool = False) -> Text:
    _, colour = fmt.CATEGORY_STYLES.get(tag_category, ("???", "white"))
    line = Text.assemble((marker[0], marker[1]), " ", fmt.category_tag(tag_category), " ")
    line.append(text, style=f"{colour}{' bold' if bold else ''}")
    return line


class SkillView(VerticalScroll):
    DEFAULT_CSS = """
    SkillView { border: round $secondary-darken-1; height: 1fr; }
    SkillView > Static { width: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Static()

    def show_text(self, text: str, *, title: str, empty: str = "No skill.") -> None:
        """Every sentence of ``text`` with its category (the claim extractor's classification)."""
        self.border_title = title
        self._shown = None
        claims = extract_claims(text)
        if not claims:
            self.query_one(Static).update(Text(empty, style="dim italic"))
            return
        self.query_one(Static).update(Group(*(sentence_line(c.category, c.text) for c in claims), Text(""), legend()))

    def show_reading(self, sentences: Sequence[SkillSentence], reached: int, *, title: str) -> None:
        """The read skill's sentences; a sentence the attempt quoted by event ``reached`` is marked followed.

        Markers: ✓ adopted, ✗ ignored, ↻ re-verified (the labeller's decision); ○ followed later in the
        attempt; once the replay reaches the step that quotes a sentence, that step's time.
        """
        self.border_title = title
        # stepping changes this pane only when the replay reaches a step that quotes a sentence
        shown = tuple((s.claim.text, s.decision, s.cited_at, s.cited_at is not None and s.cited_at <= reached)
                      for s in sentences)  # fmt: skip
        if shown == self._shown:
            return
        self._shown = shown
        if not sentences:
            self.query_one(Static).update(Text("The attempt read no skill.", style="dim italic"))
            return
        lines = []
        for s in sentences:
            if s.header:
                lines.append(Text(f"  {s.claim.text}", style="dim italic"))
                continue
            reached_citation = s.cited_at is not None and s.cited_at <= reached
            marker = _DECISION_MARKS.get(s.decision or "", (" ", ""))
            if s.followed and not reached_citation:
                marker = ("○", "green")
            line = sentence_line(s.claim.category, s.claim.text, marker=marker, bold=s.followed and reached_citation)
            if reached_citation:
                when = fmt.agent_clock(s.cited_clock_s)
                line.append(f"  ← followed at {when}" if s.followed else f"  ← set aside at {when}",
                            style="bold green" if s.followed else "dim")  # fmt: skip
            lines.append(line)
        self.query_one(Static).update(Group(*lines, Text(""), legend()))
