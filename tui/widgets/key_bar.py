"""The bottom bar: the keys the focused widget and its screen answer (click one to press it), and the
command palette's key on the right."""

from __future__ import annotations

from functools import lru_cache

from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget


@lru_cache(maxsize=256)
def _key(key: str, display: str, description: str, enabled: bool) -> Content:
    """One key's entry (clicking it presses the key). Parsing its markup costs about a millisecond, and every
    screen switch and focus move redraws every key: the entries are kept."""
    markup = (
        f"[@click=app.simulate_key('{key}')]"
        "[b $footer-key-foreground on $footer-key-background] $key [/]"
        "[$footer-description-foreground on $footer-description-background]$description [/][/]"
    )
    content = Content.from_markup(markup, key=display, description=description)
    return content if enabled else content.stylize("dim")


class KeyBar(Widget):
    """What Textual's Footer shows, drawn as one line of text. The Footer builds a widget per key and
    builds them all again whenever the bindings change (each switch of screen, each move of focus):
    about as long as a whole key's budget on a 2-core machine. This one redraws a line."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._keys = Content()
        self._palette = Content()

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._show_keys()

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if screen is self.screen:
            self._show_keys()

    def _show_keys(self) -> None:
        keys: list[Content] = []
        actions: set[str] = set()
        self._palette = Content()
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if key == self.app.COMMAND_PALETTE_BINDING and self.app.ENABLE_COMMAND_PALETTE:
                # the Footer's separator takes the key's left padding
                palette = _key(binding.key, self.app.get_key_display(binding), binding.description, active.enabled)
                self._palette = Content.assemble(("▏", "$foreground 20%"), palette[1:])
            elif binding.show and binding.action not in actions:  # one entry per action, as the Footer
                actions.add(binding.action)
                keys.append(_key(binding.key, self.app.get_key_display(binding), binding.description, active.enabled))
        self._keys = Content("").join(keys)
        self.refresh()

    def render(self) -> Content:
        """The keys, cut where the command palette's key starts at the right edge."""
        room = max(0, self.size.width - self._palette.cell_length)
        return Content.assemble(self._keys.truncate(room, pad=True), self._palette)
