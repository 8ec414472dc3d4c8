"""Chain queries: multi-hop chains (attempts with a ``chain_id`` and ``hop``), each hop's attempt, outcome,
comparison and written skill, and a chain campaign's links from hop to hop (DESIGN §4)."""

from __future__ import annotations

from dataclasses import dataclass

from mkbsim.lab._reader import Queries


@dataclass(frozen=True)
class ChainSummary:
    chain_id: str
    campaign_id: str
    model: str
    problem: str
    #: (hop, status, passed) per hop attempt, in hop order
    hops: tuple[tuple[int, str, bool | None], ...]


@dataclass(frozen=True)
class Hop:
    hop: int
    attempt_id: str
    dsl: str
    status: str
    passed: bool | None
    speedup: float | None
    r: float | None
    outcome: str | None
    skill: str | None


class ChainQueries(Queries):
    def summaries(self) -> list[ChainSummary]:
        grouped: dict[str, list[tuple[str, str, str, int, str, int | None]]] = {}
        for chain_id, campaign, model, problem, hop, status, passed in self._all(
            f"SELECT chain_id, campaign_id, model, problem, hop, status, passed FROM {self.t.attempts}"
            " WHERE chain_id IS NOT NULL ORDER BY chain_id, hop, started_position"
        ):
            grouped.setdefault(chain_id, []).append((campaign, model, problem, hop or 0, status, passed))
        out = []
        for chain_id, rows in grouped.items():
            campaign, model, problem = rows[0][:3]
            latest = {hop: (status, None if passed is None else bool(passed)) for *_, hop, status, passed in rows}
            hops = tuple((hop, status, passed) for hop, (status, passed) in sorted(latest.items()))
            out.append(ChainSummary(chain_id, campaign, model, problem, hops))
        return out

    def hops(self, chain_id: str) -> list[Hop]:
        """The chain's hop attempts (the latest per hop) with their comparisons and written skills."""
        attempts: dict[int, tuple[str, str, str, bool | None, float | None]] = {}
        for attempt_id, hop, dsl, status, passed, speedup in self._all(
            f"SELECT attempt_id, hop, dsl, status, passed, speedup FROM {self.t.attempts} WHERE chain_id = ?"
            " ORDER BY hop, started_position",
            [chain_id],
        ):
            attempts[hop or 0] = (attempt_id, dsl, status, None if passed is None else bool(passed), speedup)
        outcomes = {
            treatment: (r, outcome)
            for treatment, r, outcome in self._all(
                f"SELECT treatment_attempt_id, r, outcome FROM {self.t.comparisons} WHERE chain_id = ?", [chain_id]
            )
        }
        skills = self._reader.skills.written(a for a, *_ in attempts.values())
        hops = []
        for hop, (attempt_id, dsl, status, passed, speedup) in sorted(attempts.items()):
            r, outcome = outcomes.get(attempt_id, (None, None))
            hops.append(Hop(hop, attempt_id, dsl, status, passed, speedup, r, outcome, skills.get(attempt_id)))
        return hops

    def links(self, campaign: str) -> dict[str, dict[int, tuple[str, str | None]]]:
        """Per chain of a chain campaign: hop → (its attempt, the attempt whose skill it read)."""
        chains: dict[str, dict[int, tuple[str, str | None]]] = {}
        for chain_id, hop, attempt, source in self._all(
            f"SELECT chain_id, hop, attempt_id, source_attempt_id FROM {self.t.transfer_attempts}"
            " WHERE campaign_id = ? AND chain_id IS NOT NULL",
            [campaign],
        ):
            chains.setdefault(chain_id, {})[hop] = (attempt, source)
        return chains
