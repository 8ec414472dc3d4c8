"""Labeling (DESIGN §7): rubric categories for every sentence of a written skill, a follow level for
every skill-conditioned attempt that read a skill, and one failure class for every harmed comparison
(a target-side failure: the treatment broke, or passed but ran slower than its solo; a runtime-only
harm gets a skill-side class, search truncation or unverified adoption, or none). Labels are appended
as ``LabelAssigned`` events on the attempt's stream, ``labeler`` naming who assigned them; an LLM
labeler's prompts and replies go into the same events (``labels["exchanges"]``). Quality is measured
against the simulator's ground truth (labeler "ground_truth") and agreement between labelers as Cohen's
kappa.

Labelers read what a researcher could read: the skill text, the attempt's trajectory steps and its
verifier results — never the ground-truth labels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from mkbsim.claims import CATEGORIES, classify, extract_claims, lexical_similarity
from mkbsim.errors import UserError
from mkbsim.events import EventStore, LabelAssigned, NewEvent, attempt_stream
from mkbsim.lab import Labels, Material, Treatment

GROUND_TRUTH = "ground_truth"
FOLLOW_LEVELS = ("full", "partial", "none")
FAILURE_CLASSES = (
    "search_truncation", "unverified_adoption", "faulty_execution", "toolchain_friction",
    "budget_or_artifact_mismanagement", "rule_and_precision_failure",
)  # fmt: skip
FULL_FOLLOW_SHARE = 0.75  # the share of discussed sentences acted on that makes a follow "full"
MATCH = 0.6  # lexical similarity at which a trajectory step is taken to discuss a skill sentence
_REJECTS = re.compile(
    r"\bnot acting\b|\bignor\w*|\bcheck\w* (?:it |this )?(?:before|first)\b|\bdisregard\w*|"
    r"\bskip\w*\b|\bwon't follow\b|\bnot follow\w*|\bverify (?:it )?first\b",
    re.IGNORECASE,
)
_ADOPTS = re.compile(r"\badopt\w*|\bfollow\w*|\busing\b|\bapply\w*|\bwill try\b|\bas the skill\b|\bper the skill\b",
                     re.IGNORECASE)  # fmt: skip
_UNVERIFIED_PUSH = frozenset({"agenda_handoff", "unverified_claim"})
_CLOSING = frozenset({"unsupported_closure", "ambition_capping"})  # sentences that stop a search early


class Labeler(Protocol):
    name: str
    exchanges: list[dict[str, Any]]  # model calls since the last ``take`` (empty for rule-based labelers)

    def categories(self, sentences: Sequence[str]) -> list[str] | None: ...

    def follow(self, t: Treatment) -> str | None: ...

    def failure(self, t: Treatment) -> str | None: ...


# -- the heuristic labeler ---------------------------------------------------------------------------


class HeuristicLabeler:
    """The claim extractor's categories; follow and failure from the trajectory's own words."""

    name = "heuristic"

    def __init__(self) -> None:
        self.exchanges: list[dict[str, Any]] = []

    def categories(self, sentences: Sequence[str]) -> list[str]:
        return [classify(s).category for s in sentences]

    def follow(self, t: Treatment) -> str | None:
        decisions = discussed(t)
        if not decisions:
            return None
        share = sum(1 for _, acted in decisions if acted) / len(decisions)
        return "full" if share >= FULL_FOLLOW_SHARE else "partial" if share > 0 else "none"

    def failure(self, t: Treatment) -> str | None:
        if t.final_passed:  # a runtime-only harm: only a skill-side mechanism explains it, else no cause
            acted = {category for category, acted in discussed(t) if acted}
            if acted & _CLOSING:
                return "search_truncation"
            return "unverified_adoption" if acted & _UNVERIFIED_PUSH else None
        if t.passed_before or t.submissions == 0:
            return "budget_or_artifact_mismanagement"  # a kept pass was lost, or nothing was ever submitted
        if any(acted and category in _UNVERIFIED_PUSH for category, acted in discussed(t)):
            return "unverified_adoption"
        # the final verdict's name and the last verifier observation in the trajectory (it may say why)
        failure = " ".join([t.final_failure or "", *[s for s in t.steps if s.startswith("Verifier:")][-1:]]).lower()
        if "compile" in failure:
            return "toolchain_friction"
        if re.search(r"precision|tolerance|not_dsl|forbidden|inline", failure):
            return "rule_and_precision_failure"
        return "faulty_execution"


def discussed(t: Treatment) -> list[tuple[str, bool]]:
    """(category, acted on) for each read sentence some trajectory step discusses."""
    sentences = [c.text for c in extract_claims(t.skill)]
    if not sentences or not t.steps:
        return []
    out = []
    for sentence, row in zip(sentences, lexical_similarity(sentences, t.steps), strict=True):
        best = max(range(len(row)), key=row.__getitem__)
        if row[best] >= MATCH:
            step = t.steps[best]
            out.append((classify(sentence).category, not _REJECTS.search(step) and bool(_ADOPTS.search(step))))
    return out


# -- the LLM labeler ---------------------------------------------------------------------------------

_RUBRIC = (
    "Rubric categories for one sentence of a skill (notes an agent wrote after optimizing a GPU kernel): "
    "evidence_backed_finding (a measured result), verified_reformulation (a verified restatement of the "
    "computation), work_partitioning (what runs in eager PyTorch vs the DSL kernel), failure_diagnosis (why "
    "something failed), applicability_condition (when a finding holds), open_question, unsupported_closure "
    "(rules out alternatives beyond the stated evidence), agenda_handoff (leaves suggestions for later work), "
    "ambition_capping (declares the result good enough), unverified_claim (an unmeasured claim), "
    "dsl_recipe_leak (code- or API-level DSL detail)."
)
_FOLLOW = ("Follow levels of a skill read by a later attempt: full (it acted on nearly every actionable "
           "sentence), partial (on some), none (on none).")  # fmt: skip
_FAILURES = (
    "Failure classes of an attempt that did worse than the same model's solo attempt after reading a skill "
    "(it failed, or passed but ran slower): search_truncation (the skill ruled out "
    "the plan that would have worked), unverified_adoption (it adopted an unverified suggestion that then "
    "failed), faulty_execution (wrong results), toolchain_friction (build or compiler trouble), "
    "budget_or_artifact_mismanagement (a passing kernel was lost, or nothing was submitted in time), "
    "rule_and_precision_failure (numerical tolerance or benchmark rules)."
)
TRAJECTORY_CHARS = 12_000  # the trajectory's tail shown to the model


def _schema(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": {
        "type": "object", "properties": properties, "required": sorted(properties), "additionalProperties": False,
    }}}  # fmt: skip


class LlmLabeler:
    """Asks a model through litellm, with a JSON schema per question; records every exchange."""

    def __init__(self, model: str, params: dict[str, Any] | None = None) -> None:
        self.model = model
        self.name = f"llm:{model}"
        self.params = dict(params or {})
        self.exchanges: list[dict[str, Any]] = []
        self.answered = False  # some call succeeded: later failures are recorded, not fatal

    def categories(self, sentences: Sequence[str]) -> list[str] | None:
        numbered = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(sentences))
        schema = _schema("skill_categories", {"categories": {"type": "array", "items": {"enum": list(CATEGORIES)}}})
        reply = self._ask(f"{_RUBRIC}\nAnswer with one category per sentence, in order.", numbered, schema)
        values = reply.get("categories") if reply else None
        if not isinstance(values, list) or len(values) != len(sentences) or not set(values) <= set(CATEGORIES):
            return None
        return [str(v) for v in values]

    def follow(self, t: Treatment) -> str | None:
        schema = _schema("follow_level", {"follow": {"enum": list(FOLLOW_LEVELS)}})
        reply = self._ask(_FOLLOW, self._context(t), schema)
        value = reply.get("follow") if reply else None
        return value if value in FOLLOW_LEVELS else None

    def failure(self, t: Treatment) -> str | None:
        schema = _schema("failure_class", {"failure_class": {"enum": list(FAILURE_CLASSES)}})
        context = self._context(t) + f"\n\nFinal verifier failure: {t.final_failure}"
        reply = self._ask(_FAILURES, context, schema)
        value = reply.get("failure_class") if reply else None
        return value if value in FAILURE_CLASSES else None

    @staticmethod
    def _context(t: Treatment) -> str:
        trajectory = "\n".join(t.steps)[-TRAJECTORY_CHARS:]
        return f"## Skill the attempt read\n\n{t.skill}\n\n## The attempt's trajectory (tail)\n\n{trajectory}"

    def _ask(self, system: str, user: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        from mkbsim.agents._model import ModelClient, ModelConfig

        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        config = ModelConfig(model=self.model, params={**self.params, "response_format": schema}, name=self.name,
                             request_timeout_s=120.0, max_retries=3)  # fmt: skip
        exchange: dict[str, Any] = {"model": self.model, "messages": messages, "schema": schema["json_schema"]["name"]}
        self.exchanges.append(exchange)
        try:
            completion = ModelClient(config).complete(messages, time_left=lambda: 600.0, on_retry=lambda _: None)
        except Exception as exc:  # a failed call is recorded and leaves the label empty
            if not self.answered:  # a model that never answers (no key, wrong endpoint) stops the run
                raise UserError(f"labeler {self.name}: the model call failed: {exc}") from exc
            exchange["error"] = f"{type(exc).__name__}: {exc}"
            return None
        self.answered = True
        exchange["reply"] = completion.text
        try:
            parsed = json.loads(completion.text)
        except json.JSONDecodeError as exc:
            exchange["error"] = f"reply is not JSON: {exc}"
            return None
        return parsed if isinstance(parsed, dict) else None


def make_labeler(spec: str, params: dict[str, Any] | None = None) -> Labeler:
    """The labeler ``spec`` names. An LLM labeler's ``params`` go to litellm as they are (no temperature
    unless given: some models, e.g. gpt-5-mini, accept only their default); its credentials are checked
    here, before any call, as ``mkbsim run`` does."""
    if spec == "heuristic":
        return HeuristicLabeler()
    if spec.startswith("llm:") and len(spec) > 4:
        from mkbsim.agents._model import RESERVED_PARAMS, ModelConfig

        params = dict(params or {})
        reserved = sorted(set(params) & (RESERVED_PARAMS | {"response_format"}))
        if reserved:
            raise UserError(f"labeler {spec}: parameter {reserved[0]!r} is set by mkbsim itself")
        missing = [] if "api_base" in params else ModelConfig(spec[4:], params).missing_keys()
        if missing:
            raise UserError(f"labeler {spec}: {', '.join(missing)} not set (export it, or name the variable "
                            "with --api-key-env)")  # fmt: skip
        return LlmLabeler(spec[4:], params)
    raise UserError(f"unknown labeler {spec!r}: expected heuristic or llm:MODEL")


# -- recording labels ---------------------------------------------------------------------------------


def label(store: EventStore, done: set[tuple[str, str]], material: Material, labeler: Labeler) -> dict[str, int]:
    """Label every skill, treatment and harmed failure of ``material`` not in ``done`` (the (subject, subject
    id) pairs ``labeler`` labeled before: ``lab.skills.labeled``), appending to ``store``; returns counts."""
    counts = {"skills": 0, "follow": 0, "failure": 0}
    pending: list[NewEvent] = []

    def emit(subject: str, subject_id: str, labels: dict[str, Any]) -> None:
        if labeler.exchanges:
            labels["exchanges"], labeler.exchanges = labeler.exchanges, []
        pending.append(NewEvent.of(attempt_stream(subject_id), LabelAssigned(
            subject=subject, subject_id=subject_id, labeler=labeler.name, labels=labels)))  # type: ignore[arg-type]  # fmt: skip
        if len(pending) >= 1000:
            store.append(pending)
            pending.clear()

    for attempt, text in sorted(material.skills.items()):
        if ("skill", attempt) in done:
            continue
        sentences = [c.text for c in extract_claims(text)]
        categories = labeler.categories(sentences)
        labelled = [{"text": s, "category": c} for s, c in zip(sentences, categories or [], strict=False)]
        emit("skill", attempt, {"sentences": labelled})
        counts["skills"] += categories is not None
    harmed = set(material.harmed_failures)
    for attempt, t in sorted(material.treatments.items()):
        if ("comparison", attempt) in done:
            continue
        labels: dict[str, Any] = {"follow": labeler.follow(t)}
        counts["follow"] += labels["follow"] is not None
        if attempt in harmed:
            labels["failure_class"] = labeler.failure(t)
            counts["failure"] += labels["failure_class"] is not None
        emit("comparison", attempt, labels)
    if pending:
        store.append(pending)
    return counts


# -- quality and agreement ---------------------------------------------------------------------------


def quality(truth: Labels, labeled: Labels, harmed: Iterable[str]) -> dict[str, Any]:
    """Per-label precision/recall of ``labeled`` against ``truth`` on the subjects both labeled
    (failure classes: only the harmed comparisons with a target-side failure)."""
    from mkbsim.skills._agreement import precision_recall

    out: dict[str, Any] = {}
    harmed_set = set(harmed)
    for aspect, a, b in _aspects(truth, labeled):
        keys = [k for k in a.keys() & b.keys() if aspect != "failure" or k in harmed_set]
        keys.sort()
        t, p = [a[k] for k in keys], [b[k] for k in keys]
        out[aspect] = {"n": len(keys), "accuracy": sum(map(str.__eq__, t, p)) / len(keys) if keys else None,
                       "labels": precision_recall(t, p)}  # fmt: skip
    return out


def kappas(labels: dict[str, Labels]) -> list[dict[str, Any]]:
    """Cohen's kappa per aspect for every pair of labelers, on the subjects both labeled."""
    from mkbsim.skills._agreement import cohen_kappa

    rows = []
    names = sorted(labels)
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            row: dict[str, Any] = {"a": x, "b": y}
            for aspect, a, b in _aspects(labels[x], labels[y]):
                keys = sorted(a.keys() & b.keys())
                row[aspect] = cohen_kappa([a[k] for k in keys], [b[k] for k in keys])
                row[f"{aspect}_n"] = len(keys)
            rows.append(row)
    return rows


def _aspects(a: Labels, b: Labels) -> list[tuple[str, dict[Any, str], dict[Any, str]]]:
    return [("categories", a.sentences, b.sentences), ("follow", a.follow, b.follow),
            ("failure", a.failure, b.failure)]  # fmt: skip
