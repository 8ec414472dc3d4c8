"""Skill writing (natural language, never code; true categories as labels) and skill reading (text only)."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

from mkbsim.campaigns import CampaignSummary
from mkbsim.claims import CATEGORIES, classify, remove_categories
from mkbsim.events import EventStore
from mkbsim.simulator import get_profile
from mkbsim.simulator._reader import read_skill
from mkbsim.simulator._rng import Draws

# what code, commands or API calls look like in prose
CODE = re.compile(r"`|\w\(|\)\s*:|=|->|\bimport\b|\bdef\b|\breturn\b|[{}\[\]]|::|\$ |^\s{4}", re.MULTILINE)


def _labelled_sentences(path: Path) -> list[dict[str, object]]:
    with EventStore(path) as store:
        return [s for ev in store.read(types=["LabelAssigned"]) if ev.payload["subject"] == "skill"
                for s in ev.payload["labels"]["sentences"]]  # fmt: skip


def test_skills_never_contain_code(small_campaign: tuple[Path, CampaignSummary]) -> None:
    with EventStore(small_campaign[0]) as store:
        skills = [ev.payload["text"] for ev in store.read(types=["SkillWritten"])]
    assert len(skills) > 100
    for text in skills:
        body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        assert not CODE.search(body), CODE.search(body)


def test_skills_use_most_of_the_rubric_and_the_extractor_recovers_the_true_categories(
    small_campaign: tuple[Path, CampaignSummary],
) -> None:
    sentences = _labelled_sentences(small_campaign[0])
    truth = Counter(str(s["category"]) for s in sentences)
    assert len(truth) >= 10 and set(truth) <= set(CATEGORIES)
    agree = sum(classify(str(s["text"])).category == s["category"] for s in sentences)
    assert agree / len(sentences) >= 0.9
    phrasings = {str(s["text"]) for s in sentences if s["category"] == "unsupported_closure"}
    assert len(phrasings) >= 10  # varied phrasings, not one template


SKILL = """# p62: notes from a CuTe DSL attempt

## What worked

The chunked form of the recurrence passed verification at 12.0x over eager (0.412 ms).

## Open points

There is no benefit in a single fused kernel; the current version is already at the limit.
Next step: try the tiled, vectorised fused kernel.
A 12.0x speedup is good enough for this problem; going further is not needed.
"""


def test_the_reader_acts_on_what_the_text_says() -> None:
    reader = get_profile("sim-glm-5.3").replace({"follow": 1.0, "reverify": 0.0})
    g = read_skill(SKILL, reader, Draws(1))
    assert g.pruned == {"fused"}
    assert g.agenda == ["fused_tiled"]
    assert g.belief["reformulated"] == math.log(12.0) and "reformulated" in g.committed
    assert g.cap == 12.0
    assert g.follow == "full"


def test_the_reader_never_sees_what_a_filter_removed() -> None:
    reader = get_profile("sim-glm-5.3").replace({"follow": 1.0, "reverify": 0.0})
    filtered = remove_categories(SKILL, {"unsupported_closure"})
    g = read_skill(filtered, reader, Draws(1))
    assert not g.pruned
    assert all("no benefit" not in a.text for a in g.adoptions)
    assert g.agenda == ["fused_tiled"]  # the rest of the skill still acts


def test_how_fully_a_skill_is_followed_comes_from_the_profile() -> None:
    ignoring = get_profile("sim-glm-5.3").replace({"follow": 0.0})
    g = read_skill(SKILL, ignoring, Draws(1))
    assert g.follow == "none" and not (g.pruned or g.agenda or g.belief or g.cap is not None)
    checking = get_profile("sim-glm-5.3").replace({"follow": 1.0, "reverify": 1.0})
    g = read_skill(SKILL, checking, Draws(1))
    assert not g.pruned and "fused" in g.considered  # the closure was checked instead of believed
    assert [a.decision for a in g.adoptions if a.category == "unsupported_closure"] == ["reverified"]
