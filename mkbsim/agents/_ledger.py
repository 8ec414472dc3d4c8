"""Token and cost accounting across a campaign, with an optional cost cap.

The cap stops *new* attempts once reached; an attempt already running finishes (cutting it off
would waste what it already cost and leave a half-measured comparison). Calls whose price litellm
does not know are counted in tokens and in ``unpriced_calls``: the cap cannot see them, and the
campaign summary says so.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from mkbsim.events import EventStore


@dataclass
class CostLedger:
    cap_usd: float | None = None
    spent_usd: float = 0.0
    tokens: int = 0
    calls: int = 0
    unpriced_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def charge(self, cost_usd: float | None, tokens: int | None) -> None:
        with self._lock:
            self.calls += 1
            self.tokens += tokens or 0
            if cost_usd is None:
                self.unpriced_calls += 1
            else:
                self.spent_usd += cost_usd

    def add(self, other: CostLedger) -> None:
        """Take in what another ledger counted (an attempt's own, sent back from a Ray worker)."""
        with self._lock:
            self.calls += other.calls
            self.tokens += other.tokens
            self.unpriced_calls += other.unpriced_calls
            self.spent_usd += other.spent_usd

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}  # a lock does not pickle

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    @property
    def cap_reached(self) -> bool:
        return self.cap_usd is not None and self.spent_usd >= self.cap_usd

    def summary(self) -> dict[str, object]:
        return {
            "cost_usd": round(self.spent_usd, 6),
            "cost_cap_usd": self.cap_usd,
            "tokens": self.tokens,
            "llm_calls": self.calls,
            "unpriced_calls": self.unpriced_calls,
        }

    @classmethod
    def from_store(cls, store: EventStore, campaign_id: str, cap_usd: float | None = None) -> CostLedger:
        """Everything a campaign's LLM calls cost so far, including earlier runs (a resume)."""
        ledger = cls(cap_usd)
        attempts: set[str] = set()
        for event in store.read(types=("AttemptStarted", "AgentStep")):
            p = event.payload
            if event.type == "AttemptStarted":
                if p.get("campaign_id") == campaign_id:
                    attempts.add(p["attempt_id"])
            elif p.get("kind") == "llm" and p.get("attempt_id") in attempts:
                ledger.charge(p.get("cost_usd"), p.get("tokens"))
        return ledger
