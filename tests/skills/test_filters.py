"""skill_filters: the built-ins on hand-written skills, composition, lookup errors, entry-point plugins."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from skills_kit import cli

import skill_filters
from mkbsim.claims import extract_claims
from mkbsim.errors import UserError

SKILL = textwrap.dedent("""\
    # p28: notes from a TIRx attempt

    ## What worked

    - A fused kernel measured 3.2x over eager at the production shape.
    - Eager PyTorch handles the final reshape; the DSL kernel does the reduction.
    - It failed with wrong outputs at first because the accumulator overflowed in half precision.
    - This holds only when the sequence length is a multiple of 128.

    ## Open points

    - A split-K variant is not worth pursuing for this problem.
    - A later attempt could try a persistent kernel.
    - Whether a larger tile helps remains unclear.
    - 2.5x is good enough, so there is no need to tune further.
    - Use cute.make_tiled_copy with a 128-bit copy atom for the loads.
""")

CLOSURE = "A split-K variant is not worth pursuing for this problem."
AGENDA = "A later attempt could try a persistent kernel."
RECIPE = "Use cute.make_tiled_copy with a 128-bit copy atom for the loads."


def categories(text: str) -> list[str]:
    return [c.category for c in extract_claims(text)]


def test_the_hand_written_skill_holds_the_categories_the_filters_act_on() -> None:
    assert categories(SKILL) == [
        "evidence_backed_finding", "work_partitioning", "failure_diagnosis", "applicability_condition",
        "unsupported_closure", "agenda_handoff", "open_question", "ambition_capping", "dsl_recipe_leak",
    ]  # fmt: skip


def test_identity_returns_the_text_unchanged() -> None:
    result = skill_filters.get("identity").apply(SKILL)
    assert result.text == SKILL and result.removed == () and result.reasons == () and not result.changed


@pytest.mark.parametrize(
    ("name", "gone", "category"),
    [
        ("drop_unsupported_closure", CLOSURE, "unsupported_closure"),
        ("drop_agenda_handoff", AGENDA, "agenda_handoff"),
        ("drop_dsl_recipes", RECIPE, "dsl_recipe_leak"),
    ],
)
def test_a_dropping_filter_removes_exactly_its_sentences(name: str, gone: str, category: str) -> None:
    result = skill_filters.get(name).apply(SKILL)
    assert gone not in result.text
    assert f"- {gone}" not in result.text and "-\n" not in result.text  # the emptied list item went too
    assert [s.text for s in result.removed] == [gone]
    span = result.removed[0]
    assert SKILL[span.start : span.end] == gone and span.reason == category
    assert len(result.reasons) == 1 and gone in result.reasons[0]
    kept = [c for c in categories(SKILL) if c != category]
    assert categories(result.text) == kept


def test_evidence_only_keeps_only_evidence_backed_content() -> None:
    result = skill_filters.get("evidence_only").apply(SKILL)
    assert set(categories(result.text)) == {"evidence_backed_finding", "work_partitioning", "failure_diagnosis",
                                            "applicability_condition"}  # fmt: skip
    assert {s.reason for s in result.removed} == {"unsupported_closure", "agenda_handoff", "open_question",
                                                 "ambition_capping", "dsl_recipe_leak"}  # fmt: skip
    assert "# p28: notes from a TIRx attempt" in result.text  # headings are structure, not claims


def test_composition_applies_its_parts_left_to_right() -> None:
    both = skill_filters.get("drop_unsupported_closure+drop_agenda_handoff")
    assert both.name == "drop_unsupported_closure+drop_agenda_handoff"
    result = both.apply(SKILL)
    one = skill_filters.get("drop_unsupported_closure").apply(SKILL).text
    assert result.text == skill_filters.get("drop_agenda_handoff").apply(one).text
    assert [s.reason for s in result.removed] == ["unsupported_closure", "agenda_handoff"]
    assert CLOSURE not in result.text and AGENDA not in result.text and RECIPE in result.text


def test_an_unknown_filter_is_a_user_error_naming_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(skill_filters.UnknownFilter, match="drop_agenda_handoff"):
        skill_filters.get("identity+no_such_filter")
    code, _, err = cli(capsys, "filter-test", "--campaign", "x", "--filter", "no_such_filter")
    assert code == 2 and "unknown skill filter 'no_such_filter'" in err


PLUGIN = """
from skill_filters import FilterResult


class Shout:
    name = "shout"
    description = "upper-cases the skill (a test plugin)"

    def apply(self, text):
        return FilterResult(text.upper(), (), ("shout: upper-cased",))
"""


def test_an_entry_point_plugin_is_listed_found_and_composable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "shout_plugin.py").write_text(PLUGIN)
    info = tmp_path / "shout_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shout-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{skill_filters.ENTRY_POINT_GROUP}]\nshout = shout_plugin:Shout\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    builtins = {"identity", "drop_unsupported_closure", "drop_agenda_handoff", "evidence_only", "drop_dsl_recipes"}
    assert set(skill_filters.names()[:5]) == builtins and skill_filters.names()[5:] == ["shout"]
    shout = skill_filters.get("shout")
    assert isinstance(shout, skill_filters.SkillFilter) and shout.apply("a b").text == "A B"
    composed = skill_filters.get("drop_agenda_handoff+shout").apply(SKILL)
    assert AGENDA.upper() not in composed.text and CLOSURE.upper() in composed.text
    assert composed.reasons[-1] == "shout: upper-cased"
    code, out, _ = cli(capsys, "filter-test", "--list")
    assert code == 0
    listed = {line.split()[0] for line in out.splitlines()}
    assert listed == set(skill_filters.names()) and "shout" in listed
    assert "upper-cases the skill" in out


def test_a_plugin_that_is_no_filter_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bad_plugin.py").write_text("def make():\n    return 42\n")
    info = tmp_path / "bad_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{skill_filters.ENTRY_POINT_GROUP}]\nbad = bad_plugin:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserError, match="no name/description/apply"):
        skill_filters.get("bad")
