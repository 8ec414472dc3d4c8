"""Command palette (ctrl+p): open a comparison in Replay by typing its model, problem, family or direction."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from mkbsim.lab import ComparisonQuery
from tui import format as fmt
from tui.messages import OpenComparison

if TYPE_CHECKING:
    from mkbsim.metrics import Comparison
    from tui.app import MkbsimApp

_SHOWN = 30


def _label(c: Comparison) -> str:
    direction = fmt.DIRECTION_NAMES.get(c.direction, c.direction)
    return f"Replay {c.problem} · {c.model} · {direction} · rep {c.replicate} · {c.outcome or 'pending'}"


class ComparisonCommands(Provider):
    @property
    def mkbsim(self) -> MkbsimApp:
        return cast("MkbsimApp", self.app)

    async def discover(self) -> Hits:
        """With nothing typed: the most harmed comparisons, the usual place to start explaining."""
        if not self.mkbsim.store_open:
            return
        queries = self.mkbsim.reader.comparisons
        for row in queries.fetch(queries.ordered_rowids(ComparisonQuery(harmed_only=True))[:8]):
            c = row.comparison
            yield DiscoveryHit(_label(c), partial(self.mkbsim.post_message, OpenComparison(c.treatment_attempt_id)),
                               help=f"r {fmt.ratio(c.r)} · {c.campaign_id}")  # fmt: skip

    async def search(self, query: str) -> Hits:
        words = query.split()
        if not self.mkbsim.store_open or not words:
            return
        matcher = self.matcher(query)
        for c in self.mkbsim.reader.comparisons.search(words, _SHOWN):
            label = _label(c)
            score = matcher.match(label)
            if score > 0:
                yield Hit(score, matcher.highlight(label),
                          partial(self.mkbsim.post_message, OpenComparison(c.treatment_attempt_id)),
                          help=f"r {fmt.ratio(c.r)} · {c.campaign_id}")  # fmt: skip
