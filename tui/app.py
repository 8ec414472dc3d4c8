"""The mkbsim TUI: monitor live campaigns, browse comparisons, replay trajectories, try skill filters,
follow chains (`mkbsim tui [--store PATH]`)."""

from __future__ import annotations

import contextlib
import gc
import importlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.await_complete import AwaitComplete
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import AwaitMount

from mkbsim.lab import Lab, LabReader
from tui.commands import ComparisonCommands
from tui.data.connection import check_store
from tui.data.filters import FilterCatalog
from tui.data.watcher import LiftUpdate, StoreState, StoreWatcher
from tui.messages import LabOpened, LiftChanged, OpenComparison, ShowComparisons, StoreChanged
from tui.screens.store_problem import EmptyStoreScreen, OpeningScreen, StoreProblemScreen
from tui.widgets.nav_bar import SCREENS

#: A collection of the oldest generation walks every live object, about 1.5 µs each on a 2-core
#: machine: with the 80k objects a running app holds, a 120 ms stall, more than a keystroke's 100 ms
#: budget. So the app freezes its long-lived objects once a screen is up (frozen objects are never
#: walked) and collects the young generation less often; both are undone when the app exits.
GC_THRESHOLDS = (20_000, 20, 20)


def _utc_now() -> datetime:
    return datetime.now(UTC)


#: Each screen of the nav bar (mode) by the module and class that define it. The first paint needs only
#: the monitor; the others' modules (plots, claims) are imported in a thread once it is up.
SCREEN_CLASSES: dict[str, tuple[str, str]] = {
    "monitor": ("monitor", "MonitorScreen"),
    "comparisons": ("comparisons", "ComparisonsScreen"),
    "replay": ("replay", "ReplayScreen"),
    "skills": ("skills", "SkillsScreen"),
    "chains": ("chains", "ChainsScreen"),
}


def _screen_class(mode: str) -> type[Screen[Any]]:
    module, name = SCREEN_CLASSES[mode]
    screen_class: type[Screen[Any]] = getattr(importlib.import_module(f"tui.screens.{module}"), name)
    return screen_class


