"""Skill queries: the written skills (the `skills` projection, texts from their events), what labelers read
(DESIGN §7) and the labels they stored.

Skill texts and trajectories are read from the events (decoded and upcast), found through the
projections by position or by attempt stream: no scan of the event log by type.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from mkbsim.catalog import SKILL_HEADER
from mkbsim.errors import UserError
from mkbsim.events import attempt_stream
from mkbsim.lab._reader import Queries
from mkbsim.progress import SILENT, Progress

#: What a labeler reads of a skill-conditioned attempt's stream.
_TREATMENT_EVENTS = ("SkillRead", "AgentStep", "VerifierResult")


@dataclass(frozen=True)
class SkillRow:
    position: int
    attempt_id: str
    campaign_id: str | None
    model: str | None
    problem: str | None
    dsl: str | None
    arm: str | None
    passed: bool | None
    chars: int  # length of the text: a size a list can show without reading it


@dataclass
class Treatment:
    """What a labeler sees of one skill-conditioned attempt."""

    attempt_id: str
    skill: str  # the text it read, without the protocol's neutral header
    steps: list[str] = field(default_factory=list)  # its trajectory (llm, command, observation, note)
    passed_before: bool = False  # some counted submission passed
    submissions: int = 0
    final_failure: str | None = None
    final_passed: bool | None = None  # the final verdict (None: none recorded)


@dataclass
class Material:
    skills: dict[str, str]  # attempt id -> the skill it wrote
    treatments: dict[str, Treatment]  # attempts that read a skill
    harmed_failures: list[str]  # treatments of harmed comparisons (a break or a runtime-only harm)


@dataclass
class Labels:
    """One labeler's labels, keyed for comparison across labelers."""

    sentences: dict[tuple[str, str], str] = field(default_factory=dict)  # (attempt, text) -> category
    follow: dict[str, str] = field(default_factory=dict)
    failure: dict[str, str] = field(default_factory=dict)


