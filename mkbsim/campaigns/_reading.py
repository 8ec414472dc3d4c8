"""What a planned attempt reads, decided once the attempts it depends on have finished (DESIGN §4).

The skill is transferred verbatim (through the campaign's filter, if any), whether or not its writer
passed; the runner shows it under the neutral header. A source that left no skill — or one the filter
empties — skips the attempt, and so does a placebo none of whose donors left one.
"""

from __future__ import annotations

from collections.abc import Mapping

from mkbsim.campaigns._attempt import AttemptTask, PlannedAttempt, SkillText, SkillTransform
from mkbsim.campaigns._controls import neutral_note

NO_SKILL = "the source attempt left no skill"
FILTERED_AWAY = "the skill filter emptied the source's skill"
NO_DONOR = "no other problem of the family left a skill"


def prepare(
    campaign_id: str,
    attempt: PlannedAttempt,
    skills: Mapping[str, SkillText],
    transform: SkillTransform | None = None,
) -> AttemptTask | str:
    """``attempt``'s task, or why it is skipped. ``skills``: the skills of the attempts it depends on."""
    if attempt.source is None:
        return AttemptTask(campaign_id, attempt)
    source = skills[attempt.source]
    text, why = _transferred(source, transform)
    if not text:
        return why
    if attempt.donors:
        for problem, donor in attempt.donors:
            other, _ = _transferred(skills[donor], transform)
            if other:
                return AttemptTask(campaign_id, attempt, other, donor, problem, skills[donor].labels)
        return NO_DONOR
    if attempt.neutral_note:
        from mkbsim.claims import segment

        note = neutral_note(len(text), len(segment(text)))
        return AttemptTask(campaign_id, attempt, note, attempt.source)
    return AttemptTask(campaign_id, attempt, text, attempt.source, source_labels=source.labels)


def _transferred(skill: SkillText, transform: SkillTransform | None) -> tuple[str, str]:
    """The text a reader gets of ``skill`` (empty: nothing to read), and why it is empty."""
    if not skill.text or not skill.text.strip():
        return "", NO_SKILL
    text = transform.apply(skill.text) if transform is not None else skill.text
    return (text, "") if text.strip() else ("", FILTERED_AWAY)