class MkbsimApp(App[None]):
    """The nav bar's screens are installed (built once, kept while another is shown) and pushed over Textual's
    default screen: Textual's modes would restyle every widget of every screen, twice, at a mode's first visit."""

    TITLE = "mkbsim"
    CSS_PATH = "app.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(str(n), f"goto('{mode}')", label, show=False) for n, (mode, label) in enumerate(SCREENS, 1)),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]
    COMMANDS = App.COMMANDS | {ComparisonCommands}

    store_state: reactive[StoreState] = reactive(StoreState(0, 0), always_update=True)
    lift: reactive[LiftUpdate | None] = reactive(None)

    def __init__(
        self,
        store_path: Path,
        *,
        clock: Callable[[], datetime] = _utc_now,
        filters: FilterCatalog | None = None,
        poll_s: float = 0.5,
        lift_every_s: float = 2.0,
    ) -> None:
        """``clock`` gives "now" for elapsed times and throughput; ``filters`` replaces the installed
        skill filters (tests)."""
        super().__init__()
        self.store_path = store_path
        self.clock = clock
        self.filters = filters if filters is not None else FilterCatalog.from_skill_filters()
        self._poll_s = poll_s
        self._lift_every_s = lift_every_s
        self._lab: Lab | None = None
        self._reader: LabReader | None = None
        #: counts the read models the app has read through: a screen reloads when it changes
        self.reader_generation = 0
        self._watcher: StoreWatcher | None = None
        self._gc_thresholds = gc.get_threshold()
        #: the nav bar's screen on show (under any help or report over it); None before the store opens
        self.shown_mode: str | None = None

    @property
    def lab(self) -> Lab:
        """The read model (owned by the watcher's thread): ``lab.reader()`` gives a worker thread its reader."""
        if self._lab is None:
            raise RuntimeError("the store is not open")
        return self._lab

    @property
    def reader(self) -> LabReader:
        """The UI thread's reader of the store (quick, bounded queries only)."""
        if self._reader is None:
            raise RuntimeError("the store is not open")
        return self._reader

    @property
    def store_open(self) -> bool:
        """The read model is current and the UI thread has its reader: the screens may open."""
        return self._reader is not None

    def on_mount(self) -> None:
        gc.set_threshold(*GC_THRESHOLDS)
        check = check_store(self.store_path)
        self.store_state = StoreState(check.head, 0, check.problem, synced=False)
        if check.problem is not None:
            self.push_screen(StoreProblemScreen(str(self.store_path), check.problem))
        else:
            if check.head:  # built behind the opening screen while the watcher opens the read model
                self._show_mode("monitor")
            self.push_screen(OpeningScreen(str(self.store_path)))
        self._watcher = StoreWatcher(
            self.store_path,
            lambda state: self._post_from_thread(StoreChanged(state)),
            lambda update: self._post_from_thread(LiftChanged(update)),
            lambda lab: self._post_from_thread(LabOpened(lab)),
            poll_s=self._poll_s,
            lift_every_s=self._lift_every_s,
        )
        self._watcher.start()

    def on_unmount(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        if self._reader is not None:
            self._reader.close()
        gc.unfreeze()
        gc.set_threshold(*self._gc_thresholds)

    def _freeze_heap(self) -> None:
        gc.freeze()

    def _post_from_thread(self, message: StoreChanged | LiftChanged | LabOpened) -> None:
        with contextlib.suppress(RuntimeError):  # the event loop closed while the watcher was reporting
            self.post_message(message)

    # -- messages -----------------------------------------------------------------------------

    def on_lab_opened(self, message: LabOpened) -> None:
        """The read model is current (or moved its views): read through a new reader from now on."""
        previous = self._reader
        self._lab, self._reader = message.lab, message.lab.reader()
        self.reader_generation += 1
        if previous is not None:
            previous.close()
        if isinstance(self.screen, StoreProblemScreen | OpeningScreen):  # the store is open (or appeared)
            self.pop_screen()
            if message.lab.head == 0:
                self.push_screen(EmptyStoreScreen(str(self.store_path)))
            elif self.shown_mode != "monitor":
                self.goto_mode("monitor")

    def on_store_changed(self, message: StoreChanged) -> None:
        state = message.state
        if state.problem is not None and not self.store_open and not isinstance(self.screen, StoreProblemScreen):
            if isinstance(self.screen, OpeningScreen):
                self.pop_screen()
            self.push_screen(StoreProblemScreen(str(self.store_path), state.problem))
        self.store_state = state

    def on_lift_changed(self, message: LiftChanged) -> None:
        first = self.lift is None
        self.lift = message.update
        if first:  # the monitor is drawn and the watcher's first work is done
            self.call_after_refresh(self._freeze_heap)
            self._import_screens()

    async def on_open_comparison(self, message: OpenComparison) -> None:
        from tui.screens.replay import ReplayScreen

        await self.goto_mode("replay")
        self.call_after_refresh(self._freeze_heap)
        if isinstance(self.screen, ReplayScreen):
            self.screen.open(message.treatment_attempt_id)

    async def on_show_comparisons(self, message: ShowComparisons) -> None:
        from tui.screens.comparisons import ComparisonsScreen

        await self.goto_mode("comparisons")
        self.call_after_refresh(self._freeze_heap)
        if isinstance(self.screen, ComparisonsScreen):
            self.screen.show_campaign(message.campaign_id, harmed_only=message.harmed_only)

    # -- actions ------------------------------------------------------------------------------

    def goto_mode(self, mode: str) -> AwaitComplete | AwaitMount:
        """Show ``mode``'s screen (closing any help or report over the current one) once the store is open."""
        if not self.store_open or mode not in SCREEN_CLASSES or self.shown_mode == mode:
            return AwaitComplete.nothing()
        shown = self._show_mode(mode)
        self.call_after_refresh(self._freeze_heap)  # a screen's first visit builds its widgets
        return shown

    def _show_mode(self, mode: str) -> AwaitComplete | AwaitMount:
        """The stack holds Textual's default screen, then the one shown (installed: kept when another is
        shown) or a notice (the store opening, empty), then any help or report over it."""
        if not self.is_screen_installed(mode):
            self.install_screen(_screen_class(mode)(), name=mode)
        while len(self.screen_stack) > 2:
            self.pop_screen()
        # over a notice, switch_screen: it mounts the screen before it removes the notice
        shown = self.push_screen(mode) if len(self.screen_stack) == 1 else self.switch_screen(mode)
        self.shown_mode = mode
        return shown

    @work(thread=True, group="import-screens", exit_on_error=False)
    def _import_screens(self) -> None:
        """Import the other screens' modules off the UI thread, so that a screen's first visit only builds it."""
        for mode in SCREEN_CLASSES:
            _screen_class(mode)
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.call_from_thread(self._freeze_heap)  # the modules are long-lived objects too

    def action_goto(self, mode: str) -> None:
        self.goto_mode(mode)

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def follow_campaign(self, campaign_id: str | None) -> None:
        """Have the watcher compute the monitor's paired-lift cells for this campaign."""
        if self._watcher is not None:
            self._watcher.follow_campaign(campaign_id)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if self.store_open:
            for mode, label in SCREENS:
                yield SystemCommand(f"Go to {label}", f"Open the {label} screen", lambda m=mode: self.goto_mode(m))
            yield SystemCommand("Harmed comparisons", "Comparisons, harmed only, every campaign",
                                lambda: self.post_message(ShowComparisons(None, harmed_only=True)))  # fmt: skip


def run(store_path: Path) -> None:
    """``mkbsim tui``: the app over ``store_path`` until the user quits (the ``mkbsim.tui`` entry point)."""
    MkbsimApp(store_path).run()
