"""A table that draws only the rows in view, fetching them a page at a time from a row source.

Textual's DataTable holds every row in the widget; a comparisons table over a store of millions of
events would spend seconds filling it. Here the source knows how many rows there are and returns
any slice of them (by SQL), the table keeps a few pages cached, and scrolling a page away costs one
query for a page of rows (Textual's Line API: ``render_line`` per visible line).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

Row = TypeVar("Row")
Key = TypeVar("Key")
Row_co = TypeVar("Row_co", covariant=True)
Cell = Text | str

_PAGE_ROWS = 100
_CACHED_PAGES = 8
_GAP = 1
_GAP_TEXT = " " * _GAP
_MIN_FLEX = 6
_CACHED_STRIPS = 400


@dataclass(frozen=True)
class _LineStyles:
    base: Style
    header: Style
    odd: Style
    cursor: Style
    empty: Style


def _aligned(text: str, justify: Literal["left", "center", "right"], width: int) -> str:
    """``text`` cut (with an ellipsis) or padded to ``width`` cells, as Rich's Text.truncate and Text.align do."""
    length = cell_len(text)
    if length > width:
        text, length = set_cell_size(text, width - 1) + "…", width
    excess = width - length
    if justify == "right":
        return " " * excess + text
    if justify == "center":
        return " " * (excess // 2) + text + " " * (excess - excess // 2)
    return text + " " * excess


def _styled(strip: Strip, style: Style, post_style: Style | None, width: int) -> Strip:
    """``strip`` under ``style`` (its cells' own styles win) and over ``post_style`` (which wins), padded."""
    segments = Segment.apply_style(strip, style, post_style)
    return Strip(list(segments), strip.cell_length).adjust_cell_length(
        width, style + post_style if post_style else style
    )


class RowSource(Protocol[Row_co]):
    """Rows in a fixed order: how many, and any slice of them."""

    def __len__(self) -> int: ...

    def rows(self, start: int, stop: int) -> Sequence[Row_co]: ...


class KeyedSource(Generic[Key, Row]):
    """Rows identified by an ordered list of keys (e.g. rowids from one ORDER BY query), fetched by key."""

    def __init__(self, keys: Sequence[Key], fetch: Callable[[Sequence[Key]], Sequence[Row]]) -> None:
        self._keys = keys
        self._fetch = fetch

    def __len__(self) -> int:
        return len(self._keys)

    def rows(self, start: int, stop: int) -> Sequence[Row]:
        return self._fetch(self._keys[start:stop])


class ListSource(Generic[Row]):
    """Rows already in memory (small lists: chains, campaigns)."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self, start: int, stop: int) -> Sequence[Row]:
        return self._rows[start:stop]


@dataclass(frozen=True)
class Column(Generic[Row]):
    key: str
    label: str
    width: int
    cell: Callable[[Row], Cell]
    justify: Literal["left", "center", "right"] = "left"
    #: takes the width left over by the fixed columns (up to ``max_width``), or gives up width (down to
    #: ``_MIN_FLEX``) when short
    flex: bool = False
    max_width: int | None = None
    #: shortens a text cell to a width (default: cut at the end with an ellipsis)
    fit: Callable[[str, int], str] | None = None


class PagedTable(ScrollView, Generic[Row], can_focus=True):
    """Rows from a ``RowSource`` with a row cursor; the first line is the header."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
        Binding("enter", "choose", "Open", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "paged-table--header",
        "paged-table--cursor",
        "paged-table--odd",
        "paged-table--empty",
    }
    DEFAULT_CSS = """
    PagedTable {
        height: 1fr;
        background: $surface;
        scrollbar-gutter: stable;
        overflow-x: hidden;
        & > .paged-table--header { text-style: bold; background: $panel; color: $text; }
        & > .paged-table--cursor { background: $block-cursor-blurred-background; }
        & > .paged-table--odd { background: $boost; }
        & > .paged-table--empty { color: $text-muted; text-style: italic; }
        &:focus > .paged-table--cursor {
            background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold;
        }
    }
    """

    class Highlighted(Message):
        """The cursor moved to ``row`` (None: the table is empty)."""

        def __init__(self, table: PagedTable[Any], index: int, row: object | None) -> None:
            super().__init__()
            self.table = table
            self.index = index
            self.row = row

        @property
        def control(self) -> PagedTable[Any]:
            return self.table

    class Chosen(Message):
        """Enter or a double click on ``row``."""

        def __init__(self, table: PagedTable[Any], index: int, row: object) -> None:
            super().__init__()
            self.table = table
            self.index = index
            self.row = row

        @property
        def control(self) -> PagedTable[Any]:
            return self.table

    class HeaderClicked(Message):
        def __init__(self, table: PagedTable[Any], column: str) -> None:
            super().__init__()
            self.table = table
            self.column = column

        @property
        def control(self) -> PagedTable[Any]:
            return self.table

    def __init__(
        self,
        columns: Sequence[Column[Row]],
        *,
        empty_text: str = "Nothing to show.",
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.columns = list(columns)
        self.empty_text = empty_text
        self._source: RowSource[Row] = ListSource([])
        self._pages: OrderedDict[int, Sequence[Row]] = OrderedDict()
        self._cursor = 0
        self._sort: tuple[str, bool] | None = None
        self._strips: dict[tuple[int, int], Strip] = {}  # (row index, width) → the row's cells, unstyled
        self._column_widths: dict[int, list[int]] = {}  # table width → column widths
        self._styles = _LineStyles(Style(), Style(), Style(), Style(), Style())

    # -- data ---------------------------------------------------------------------------------

    @property
    def cursor(self) -> int:
        return self._cursor

    @property
    def row_count(self) -> int:
        return len(self._source)

    def set_source(self, source: RowSource[Row], *, cursor: int = 0) -> None:
        """Show ``source``'s rows, the cursor at ``cursor`` (clamped) and in view."""
        self._source = source
        self._pages.clear()
        self._strips.clear()
        self._cursor = max(0, min(cursor, len(source) - 1))
        self._update_virtual_size()
        self._scroll_cursor_into_view()
        self.refresh()
        self._post_highlight()

    def set_sort_indicator(self, column: str | None, descending: bool = False) -> None:
        self._sort = (column, descending) if column else None
        self._strips.pop((-1, self.scrollable_content_region.width), None)
        self.refresh()

    def row_at(self, index: int) -> Row | None:
        if not 0 <= index < len(self._source):
            return None
        page_index, offset = divmod(index, _PAGE_ROWS)
        page = self._pages.get(page_index)
        if page is None:
            page = self._source.rows(page_index * _PAGE_ROWS, (page_index + 1) * _PAGE_ROWS)
            self._pages[page_index] = page
            while len(self._pages) > _CACHED_PAGES:
                self._pages.popitem(last=False)
        else:
            self._pages.move_to_end(page_index)
        return page[offset] if offset < len(page) else None

    @property
    def cursor_row(self) -> Row | None:
        return self.row_at(self._cursor)

    # -- actions ------------------------------------------------------------------------------

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self._cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self._cursor + direction * max(1, self._body_height() - 1))

    def action_jump(self, index: int) -> None:
        self.move_cursor(index if index >= 0 else len(self._source) - 1)

    def action_choose(self) -> None:
        row = self.cursor_row
        if row is not None:
            self.post_message(self.Chosen(self, self._cursor, row))

    def move_cursor(self, index: int) -> None:
        if not len(self._source):
            return
        index = max(0, min(index, len(self._source) - 1))
        if index == self._cursor:
            return
        previous, self._cursor = self._cursor, index
        if not self._scroll_cursor_into_view():  # (scrolling repaints everything)
            self.refresh_line(previous + 1)  # virtual line of a row: its index + 1 (the header is line 0)
            self.refresh_line(index + 1)
        self._post_highlight()

    # -- mouse --------------------------------------------------------------------------------

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            column = self._column_at(offset.x)
            if column is not None:
                self.post_message(self.HeaderClicked(self, column))
            return
        index = int(self.scroll_y) + offset.y - 1
        if index < len(self._source):
            self.move_cursor(index)
            if event.chain >= 2:
                self.action_choose()

    # -- rendering ----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._update_virtual_size()  # before the first layout: the header's line

    def on_resize(self) -> None:
        self._strips.clear()  # the column widths may have changed

    def render_lines(self, crop: Region) -> list[Strip]:
        # component styles cost a CSS lookup each: look them up once per repaint, not once per line
        self._styles = _LineStyles(
            base=self.rich_style,
            header=self.get_component_rich_style("paged-table--header"),
            odd=self.get_component_rich_style("paged-table--odd"),
            cursor=self.get_component_rich_style("paged-table--cursor"),
            empty=self.get_component_rich_style("paged-table--empty"),
        )
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        styles = self._styles
        width = self.scrollable_content_region.width
        if y == 0:
            header = self._strips.get((-1, width))  # the header's line (row -1), cleared with the rows'
            if header is None:
                header = self._strips[(-1, width)] = self._cells_strip(self._header_cells(), width)
            return _styled(header, styles.base + styles.header, None, width)
        index = int(self.scroll_y) + y - 1
        if not len(self._source):
            if y == 1:
                return _styled(self._text_strip(Text(self.empty_text)), styles.base + styles.empty, None, width)
            return Strip.blank(width, styles.base)
        row = self.row_at(index)
        if row is None:
            return Strip.blank(width, styles.base)
        strip = self._strips.get((index, width))
        if strip is None:
            strip = self._strips[(index, width)] = self._cells_strip([c.cell(row) for c in self.columns], width)
            while len(self._strips) > _CACHED_STRIPS:
                del self._strips[next(iter(self._strips))]
        style = styles.base + styles.odd if index % 2 else styles.base
        return _styled(strip, style, styles.cursor if index == self._cursor else None, width)

    def _header_cells(self) -> list[Cell]:
        cells: list[Cell] = []
        for column in self.columns:
            label = column.label
            if self._sort and self._sort[0] == column.key:
                label = f"{label} {'▼' if self._sort[1] else '▲'}"
            cells.append(label)
        return cells

    def _widths(self, width: int) -> list[int]:
        """Each column's width in a table ``width`` cells wide."""
        widths = self._column_widths.get(width)
        if widths is None:
            widths = self._column_widths[width] = self._share_out(width)
        return widths

    def _share_out(self, width: int) -> list[int]:
        widths = [c.width for c in self.columns]
        spare = width - sum(widths) - _GAP * len(widths)
        flex = [i for i, c in enumerate(self.columns) if c.flex]
        while spare and flex:  # shared out evenly; a column at its maximum leaves the rest to the others
            share, extra = divmod(spare, len(flex))
            growing = []
            for n, i in enumerate(flex):
                want = max(_MIN_FLEX, widths[i] + share + (1 if n < extra else 0))
                cap = self.columns[i].max_width
                widths[i] = want if cap is None else min(want, max(cap, self.columns[i].width))
                if cap is None or widths[i] < cap:
                    growing.append(i)
            spare = width - sum(widths) - _GAP * len(widths)
            if spare <= 0 or growing == flex:
                break
            flex = growing
        return widths

    def _cells_strip(self, cells: Sequence[Cell], width: int) -> Strip:
        """One line of cells, unstyled beyond the cells' own styles (row styles are applied per repaint).
        A plain-text cell becomes one segment (laying it out as a Rich Text cost most of a new row's time)."""
        segments: list[Segment] = []
        for column, cell_width, value in zip(self.columns, self._widths(width), cells, strict=True):
            if isinstance(value, str):
                segments.append(Segment(_aligned(value if column.fit is None else column.fit(value, cell_width),
                                                 column.justify, cell_width) + _GAP_TEXT))  # fmt: skip
                continue
            text = value.copy()
            text.truncate(cell_width, overflow="ellipsis")
            text.align(column.justify, cell_width)
            rendered = text.render(self.app.console)  # (the spans' styles only: the text's own goes under them)
            segments.extend(Segment.apply_style(rendered, self.app.console.get_style(text.style)) if text.style
                            else rendered)  # fmt: skip
            segments.append(Segment(_GAP_TEXT))
        return Strip(segments).crop(0, width)

    def _text_strip(self, text: Text) -> Strip:
        return Strip(list(text.render(self.app.console)), text.cell_len)

    def _column_at(self, x: int) -> str | None:
        left = 0
        for column, cell_width in zip(self.columns, self._widths(self.scrollable_content_region.width), strict=True):
            if left <= x < left + cell_width + _GAP:
                return column.key
            left += cell_width + _GAP
        return None

    def _update_virtual_size(self) -> None:
        # no width: the table never scrolls sideways, and a virtual size that follows the widget's width
        # would have Textual lay the whole screen out again after each resize (a screen's first paint included)
        self.virtual_size = Size(0, len(self._source) + 1)

    def _body_height(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_cursor_into_view(self) -> bool:
        """Scroll so the cursor's row shows; True if that scrolled."""
        top = int(self.scroll_y)
        height = self._body_height()
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, immediate=True)
        elif self._cursor >= top + height:
            self.scroll_to(y=self._cursor - height + 1, animate=False, immediate=True)
        else:
            return False
        return True

    def _post_highlight(self) -> None:
        self.post_message(self.Highlighted(self, self._cursor, self.cursor_row))
