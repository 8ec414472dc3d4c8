"""Replay: a comparison's solo and skill-conditioned trajectories side by side, stepped one event at a
time on the agents' clocks, with the transferred skill beside them (sentences coloured by rubric
category, marked where the attempt followed them) and expandable verifier results."""

from __future__ import annotations

import bisect
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Static

from mkbsim.lab import ComparisonQuery, Trajectory
from mkbsim.metrics import DIRECTIONS, Comparison
from tui import format as fmt
from tui.data.replay import (
    BASELINE,
    TREATMENT,
    SkillSentence,
    merge_timeline,
    skill_sentences,
    submission_stops,
)
from tui.messages import OpenComparison
from tui.screens.base import StoreScreen
from tui.widgets.key_bar import KeyBar
from tui.widgets.nav_bar import NavBar
from tui.widgets.skill_view import SkillView
from tui.widgets.trajectory import TrajectoryView


class ReplayScreen(StoreScreen):
    HELP = """\
## Replay

The target-DSL solo attempt (left) and the skill-conditioned attempt (middle) of one comparison,
merged on the agents' own clocks: each step shows one more event of whichever attempt acted next, so
both panes show what each attempt had done by the same time. The right pane is the skill the
attempt read, sentence by sentence, tagged and coloured by rubric category; ✓ / ✗ / ↻ are the
labelled decisions (adopted, ignored, re-verified) and a sentence turns bold, with its time, once the
replay reaches the step where the attempt acted on it. `n` / `p` jump to the next / previous
submission's verdict (either attempt); `x` expands the latest verifier result (or click one); `X`
expands them all; `o` opens the same problem's comparison in the other direction.
"""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,l", "step(1)", "Step"),
        Binding("left,h", "step(-1)", "Back"),
        Binding("n,right_square_bracket", "submission(1)", "Next submission"),
        Binding("p,left_square_bracket", "submission(-1)", "Prev submission"),
        Binding("home", "jump(0)", "Start", show=False),
        Binding("end", "jump(-1)", "End", show=False),
        Binding("x", "expand_latest", "Expand result"),
        Binding("X", "expand_all", "Expand all", show=False),
        Binding("o", "reverse", "Other direction"),
        Binding("f", "first_harmed", "First harmed", show=False),
        Binding("escape", "back", "Back to table"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.comparison: Comparison | None = None
        self.sides: tuple[Trajectory | None, Trajectory | None] = (None, None)
        self.timeline: list[tuple[int, int]] = []
        self.stops: list[int] = []
        self.sentences: list[SkillSentence] = []
        self.cursor = -1
        self.expanded: tuple[set[int], set[int]] = (set(), set())

    def compose(self) -> ComposeResult:
        yield NavBar("replay")
        yield Static(id="replay-header")
        with Horizontal(id="replay-body"):
            yield TrajectoryView(BASELINE, id="baseline")
            yield TrajectoryView(TREATMENT, id="treatment")
            yield SkillView(id="skill")
        yield KeyBar()

    def reload(self) -> None:
        """A replay shows finished history; when the store moves only the open comparison's row may change."""
        if self.comparison is not None:
            self.open(self.comparison.treatment_attempt_id, keep_cursor=True)
        else:
            self._draw()

    def open(self, treatment_attempt_id: str, *, keep_cursor: bool = False) -> None:
        comparison = self.lab.comparisons.get(treatment_attempt_id)
        if comparison is None:
            self.notify(f"no comparison for attempt {treatment_attempt_id}", severity="warning")
            return
        same = self.comparison is not None and self.comparison.treatment_attempt_id == treatment_attempt_id
        self.comparison = comparison
        trajectories = self.lab.trajectories
        self.sides = (trajectories.load(comparison.baseline_attempt_id),
                      trajectories.load(comparison.treatment_attempt_id))  # fmt: skip
        self.timeline = merge_timeline(self.sides)
        self.stops = submission_stops(self.timeline, self.sides)
        treatment = self.sides[TREATMENT]
        self.sentences = skill_sentences(treatment) if treatment else []
        if not (keep_cursor and same):
            self.cursor = 0 if self.timeline else -1
            self.expanded = (set(), set())
        self.cursor = min(self.cursor, len(self.timeline) - 1)
        self._draw()

    # -- actions ------------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self._move(self.cursor + delta)

    def action_jump(self, index: int) -> None:
        self._move(index if index >= 0 else len(self.timeline) - 1)

    def action_submission(self, direction: int) -> None:
        if direction > 0:
            k = bisect.bisect_right(self.stops, self.cursor)
            target = self.stops[k] if k < len(self.stops) else None
        else:
            k = bisect.bisect_left(self.stops, self.cursor) - 1
            target = self.stops[k] if k >= 0 else None
        if target is not None:
            self._move(target)

    def action_expand_latest(self) -> None:
        for i in range(self.cursor, -1, -1):
            side, index = self.timeline[i]
            trajectory = self.sides[side]
            if trajectory is not None and trajectory.events[index].type == "VerifierResult":
                self.action_toggle_result(side, index)
                return

    def action_expand_all(self) -> None:
        shown = [
            (side, index)
            for side, index in self.timeline[: self.cursor + 1]
            if (t := self.sides[side]) is not None and t.events[index].type == "VerifierResult"
        ]
        collapse = all(index in self.expanded[side] for side, index in shown)
        for side, index in shown:
            (self.expanded[side].discard if collapse else self.expanded[side].add)(index)
        self._draw()

    def action_toggle_result(self, side: int, index: int) -> None:
        expanded = self.expanded[side]
        if index in expanded:
            expanded.discard(index)
        else:
            expanded.add(index)
        self._draw()

    def action_reverse(self) -> None:
        if self.comparison is None:
            return
        other = self.lab.comparisons.reverse_of(self.comparison)
        if other is None:
            self.notify("no comparison in the other direction", severity="warning")
        else:
            self.open(other.treatment_attempt_id)

    def action_first_harmed(self) -> None:
        first = self.lab.comparisons.first(ComparisonQuery(harmed_only=True))
        if first is not None:
            self.post_message(OpenComparison(first.treatment_attempt_id))
        else:
            self.notify("no harmed comparison in this store", severity="information")

    def action_back(self) -> None:
        self.mkbsim.goto_mode("comparisons")

    def _move(self, cursor: int) -> None:
        if not self.timeline:
            return
        cursor = max(0, min(cursor, len(self.timeline) - 1))
        if cursor != self.cursor:
            self.cursor = cursor
            self._draw()

    # -- drawing ------------------------------------------------------------------------------

    def _draw(self) -> None:
        header = self.query_one("#replay-header", Static)
        c = self.comparison
        if c is None:
            header.update(Text.assemble(
                ("No comparison open. ", "bold"),
                "Choose one in Comparisons (press 2, then Enter), or press f for the first harmed comparison.",
            ), layout=False)  # fmt: skip
            for side, view in enumerate(self.query(TrajectoryView)):
                view.show(None, -1, current=False, expanded=(), title=("Solo", "Skill-conditioned")[side],
                          missing="—")  # fmt: skip
            self.query_one(SkillView).show_reading([], -1, title="Transferred skill")
            return
        upto = [-1, -1]
        for side, index in self.timeline[: self.cursor + 1]:
            upto[side] = index
        current_side = self.timeline[self.cursor][0] if self.cursor >= 0 else None
        source_dsl, target_dsl = DIRECTIONS.get(c.direction, ("?", "?"))
        target = fmt.DSL_NAMES.get(target_dsl, target_dsl)
        for side, view in enumerate(self.query(TrajectoryView)):
            attempt_id = (c.baseline_attempt_id, c.treatment_attempt_id)[side]
            passed = (c.baseline_passed, c.treatment_passed)[side]
            speedup = (c.baseline_speedup, c.treatment_speedup)[side]
            label = ("Solo", "Skill-conditioned")[side]
            title = f"{label} {target} · {fmt.verdict(passed, speedup).plain}"
            view.show(self.sides[side], upto[side], current=current_side == side, expanded=self.expanded[side],
                      title=title, missing=f"no events for attempt {attempt_id or '(none)'}")  # fmt: skip
        source = fmt.verdict(c.source_passed, c.source_speedup).plain
        self.query_one(SkillView).show_reading(
            self.sentences, upto[TREATMENT],
            title=f"Skill read, from the {fmt.DSL_NAMES.get(source_dsl, source_dsl)} source · {source}",
        )  # fmt: skip
        header.update(self._header(c), layout=False)  # a fixed 3-line box: no relayout per step

    def _header(self, c: Comparison) -> Group:
        treatment = self.sides[TREATMENT]
        labels = treatment.labels.get("comparison", {}) if treatment else {}
        first = Text.assemble(
            (f"{c.problem}", "bold"), f" · {c.family} · ", (c.model, "bold"), " · ",
            (fmt.DIRECTION_NAMES.get(c.direction, c.direction), "bold"), f" · replicate {c.replicate}",
            f" · {c.campaign_id}", f" · {c.filter}" if c.filter else "",
        )  # fmt: skip
        second = Text.assemble(
            f"r {fmt.ratio(c.r)} ", fmt.outcome(c.outcome), " · verdict change ", fmt.verdict_change(c.verdict_change),
            " · source ", fmt.standing(c.standing),
            f" (tiers: source {_tier(c.source_tier)}, solo {_tier(c.baseline_tier)}, skill {_tier(c.treatment_tier)})",
        )  # fmt: skip
        if labels.get("follow"):
            second.append(f" · follow {labels['follow']}")
        if labels.get("cause"):
            second.append(" · cause ")
            second.append(str(labels["cause"]), style="bold red")
        clock = None
        if self.cursor >= 0:
            side, index = self.timeline[self.cursor]
            trajectory = self.sides[side]
            clock = trajectory.events[index].clock_s if trajectory is not None else None
        third = Text(
            f"event {self.cursor + 1}/{len(self.timeline)} · agent clock {fmt.agent_clock(clock)} · "
            f"verdicts {bisect.bisect_right(self.stops, self.cursor)}/{len(self.stops)}",
            style="dim",
        )
        return Group(first, second, third)


def _tier(value: int | None) -> str:
    return "—" if value is None else str(value)