class SkillQueries(Queries):
    def campaign_ids(self) -> list[str]:
        return self._column(f"SELECT DISTINCT campaign_id FROM {self.t.attempts} ORDER BY campaign_id")

    def attempt_ids(self, campaign: str | None) -> set[str]:
        """Every attempt of one campaign (or of all)."""
        where, params = (" WHERE campaign_id = ?", [campaign]) if campaign else ("", [])
        return set(self._column(f"SELECT attempt_id FROM {self.t.attempts}{where}", params))

    def positions(self, campaign: str | None) -> list[int]:
        """Positions of the written skills of one campaign (or all), oldest first."""
        if campaign is None:
            return self._column(f"SELECT position FROM {self.t.skills} ORDER BY position")
        return self._column(
            f"SELECT s.position FROM {self.t.attempts} a JOIN {self.t.skills} s ON s.attempt_id = a.attempt_id"
            " WHERE a.campaign_id = ? ORDER BY s.position",
            [campaign],
        )

    def rows(self, positions: Sequence[int]) -> list[SkillRow]:
        """The skills at ``positions``, in that order, with their attempts' place in the design."""
        found = {
            position: SkillRow(
                position, attempt, campaign, model, problem, dsl, arm, None if passed is None else bool(passed), chars
            )
            for position, attempt, chars, campaign, model, problem, dsl, arm, passed in self._in_chunks(
                "SELECT s.position, s.attempt_id, s.chars, a.campaign_id, a.model, a.problem, a.dsl, a.arm, a.passed"
                f" FROM {self.t.skills} s LEFT JOIN {self.t.attempts} a ON a.attempt_id = s.attempt_id"
                " WHERE s.position IN ({marks})",
                positions,
            )
        }
        return [found[p] for p in positions if p in found]

    def text(self, position: int) -> str:
        """The text of the skill written at ``position`` ("" if none is)."""
        (event,) = self.store.read_at([position]) or (None,)
        return str(event.payload["text"]) if event is not None and event.type == "SkillWritten" else ""

    def texts(self, campaign: str | None, batch: int = 500) -> Iterator[str]:
        """Every skill text of a campaign (or all), read in batches by position (for a worker thread)."""
        positions = self.positions(campaign)
        for start in range(0, len(positions), batch):
            for event in self.store.read_at(positions[start : start + batch]):
                yield str(event.payload["text"])

    def written(self, attempts: Iterable[str]) -> dict[str, str]:
        """The skill each of ``attempts`` wrote (its last one), by attempt id."""
        rows = self._in_chunks(
            f"SELECT attempt_id, MAX(position) FROM {self.t.skills} WHERE attempt_id IN ({{marks}})"
            " GROUP BY attempt_id",
            attempts,
        )
        texts = {event.position: event.payload["text"] for event in self.store.read_at(p for _, p in rows)}
        return {attempt: str(texts[position]) for attempt, position in rows if position in texts}

    def campaign_skills(self, campaign: str) -> dict[str, str]:
        """Skill text by attempt id, for the attempts of one campaign."""
        return self.written(self.attempt_ids(campaign))

    def material(self, campaign: str | None, *, trajectories: bool = True, progress: Progress = SILENT) -> Material:
        """What the labelers see of one campaign (or all): written skills, and for every attempt that read
        a skill its text, trajectory steps and verifier results; the harmed comparisons that failed.
        ``trajectories`` False leaves out the steps and verifier results (the skills report reads only the
        texts: a tenth of the events)."""
        ids = self.attempt_ids(campaign)
        if campaign and not ids:
            raise UserError(f"no campaign {campaign!r} in {self.store.path}")
        with progress.step("reading the written skills"):
            skills = self.written(ids)
        readers = sorted(self._read_skill_attempts(ids))
        if trajectories:
            treatments: dict[str, Treatment] = {}
            with progress.step("reading the skill-conditioned attempts' trajectories", len(readers)) as advance:
                for attempt in readers:
                    self._treatment(attempt, treatments)
                    advance(1)
        else:
            with progress.step("reading the skills the attempts read"):
                texts = self.read(readers)
                treatments = {a: Treatment(a, text.removeprefix(SKILL_HEADER)) for a, text in texts.items()}
        harmed = self._reader.transfer.harmed_failures(campaign)
        return Material(skills, treatments, [h for h in harmed if h in treatments])

    def read(self, attempts: Iterable[str]) -> dict[str, str]:
        """The skill each of ``attempts`` read (its last SkillRead, the protocol's header included), by attempt."""
        rows = self._in_chunks(
            f"SELECT attempt_id, MAX(position) FROM {self.t.skill_reads} WHERE attempt_id IN ({{marks}})"
            " GROUP BY attempt_id",
            attempts,
        )
        texts = {event.position: event.payload["text"] for event in self.store.read_at(p for _, p in rows)}
        return {attempt: str(texts[position]) for attempt, position in rows if position in texts}

    def _treatment(self, attempt: str, treatments: dict[str, Treatment]) -> None:
        t: Treatment | None = None  # a retry under the same id reads the skill again and starts over
        for e in self.store.read(stream_id=attempt_stream(attempt), types=_TREATMENT_EVENTS):
            if e.type == "SkillRead":
                t = treatments[attempt] = Treatment(attempt, e.payload["text"].removeprefix(SKILL_HEADER))
            elif t is None:
                continue
            elif e.type == "AgentStep":
                t.steps.append(str(e.payload["content"]))
            elif e.payload["submission"] == "final":
                t.final_failure = e.payload["failure"]
                t.final_passed = bool(e.payload["passed"])
            else:
                t.submissions += 1
                t.passed_before = t.passed_before or bool(e.payload["passed"])

    def labelers(self, attempts: Iterable[str]) -> set[str]:
        """The labelers with a label of some of ``attempts`` (their labels are not read)."""
        wanted = set(attempts)
        return {labeler for labeler, subject_id in self._all(f"SELECT labeler, subject_id FROM {self.t.labels}")
                if subject_id in wanted}  # fmt: skip

    def labels(self, attempts: Iterable[str], labelers: Iterable[str] | None = None) -> dict[str, Labels]:
        """The labels of ``attempts`` by each of ``labelers`` (None: every labeler), the latest label per
        subject winning; ground truth's comparison ``cause`` counts as its failure class."""
        wanted = set(attempts)
        if labelers is None:
            rows = self._all(f"SELECT position, subject_id FROM {self.t.labels} ORDER BY position")
        else:  # only their label events are read: each labeler's labels of a large campaign are ~100 MB decoded
            rows = self._in_chunks(f"SELECT position, subject_id FROM {self.t.labels} WHERE labeler IN ({{marks}})"
                                   " ORDER BY position", sorted(set(labelers)))  # fmt: skip
        positions = [position for position, subject_id in rows if subject_id in wanted]
        out: dict[str, Labels] = {}
        for event in self.store.read_at(positions):
            p = event.payload
            attempt = p["subject_id"]
            labels = out.setdefault(p["labeler"], Labels())
            if p["subject"] == "skill":
                for s in p["labels"].get("sentences", []):
                    labels.sentences[(attempt, s["text"])] = s["category"]
            elif p["subject"] == "comparison":
                follow = p["labels"].get("follow")
                failure = p["labels"].get("failure_class", p["labels"].get("cause"))
                if follow is not None:
                    labels.follow[attempt] = follow
                if failure is not None:
                    labels.failure[attempt] = failure
        return out

    def labeled(self, labeler: str) -> set[tuple[str, str]]:
        """(subject, subject id) pairs ``labeler`` has labeled."""
        return set(self._all(f"SELECT subject, subject_id FROM {self.t.labels} WHERE labeler = ?", [labeler]))

    def _read_skill_attempts(self, ids: set[str]) -> set[str]:
        """The attempts among ``ids`` that name a source (every skill-conditioned attempt does)."""
        rows = self._in_chunks(
            f"SELECT attempt_id FROM {self.t.attempts}"
            " WHERE source_attempt_id IS NOT NULL AND attempt_id IN ({marks})",
            ids,
        )
        return {r[0] for r in rows}
