"""The campaign a screen shows (every campaign, or one): one line in a box, `c` steps to the next, a click
opens the list of campaigns to pick one from."""

from __future__ import annotations

from typing import ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import OptionList
from textual.widgets.option_list import Option

ALL_CAMPAIGNS = "All campaigns"


class CampaignPicker(Widget):
    """Draws as Textual's Select does, as one widget. A Select is five widgets, and its stylesheet and
    its option list are built with the screen: a screen's first visit cost about 20 ms more with it. The
    list here is built when it is opened."""

    DEFAULT_CSS = """
    CampaignPicker {
        width: 40;
        height: 3;
        padding: 0 2;
        border: tall $border-blurred;
        background: $surface;
        color: $foreground;
        pointer: pointer;
    }
    """

    class Changed(Message):
        """The user picked ``campaign_id`` (None: every campaign) from the list."""

        def __init__(self, picker: CampaignPicker, campaign_id: str | None) -> None:
            super().__init__()
            self.picker = picker
            self.campaign_id = campaign_id

        @property
        def control(self) -> CampaignPicker:
            return self.picker

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.campaigns: list[str] = []
        self.campaign_id: str | None = None

    def show(self, campaign_id: str | None, campaigns: list[str] | None = None) -> None:
        """Show ``campaign_id`` (and from now on offer ``campaigns``); posts no message."""
        if campaigns is not None:
            self.campaigns = campaigns
        self.campaign_id = campaign_id
        self.refresh()

    def next_campaign(self) -> str | None:
        """The campaign after the shown one (every campaign comes after the last)."""
        options = [None, *self.campaigns]
        current = self.campaign_id if self.campaign_id in options else None
        return options[(options.index(current) + 1) % len(options)]

    def render(self) -> Content:
        label = Content(self.campaign_id or ALL_CAMPAIGNS).truncate(max(0, self.size.width - 2), pad=True)
        return Content.assemble(label, (" ▼", "$foreground 50%"))

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.app.push_screen(CampaignList(self.campaigns, self.campaign_id), self._picked)

    def _picked(self, campaign_id: str | None) -> None:
        if campaign_id != self.campaign_id:
            self.show(campaign_id)
            self.post_message(self.Changed(self, campaign_id))


class CampaignList(ModalScreen[str | None]):
    """Every campaign, the shown one highlighted: Enter or a click picks one, Escape keeps the shown one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "keep", "Close")]
    DEFAULT_CSS = """
    CampaignList { align: center middle; }
    CampaignList > OptionList { width: 60; max-width: 95%; height: auto; max-height: 80%; border: thick $accent; }
    """

    def __init__(self, campaigns: list[str], shown: str | None) -> None:
        super().__init__()
        self._campaigns = [None, *campaigns]
        self._shown = shown

    def compose(self) -> ComposeResult:
        options = OptionList(*(Option(campaign or ALL_CAMPAIGNS) for campaign in self._campaigns))
        options.highlighted = self._campaigns.index(self._shown) if self._shown in self._campaigns else 0
        yield options

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self._campaigns[event.option_index])

    def action_keep(self) -> None:
        self.dismiss(self._shown)
