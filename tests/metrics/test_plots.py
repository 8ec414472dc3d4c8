"""The figures: every one names its campaign, the forest plot draws each control arm beside the
treatment, the chain and filter-test figures draw what their reports hold."""

from __future__ import annotations

from typing import Any

import pytest

from mkbsim.metrics._plots import (
    _help_harm_by_standing,
    _lift_forest,
    _lift_heatmap,
    campaign_note,
    chain_figure,
    filter_test_figure,
)

pytest.importorskip("matplotlib")


def _lift_row(model: str, direction: str, lift: float, **extra: Any) -> dict[str, Any]:
    return {"model": model, "direction": direction, "family": "all", "n": 10, "paired_lift": lift,
            "paired_lift_ci": [lift - 0.1, lift + 0.1]} | extra  # fmt: skip


def _titles(fig: Any) -> str:
    texts = [ax.get_title() for ax in fig.axes]
    if fig._suptitle is not None:
        texts.append(fig._suptitle.get_text())
    return "\n".join(texts)


def test_campaign_note_names_one_campaign_or_the_pooled_ones() -> None:
    assert campaign_note(["sim-1"]) == "campaign sim-1"
    assert campaign_note(["a", "b"]) == "campaigns a, b (pooled)"
    assert campaign_note(["a", "b", "c", "d"]) == "campaigns a, b and 2 more (pooled)"


def test_the_forest_plot_puts_each_control_arm_beside_the_treatment() -> None:
    groups = [_lift_row(m, d, 0.1) for m in ("alpha", "beta") for d in ("cutedsl2tirx", "tirx2cutedsl")]
    groups += [_lift_row("all", "all", 0.1), _lift_row("alpha", "cutedsl2tirx", 0.3) | {"family": "moe"}]
    controls = [_lift_row(m, d, -0.05, arm=arm) for arm in ("aa", "placebo") for m in ("alpha", "beta", "all")
                for d in ("cutedsl2tirx", "tirx2cutedsl")]  # fmt: skip
    fig = _lift_forest(groups, controls, "campaign sim-x")
    ax = fig.axes[0]
    series = {c.get_label(): c for c in ax.containers}
    assert set(series) == {"skill (treatment)", "A/A: a second solo", "placebo: another problem's skill"}
    for container in series.values():  # one point per model × direction: pooled rows and families left out
        assert len(container.lines[0].get_xdata()) == 4
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "alpha · cutedsl → tirx",
        "alpha · tirx → cutedsl",
        "beta · cutedsl → tirx",
        "beta · tirx → cutedsl",
    ]
    assert "campaign sim-x" in _titles(fig) and "control arms" in _titles(fig)
    without = _lift_forest(groups, [], "campaign sim-x")
    assert [c.get_label() for c in without.axes[0].containers] == ["skill (treatment)"]


def test_every_report_figure_names_its_campaign() -> None:
    standing = [{"model": m, "standing": s, "n": 5, "help_rate": 0.2, "harm_rate": 0.1}
                for m in ("all", "alpha") for s in ("above", "same", "below")]  # fmt: skip
    cells = [_lift_row("alpha", "cutedsl2tirx", 0.1) | {"family": f} for f in ("moe", "all")]
    for fig in (_help_harm_by_standing(standing, "campaign sim-y"), _lift_heatmap(cells, "campaign sim-y")):
        assert "campaign sim-y" in _titles(fig)


def test_the_chain_figure_draws_each_model_and_the_pooled_cell_with_intervals() -> None:
    rows = []
    for model in ("all", "alpha", "beta"):
        for hop in (1, 2, 3):
            rows.append({"model": model, "hop": hop, "paired_lift": 0.1 * hop, "paired_lift_ci": [0.0, 0.4],
                         "pass_rate": 0.8, "pass_rate_ci": [0.7, 0.9], "origin_survival": 0.3 / hop,
                         "origin_survival_ci": [0.0, 0.5], "carried": 0.2, "carried_ci": [0.1, 0.3],
                         "unverified_carried": None, "unverified_carried_ci": None})  # fmt: skip
    fig = chain_figure(rows, "chain-abc", "lexical word-count cosine")
    lift, _, survival = fig.axes[:3]
    assert [line.get_label() for line in lift.lines][:2] == ["alpha", "beta"]
    assert list(lift.lines[0].get_ydata()) == pytest.approx([10.0, 20.0, 30.0])
    assert [c.get_label() for c in survival.containers] == ["origin's claims kept", "previous hop's claims carried",
                                                            "previous hop's unverified claims carried"]  # fmt: skip
    assert len(survival.containers[2].lines[0].get_xdata()) == 0  # no unverified claims: nothing drawn
    assert "chain campaign chain-abc" in _titles(fig)


def test_the_filter_test_figure_names_both_campaigns_and_each_cells_change() -> None:
    rows = [{"model": m, "direction": d, "lift_unfiltered": 0.0, "lift_unfiltered_ci": [-0.1, 0.1],
             "lift_filtered": 0.05, "lift_filtered_ci": [-0.05, 0.15], "lift_change": 0.05,
             "lift_change_ci": None if m == "beta" else [0.0, 0.1], "p_holm": None if m == "beta" else 0.5}
            for m, d in (("alpha", "cutedsl2tirx"), ("alpha", "all"), ("beta", "all"), ("all", "all"))]  # fmt: skip
    fig = filter_test_figure(rows, "drop_x", "sim-base", "sim-filtered")
    assert "Filter test drop_x: campaign sim-filtered vs sim-base" in _titles(fig)
    change = fig.axes[1]
    assert [t.get_text() for t in change.texts] == ["p=0.5", "p=0.5", "no change", "p=0.5"]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][-1] == "all models · both directions"
