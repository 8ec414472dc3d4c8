"""One attempt's trajectory up to the replay cursor: agent steps, submissions, expandable verifier results.

The pane shows the latest events up to the cursor, newest at the bottom (the mouse wheel looks further
back). It draws its own lines (Textual's Line API) from per-event line caches, so a step renders one
or two events and repaints this pane alone: no relayout, whatever the trajectory's length.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.strip import Strip
from textual.widget import Widget

from mkbsim.lab import Trajectory, TrajectoryEvent
from tui import format as fmt

_KIND_STYLES = {"llm": "cyan", "command": "bold", "observation": "dim", "note": "italic yellow"}
_KIND_TAGS = {"llm": "llm ", "command": "cmd ", "observation": "obs ", "note": "note"}
_WHEEL_LINES = 3


class TrajectoryView(Widget):
    DEFAULT_CSS = """
    TrajectoryView { border: round $primary-darken-2; height: 1fr; }
    TrajectoryView.current { border: round $accent; }
    """

    def __init__(self, side: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.side = side
        self._trajectory: Trajectory | None = None
        self._upto = -1
        self._current = False
        self._expanded: frozenset[int] = frozenset()
        self._missing = ""
        self._back = 0  # lines scrolled back from the newest
        self._lines: list[Strip] = []
        self._event_lines: dict[tuple[int, bool, bool, int], list[Strip]] = {}

    def show(
        self,
        trajectory: Trajectory | None,
        upto: int,
        *,
        current: bool,
        expanded: Collection[int],
        title: str,
        missing: str,
    ) -> None:
        """Events ``0..upto`` (inclusive; -1 = none yet); ``current`` marks the last as the cursor's event."""
        self.border_title = title
        self.set_class(current, "current")
        shown = frozenset(expanded)
        same_trajectory = trajectory is self._trajectory
        if same_trajectory and (upto, current, shown, missing) == (self._upto, self._current, self._expanded,
                                                                   self._missing):  # fmt: skip
            return
        if not same_trajectory:
            self._event_lines.clear()
        if not same_trajectory or upto != self._upto:
            self._back = 0
        self._trajectory, self._upto, self._current, self._expanded, self._missing = (
            trajectory, upto, current, shown, missing
        )  # fmt: skip
        self._layout_lines()

    # -- drawing ------------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._event_lines.clear()
        self._layout_lines()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._back += _WHEEL_LINES
        self._layout_lines()
        event.stop()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._back = max(0, self._back - _WHEEL_LINES)
        self._layout_lines()
        event.stop()

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        base = self.rich_style
        if y >= len(self._lines):
            return Strip.blank(width, base)
        line = self._lines[y]
        return Strip(list(Segment.apply_style(line, base)), line.cell_length).adjust_cell_length(width, base)

    def _layout_lines(self) -> None:
        """The lines in view: the events before the cursor, newest at the bottom, ``_back`` lines back."""
        width, height = self.content_region.width, self.content_region.height
        if width <= 0 or height <= 0:
            return
        trajectory = self._trajectory
        if trajectory is None or self._upto < 0:
            message = self._missing if trajectory is None else "(not started yet at this point)"
            self._lines = self._text_lines(Text(message, style="dim italic"), width)
            self.refresh()
            return
        wanted = height + self._back
        collected: list[Strip] = []
        index = self._upto
        while index >= 0 and len(collected) < wanted:
            collected[:0] = self._lines_of(trajectory, index, width)
            index -= 1
        self._back = min(self._back, max(0, len(collected) - height))
        end = len(collected) - self._back
        self._lines = collected[max(0, end - height) : end]
        self.refresh()

    def _lines_of(self, trajectory: Trajectory, index: int, width: int) -> list[Strip]:
        current = self._current and index == self._upto
        key = (index, index in self._expanded, current, width)
        lines = self._event_lines.get(key)
        if lines is None:
            text = self._event(trajectory.events[index], index, expanded=index in self._expanded)
            if current:
                text.stylize("reverse", 0, len(text.plain.split("\n", 1)[0]))
            lines = self._event_lines[key] = self._text_lines(text, width)
        return lines

    def _text_lines(self, text: Text, width: int) -> list[Strip]:
        console = self.app.console
        rendered = console.render_lines(text, console.options.update(width=width, height=None), pad=False)
        return [Strip(line) for line in rendered]

    # -- events as text -----------------------------------------------------------------------

    def _event(self, event: TrajectoryEvent, index: int, *, expanded: bool) -> Text:
        p = event.payload
        clock = Text(f"{fmt.agent_clock(event.clock_s)} ", style="dim")
        if event.type == "AgentStep":
            kind = str(p.get("kind", ""))
            return Text.assemble(clock, (_KIND_TAGS.get(kind, kind[:4]), _KIND_STYLES.get(kind, "")), " ",
                                 (str(p.get("content", "")), _KIND_STYLES.get(kind, "")))  # fmt: skip
        if event.type == "SubmissionMade":
            counted = "counted" if p.get("counted") else "not counted"
            lines = len(str(p.get("code", "")).splitlines())
            size = f"{lines} line{'' if lines == 1 else 's'}"
            return Text.assemble(clock, (f"▶ submission {p.get('submission')}", "bold magenta"),
                                 f" ({counted}, {size}, sha {str(p.get('code_sha256', ''))[:8]})")  # fmt: skip
        if event.type == "VerifierResult":
            return self._verdict(clock, p, index, expanded=expanded)
        if event.type == "SkillRead":
            header = f"⇢ read the transferred skill ({len(str(p.get('text', '')))} chars"
            suffix = f", filter {p['filter']})" if p.get("filter") else ")"
            return Text.assemble(clock, (header + suffix, "bold blue"))
        if event.type == "SkillWritten":
            return Text.assemble(clock, (f"✎ wrote its skill ({len(str(p.get('text', '')))} chars)", "blue"))
        if event.type == "AttemptStarted":
            budget = p.get("budget") or {}
            limits = ", ".join(f"{k} {v}" for k, v in budget.items())
            return Text.assemble(clock, ("■ started", "bold"), f" {fmt.DSL_NAMES.get(str(p.get('dsl')), '')}"
                                 f" · {p.get('arm')} · budget {limits or '—'}")  # fmt: skip
        if event.type == "AttemptFinished":
            outcome = fmt.verdict(p.get("passed"), p.get("speedup"))
            note = " (skipped: no skill to read)" if p.get("skipped") else ""
            return Text.assemble(clock, (f"■ finished ({p.get('status')}): ", "bold"), outcome, note)
        return Text.assemble(clock, event.type)

    def _verdict(self, clock: Text, p: dict[str, Any], index: int, *, expanded: bool) -> Text:
        label = "final verdict" if p.get("submission") == "final" else f"verifier #{p.get('submission')}"
        toggle = Style(meta={"@click": f"screen.toggle_result({self.side}, {index})"})
        if p.get("passed"):
            runtime = p.get("runtime_ms")
            result = Text(f"✓ passed {runtime:.4g} ms · {fmt.speedup(p.get('speedup'))}" if runtime else "✓ passed",
                          style="green")  # fmt: skip
        else:
            result = Text(f"✗ {p.get('failure') or 'failed'}", style="red")
        text = Text.assemble(clock, ("▾ " if expanded else "▸ ", toggle), (label, Style(bold=True) + toggle), ": ",
                             result)  # fmt: skip
        if expanded:
            details = [
                ("backend", p.get("backend")), ("protocol", p.get("protocol")), ("correct", p.get("correct")),
                ("bypass ok", p.get("bypass_ok")), ("inline CUDA", p.get("inline_cuda")),
                ("forbidden", ", ".join(map(str, p.get("forbidden") or [])) or "none"),
                ("runtime ms", p.get("runtime_ms")), ("eager ms", p.get("eager_ms")),
                ("failure", p.get("failure")),
                *((f"details.{k}", v) for k, v in (p.get("details") or {}).items()),
                *((f"env.{k}", v) for k, v in (p.get("env") or {}).items()),
            ]  # fmt: skip
            for key, value in details:
                text.append(f"\n      {key}: ", style="dim")
                text.append("—" if value is None else str(value))
        return text

    @property
    def text(self) -> str:
        """The plain text in view."""
        return "\n".join(line.text.rstrip() for line in self._lines)
