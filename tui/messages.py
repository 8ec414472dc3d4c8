"""Messages between the store watcher, the app and the screens."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from tui.data.watcher import LiftUpdate, StoreState

if TYPE_CHECKING:
    from mkbsim.lab import Lab


class LabOpened(Message):
    """The watcher's read model is current (or moved its views): the app reads through it from now on."""

    def __init__(self, lab: Lab) -> None:
        super().__init__()
        self.lab = lab


class StoreChanged(Message):
    """The watcher saw the store's head move (or a problem with the store)."""

    def __init__(self, state: StoreState) -> None:
        super().__init__()
        self.state = state


class LiftChanged(Message):
    """The watcher recomputed the paired-lift cells of the campaign the monitor follows."""

    def __init__(self, update: LiftUpdate) -> None:
        super().__init__()
        self.update = update


class OpenComparison(Message):
    """Show this comparison (by its treatment attempt) in the Replay screen."""

    def __init__(self, treatment_attempt_id: str) -> None:
        super().__init__()
        self.treatment_attempt_id = treatment_attempt_id


class ShowComparisons(Message):
    """Open the Comparisons screen filtered to a campaign (None: every campaign)."""

    def __init__(self, campaign_id: str | None, *, harmed_only: bool = False) -> None:
        super().__init__()
        self.campaign_id = campaign_id
        self.harmed_only = harmed_only
