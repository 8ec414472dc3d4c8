"""`mkbsim report` on a fixture store built from explicit events: hand-computed numbers in table, JSON
and CSV; exports, plots, errors, and the 80-column table."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from metrics.transfer_kit import attempt
from mkbsim.cli import main
from mkbsim.events import EventStore, NewEvent

CT, TC = "cutedsl2tirx", "tirx2cutedsl"
FAIL = {"passed": False, "runtime_ms": None}


def fixture_events() -> list[NewEvent]:
    """Two models × three problems (p01, p02 attention; p03 moe) × both directions, plus a retried
    attempt, a filtered treatment and a pending comparison. Comments give each comparison's r."""
    events: list[NewEvent] = []

    def add(aid: str, arm: str, model: str, problem: str, **kw: Any) -> None:
        family = "moe" if problem == "p03" else "attention"
        events.extend(attempt(aid, arm, model=model, problem=problem, family=family, **kw))

    # alpha p01: C 2.5 ms (speedup 2: tier 4), T 4 ms (speedup 1: tier 3)
    add("a1c", "solo_cutedsl", "alpha", "p01", runtime_ms=2.5, speedup=2.0, plan="full")
    add("a1t", "solo_tirx", "alpha", "p01", runtime_ms=4.0, speedup=1.0, plan="partial")  # eager products
    add("a1ct-crash", "cutedsl2tirx_skill", "alpha", "p01", status="infra_error", **FAIL)  # retried below
    add("a1ct", "cutedsl2tirx_skill", "alpha", "p01", runtime_ms=1.0, speedup=4.0)  # r = 4/1 = 4, above
    add("a1tc", "tirx2cutedsl_skill", "alpha", "p01", runtime_ms=2.0)  # r = 2.5/2 = 5/4 exactly, below
    add("a1ct-f", "cutedsl2tirx_skill", "alpha", "p01", runtime_ms=40.0, filter="drop_closure")  # not plain
    add("a1ct-r1", "cutedsl2tirx_skill", "alpha", "p01", replicate=1, status=None)  # pending
    # alpha p02: C fails, T 1 ms (speedup 0.5: tier 2)
    add("a2c", "solo_cutedsl", "alpha", "p02", **FAIL)
    add("a2t", "solo_tirx", "alpha", "p02", runtime_ms=1.0, speedup=0.5)
    add("a2ct", "cutedsl2tirx_skill", "alpha", "p02", **FAIL)  # break: r = 1/4, below
    add("a2tc", "tirx2cutedsl_skill", "alpha", "p02", runtime_ms=3.0)  # rescue: r = 4, above
    # alpha p03 (moe): C 1 ms (speedup 0.4: tier 1), T fails
    add("a3c", "solo_cutedsl", "alpha", "p03", runtime_ms=1.0, speedup=0.4)
    add("a3t", "solo_tirx", "alpha", "p03", **FAIL)
    add("a3ct", "cutedsl2tirx_skill", "alpha", "p03", skipped=True, **FAIL)  # skipped: r = 1, above
    add("a3tc", "tirx2cutedsl_skill", "alpha", "p03", runtime_ms=1.25)  # r = 1/1.25 = 4/5 exactly, below
    # beta p01: C 1 ms (speedup 8: tier 5), T 1 ms (speedup 4 reaches the last threshold: tier 5)
    add("b1c", "solo_cutedsl", "beta", "p01", runtime_ms=1.0, speedup=8.0)
    add("b1t", "solo_tirx", "beta", "p01", runtime_ms=1.0, speedup=4.0)
    add("b1ct", "cutedsl2tirx_skill", "beta", "p01", runtime_ms=0.2)  # 5 clipped to 4, same
    add("b1tc", "tirx2cutedsl_skill", "beta", "p01", runtime_ms=5.0)  # 0.2 clipped to 1/4, same
    # beta p02: both solos fail
    add("b2c", "solo_cutedsl", "beta", "p02", **FAIL)
    add("b2t", "solo_tirx", "beta", "p02", **FAIL)
    add("b2ct", "cutedsl2tirx_skill", "beta", "p02", **FAIL)  # joint failure: r = 1, same
    add("b2tc", "tirx2cutedsl_skill", "beta", "p02", **FAIL)  # joint failure: r = 1, same
    # beta p03 (moe): C 2 ms (speedup 1: tier 3), T passes the verifier with inline CUDA: scored fail
    add("b3c", "solo_cutedsl", "beta", "p03", runtime_ms=2.0, speedup=1.0)
    add("b3t", "solo_tirx", "beta", "p03", runtime_ms=2.0, speedup=2.0, inline_cuda=True, plan="partial")
    add("b3ct", "cutedsl2tirx_skill", "beta", "p03", runtime_ms=2.0, inline_cuda=False)  # rescue: r = 4, above
    add("b3tc", "tirx2cutedsl_skill", "beta", "p03", runtime_ms=2.2)  # r = 2/2.2, below
    return events


R_B3TC = 2.0 / 2.2
CBRT4 = 4 ** (1 / 3) - 1
# (model, direction, family) → (n, lift, ci, help, harm, helped rescue/runtime, harmed break/runtime, skipped)
EXPECTED_GROUPS: dict[tuple[str, str, str], tuple[Any, ...]] = {
    ("alpha", CT, "all"): (3, 0.0, (-0.75, 3.0), 1 / 3, 1 / 3, (0, 1), (1, 0), 1),
    ("alpha", CT, "attention"): (2, 0.0, (-0.75, 3.0), 0.5, 0.5, (0, 1), (1, 0), 0),
    ("alpha", CT, "moe"): (1, 0.0, (0.0, 0.0), 0.0, 0.0, (0, 0), (0, 0), 1),
    ("alpha", TC, "all"): (3, CBRT4, (-0.2, 3.0), 2 / 3, 1 / 3, (1, 1), (0, 1), 0),
    ("alpha", TC, "attention"): (2, math.sqrt(5) - 1, (0.25, 3.0), 1.0, 0.0, (1, 1), (0, 0), 0),
    ("alpha", TC, "moe"): (1, -0.2, (-0.2, -0.2), 0.0, 1.0, (0, 0), (0, 1), 0),
    ("beta", CT, "all"): (3, 16 ** (1 / 3) - 1, (0.0, 3.0), 2 / 3, 0.0, (1, 1), (0, 0), 0),
    ("beta", CT, "attention"): (2, 1.0, (0.0, 3.0), 0.5, 0.0, (0, 1), (0, 0), 0),
    ("beta", CT, "moe"): (1, 3.0, (3.0, 3.0), 1.0, 0.0, (1, 0), (0, 0), 0),
    ("beta", TC, "all"): (3, (0.25 * R_B3TC) ** (1 / 3) - 1, (-0.75, 0.0), 0.0, 1 / 3, (0, 0), (0, 1), 0),
    ("beta", TC, "attention"): (2, -0.5, (-0.75, 0.0), 0.0, 0.5, (0, 0), (0, 1), 0),
    ("beta", TC, "moe"): (1, R_B3TC - 1, (R_B3TC - 1, R_B3TC - 1), 0.0, 0.0, (0, 0), (0, 0), 0),
}
# p-values with a hand-computable exact distribution (others are checked against scipy)
EXPECTED_P = {("alpha", CT, "all"): (1.0, 1.0), ("alpha", CT, "attention"): (1.0, 1.0),
              ("alpha", CT, "moe"): (None, None), ("beta", CT, "all"): (0.5, 0.5),
              ("alpha", TC, "all"): (None, 1.0)}  # fmt: skip
LOGS = {  # the log r of each cell, for the scipy cross-check
    ("alpha", TC, "attention"): [math.log(1.25), math.log(4.0)],
    ("beta", TC, "all"): [math.log(0.25), 0.0, math.log(R_B3TC)],
}


# r per (model, direction, problem), from the comments above
R = {("alpha", CT): (4.0, 0.25, 1.0), ("alpha", TC): (1.25, 4.0, 0.8), ("beta", CT): (4.0, 1.0, 4.0),
     ("beta", TC): (0.25, 1.0, R_B3TC)}  # fmt: skip


def t_interval(key: tuple[str, str, str]) -> tuple[float, float]:
    """The 95% Student t interval of a cell's lift, computed independently with scipy."""
    from scipy import stats

    model, direction, family = key
    chosen = {"all": (0, 1, 2), "attention": (0, 1), "moe": (2,)}[family]
    logs = [math.log(R[model, direction][i]) for i in chosen]
    k = len(logs)
    mean, sd = sum(logs) / k, stats.tstd(logs)
    half = stats.t.ppf(0.975, k - 1) * sd / math.sqrt(k)
    return math.expm1(mean - half), math.expm1(mean + half)


def approx(x: float) -> Any:
    return pytest.approx(x, rel=1e-12, abs=1e-12)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.sqlite"
    with EventStore(path, create=True) as store:
        store.append(fixture_events())
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def report_json(capsys: pytest.CaptureFixture[str], store: Path, *extra: str) -> dict[str, Any]:
    code, out, _ = run(capsys, "report", "--store", str(store), "--format", "json", *extra)
    assert code == 0
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_json_reproduces_the_hand_computed_groups(capsys: pytest.CaptureFixture[str], store_path: Path) -> None:
    report = report_json(capsys, store_path)
    assert report["campaigns"] == ["c1"] and report["comparisons"] == {"resolved": 12, "pending": 1}
    rows = {(g["model"], g["direction"], g["family"]): g for g in report["groups"]}
    assert list(rows) == list(EXPECTED_GROUPS)  # "all" first, then families; models and directions sorted
    for key, (n, lift, ci, help_, harm, helped, harmed, skipped) in EXPECTED_GROUPS.items():
        g = rows[key]
        assert (g["n"], g["skipped"]) == (n, skipped), key
        assert g["paired_lift"] == approx(lift), key
        if g["problems"] == 1:  # one problem: the bootstrap's degenerate interval
            assert g["paired_lift_ci_method"] == "bootstrap", key
            assert g["paired_lift_ci"] == [approx(ci[0]), approx(ci[1])], key
        else:  # under 20 problems: Student t on mean log r (one comparison per problem here)
            assert g["paired_lift_ci_method"] == "t", key
            assert g["paired_lift_ci"] == [approx(v) for v in t_interval(key)], key
        if g["p"] is None:  # every problem's log r is 0: nothing to flip
            assert g["p_holm"] is None and g["p_bh"] is None and g["paired_lift"] == 0, key
        else:
            assert 0 < g["p"] <= g["p_bh"] <= g["p_holm"] <= 1, key
        assert (g["help_rate"], g["harm_rate"]) == (approx(help_), approx(harm)), key
        assert (g["helped_verdict_change"], g["helped_runtime_only"]) == helped, key
        assert (g["harmed_verdict_change"], g["harmed_runtime_only"]) == harmed, key
        assert g["helped"] + g["harmed"] + g["neutral"] == n
    # exact sign flips: alpha CT's problems sum to log 4, log 1/4 (p 1); beta CT's to log 4, 0, log 4 (p 2/4)
    assert (rows["alpha", CT, "all"]["p"], rows["beta", CT, "all"]["p"]) == (1.0, 0.5)
    for key, (wilcoxon, sign) in EXPECTED_P.items():
        if wilcoxon is not None or key[2] == "moe":
            assert rows[key]["wilcoxon_p"] == wilcoxon, key
        assert rows[key]["sign_p"] == sign, key
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, logs in LOGS.items():
            assert rows[key]["wilcoxon_p"] == pytest.approx(stats.wilcoxon(logs).pvalue, rel=1e-12), key


def test_json_reproduces_standing_sensitivity_asymmetry_and_solo(
    capsys: pytest.CaptureFixture[str], store_path: Path
) -> None:
    report = report_json(capsys, store_path)
    standing = {(r["model"], r["standing"]): (r["n"], r["helped"], r["harmed"], r["paired_lift"])
                for r in report["standing"]}  # fmt: skip
    assert standing == {
        ("all", "above"): (4, 3, 0, approx(64**0.25 - 1)),
        ("all", "same"): (4, 1, 1, approx(0.0)),
        ("all", "below"): (4, 1, 2, approx((0.25 * 1.25 * 0.8 * R_B3TC) ** 0.25 - 1)),
        ("alpha", "above"): (3, 2, 0, approx(16 ** (1 / 3) - 1)),
        ("alpha", "below"): (3, 1, 2, approx(0.25 ** (1 / 3) - 1)),
        ("beta", "above"): (1, 1, 0, approx(3.0)),
        ("beta", "same"): (4, 1, 1, approx(0.0)),
        ("beta", "below"): (1, 0, 0, approx(R_B3TC - 1)),
    }
    pooled_above = next(r for r in report["standing"] if (r["model"], r["standing"]) == ("all", "above"))
    assert (pooled_above["help_rate"], pooled_above["harm_rate"]) == (0.75, 0.0)

    sensitivity = {(r["model"], r["direction"]): r for r in report["sensitivity"]}
    assert [(r["best_family"], r["families_positive"], r["families_negative"], r["sign_change"])
            for r in sensitivity.values()] == [("attention", 0, 0, False), ("attention", 1, 1, True),
                                               ("moe", 2, 0, False), ("moe", 0, 2, False)]  # fmt: skip
    alpha_tc = sensitivity["alpha", TC]
    assert alpha_tc["paired_lift"] == approx(CBRT4) and alpha_tc["best_family_lift"] == approx(math.sqrt(5) - 1)
    assert (alpha_tc["lift_without_best"], alpha_tc["n_without_best"]) == (approx(-0.2), 1)
    assert sensitivity["beta", CT]["lift_without_best"] == approx(1.0)

    asymmetry = {r["model"]: r for r in report["asymmetry"]}
    assert [(r["helped"], r["reverse_resolved"], r["reverse_harmed"], r["reverse_helped"], r["reverse_neutral"])
            for r in asymmetry.values()] == [(5, 5, 2, 2, 1), (3, 3, 1, 2, 0), (2, 2, 1, 0, 1)]  # fmt: skip
    assert (asymmetry["all"]["reverse_harmed_share"], asymmetry["all"]["reverse_helped_share"]) == (0.4, 0.4)

    solo = {(r["model"], r["dsl"], r["family"]): r for r in report["solo"]}
    expected_solo = {  # n, scored passes, inline CUDA passes, scored passes as partial plans, speedup
        ("alpha", "cutedsl"): (3, 2, 0, 0, math.sqrt(2.0 * 0.4)),
        ("alpha", "tirx"): (3, 2, 0, 1, math.sqrt(0.5)),
        ("beta", "cutedsl"): (3, 2, 0, 0, math.sqrt(8.0)),
        ("beta", "tirx"): (3, 1, 1, 0, 4.0),  # the inline-CUDA pass (a partial plan too) is not a scored pass
        ("alpha", "all"): (6, 4, 0, 1, (2.0 * 0.4 * 1.0 * 0.5) ** 0.25),
    }
    for (model, dsl), (n, passed, inline, partial, speedup) in expected_solo.items():
        r = solo[model, dsl, "all"]
        assert (r["n"], r["passed"], r["inline_cuda_excluded"], r["partial_plans"]) == (n, passed, inline, partial)
        assert r["pass_rate"] == approx(passed / n) and r["speedup_geomean"] == approx(speedup)
    assert solo["beta", "tirx", "moe"]["speedup_geomean"] is None


def test_csv_carries_the_json_numbers_exactly(capsys: pytest.CaptureFixture[str], store_path: Path) -> None:
    report = report_json(capsys, store_path)
    code, out, _ = run(capsys, "report", "--store", str(store_path), "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == len(report["groups"]) == len(EXPECTED_GROUPS)
    for row, g in zip(rows, report["groups"], strict=True):
        assert (row["model"], row["direction"], row["family"], int(row["n"])) == (
            g["model"], g["direction"], g["family"], g["n"])  # fmt: skip
        for key in ("paired_lift", "help_rate", "harm_rate"):
            assert float(row[key]) == g[key]  # repr round-trips: the same float, not a rounded one
        assert [float(row["paired_lift_ci_lo"]), float(row["paired_lift_ci_hi"])] == g["paired_lift_ci"]
        assert row["wilcoxon_p"] == ("" if g["wilcoxon_p"] is None else repr(g["wilcoxon_p"]))
    first = rows[0]
    assert (first["model"], first["direction"], first["family"], first["paired_lift"]) == ("alpha", CT, "all", "0.0")


def test_table_shows_the_hand_computed_numbers(capsys: pytest.CaptureFixture[str], store_path: Path) -> None:
    code, out, _ = run(capsys, "report", "--store", str(store_path))
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "12 resolved comparisons, 1 pending (plain protocol)" in out

    def section(heading: str) -> dict[str, list[str]]:
        start = lines.index(heading)
        rows = {}
        for line in lines[start + 2 :]:
            if not line:
                break
            rows[line.split()[0]] = line.split()[1:]
        return rows

    def t_cells(key: tuple[str, str, str]) -> list[str]:  # a t interval as the table prints it (starred)
        lo, hi = t_interval(key)
        return [f"[{lo * 100:+.1f},", f"{hi * 100:+.1f}]*"]

    alpha_ct = section("alpha · cutedsl→tirx")
    assert alpha_ct["all"] == ["3", "+0.0%", *t_cells(("alpha", CT, "all")), "33.3%", "33.3%", "0", "1", "1.000",
                               "1.000"]  # fmt: skip
    assert alpha_ct["moe"] == ["1", "+0.0%", "[+0.0,", "+0.0]", "0.0%", "0.0%", "0", "0", "–", "–"]
    alpha_tc = section("alpha · tirx→cutedsl")
    assert alpha_tc["all"][:8] == ["3", "+58.7%", *t_cells(("alpha", TC, "all")), "66.7%", "33.3%", "1", "0"]
    assert alpha_tc["attention"][:6] == ["2", "+123.6%", *t_cells(("alpha", TC, "attention")), "100.0%", "0.0%"]
    beta_tc = section("beta · tirx→cutedsl")
    assert beta_tc["all"][:6] == ["3", "-39.0%", *t_cells(("beta", TC, "all")), "0.0%", "33.3%"]
    standing = [line.split() for line in lines if line.startswith("all ") and ("above" in line or "below" in line)]
    assert standing == [["all", "above", "4", "75.0%", "0.0%", "+182.8%"], ["all", "below", "4", "25.0%", "50.0%",
                                                                             "-31.0%"]]  # fmt: skip
    assert any(line.split() == ["beta", "tirx", "3", "33.3%", "4.00×", "1", "0"] for line in lines)
    assert any(line.split() == ["alpha", "tirx", "3", "66.7%", "0.71×", "0", "1"] for line in lines)  # a partial plan


def test_by_pools_the_dimensions_left_out(capsys: pytest.CaptureFixture[str], store_path: Path) -> None:
    report = report_json(capsys, store_path, "--by", "direction,model")
    assert [(g["model"], g["direction"], g["family"], g["n"]) for g in report["groups"]] == [
        ("alpha", CT, "all", 3), ("alpha", TC, "all", 3), ("beta", CT, "all", 3), ("beta", TC, "all", 3)]  # fmt: skip
    pooled = report_json(capsys, store_path, "--by", "family", "--campaign", "c1")["groups"]
    assert [(g["model"], g["direction"], g["family"], g["n"]) for g in pooled] == [
        ("all", "all", "all", 12), ("all", "all", "attention", 8), ("all", "all", "moe", 4)]  # fmt: skip
    assert pooled[0]["paired_lift"] == approx((4 * 0.25 * 1 * 1.25 * 4 * 0.8 * 4 * 1 * 4 * 0.25 * 1 * R_B3TC)
                                              ** (1 / 12) - 1)  # fmt: skip
    by_campaign = report_json(capsys, store_path, "--by", "campaign,model")["groups"]
    assert [(g["campaign"], g["model"], g["n"]) for g in by_campaign] == [("c1", "alpha", 6), ("c1", "beta", 6)]
    code, out, _ = run(capsys, "report", "--store", str(store_path), "--by", "model")
    assert code == 0 and all(len(line) <= 80 for line in out.splitlines())


def test_exports_and_plots(capsys: pytest.CaptureFixture[str], store_path: Path, tmp_path: Path) -> None:
    import pandas as pd

    code, out, _ = run(capsys, "report", "--store", str(store_path), "--export", str(tmp_path / "x"),
                       "--plots", str(tmp_path / "p"))  # fmt: skip
    assert code == 0 and "wrote 3 figures" in out
    for name in ("lift_by_model_direction", "help_harm_by_standing", "lift_by_family_heatmap"):
        png = (tmp_path / "p" / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    comparisons = pd.read_parquet(tmp_path / "x" / "comparisons.parquet")
    assert len(comparisons) == 14  # 12 plain (resolved), the filtered one, the pending one
    assert len(pd.read_csv(tmp_path / "x" / "comparisons.csv")) == 14
    assert len(pd.read_parquet(tmp_path / "x" / "transfer_attempts.parquet")) == 27
    assert len(pd.read_parquet(tmp_path / "x" / "attempts.parquet")) == 27
    groups = pd.read_parquet(tmp_path / "x" / "report_groups.parquet")
    assert list(groups.columns[:5]) == ["model", "direction", "family", "n", "problems"]
    assert groups["paired_lift_ci_lo"].iloc[0] == pytest.approx(t_interval(("alpha", CT, "all"))[0])
    for section in ("solo", "standing", "sensitivity", "asymmetry"):
        assert len(pd.read_csv(tmp_path / "x" / f"report_{section}.csv")) > 0


def test_user_mistakes_are_one_line_errors(capsys: pytest.CaptureFixture[str], store_path: Path,
                                           tmp_path: Path) -> None:  # fmt: skip
    missing = tmp_path / "nope.sqlite"
    code, _, err = run(capsys, "report", "--store", str(missing))
    assert code == 2 and "no such event store" in err and len(err.strip().splitlines()) == 1
    assert not missing.exists()
    EventStore(tmp_path / "empty.sqlite", create=True).close()
    code, _, err = run(capsys, "report", "--store", str(tmp_path / "empty.sqlite"))
    assert code == 2 and "no events yet" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "report", "--store", str(store_path), "--campaign", "c9")
    assert code == 2 and "unknown campaign 'c9' (known: c1)" in err
    (tmp_path / "file").write_text("")
    code, _, err = run(capsys, "report", "--store", str(store_path), "--plots", str(tmp_path / "file"))
    assert code == 2 and "not a directory" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--store", str(store_path), "--by", "model,colour"])
    assert exit_info.value.code == 2 and "expected dimensions" in capsys.readouterr().err


def test_a_store_without_comparisons_reports_what_it_has(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "solo.sqlite"
    with EventStore(path, create=True) as store:
        store.append(attempt("t", "solo_tirx", runtime_ms=0.5) + attempt("c", "solo_cutedsl", status=None))
    code, out, _ = run(capsys, "report", "--store", str(path))
    assert code == 0 and "No resolved comparison yet" in out and "tirx" in out
    assert report_json(capsys, path)["groups"] == []
    code, out, _ = run(capsys, "report", "--store", str(path), "--format", "csv")
    assert out.startswith("model,direction,family,n,problems,paired_lift,paired_lift_ci_lo,paired_lift_ci_hi,")


def test_table_fits_80_columns_with_long_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "long.sqlite"
    model = "deepseek/deepseek-v4-pro-2026-preview-extended-context"
    runtimes = {"solo_cutedsl": 1.0, "solo_tirx": 2.0, "cutedsl2tirx_skill": 1.0, "tirx2cutedsl_skill": 3.0}
    events = []
    for arm, ms in runtimes.items():
        events += attempt(arm, arm, model=model, family="linear_attention", campaign="campaign-" + "x" * 70,
                          runtime_ms=ms)  # fmt: skip
    with EventStore(path, create=True) as store:
        store.append(events)
    code, out, _ = run(capsys, "report", "--store", str(path))
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "deepseek/deepseek" in out and "…" in out


def test_the_report_module_imports_nothing_heavy() -> None:
    heavy = "{'numpy', 'scipy', 'matplotlib', 'pandas', 'pyarrow', 'rich'}"
    probe = f"import sys, mkbsim.cli._report; print(sorted({heavy} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_program_prints_the_whole_report_and_stops_without_teardown(
    capsys: pytest.CaptureFixture[str], store_path: Path
) -> None:
    # `python -m mkbsim report` skips the interpreter's teardown once it has written everything: its output
    # into a pipe (block-buffered) must still be whole, and equal to the report of an in-process call
    in_process = run(capsys, "report", "--store", str(store_path), "--format", "json")[1]
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    for extra in (("--format", "json"), ()):
        program = subprocess.run([sys.executable, "-m", "mkbsim", "report", "--store", str(store_path), *extra],
                                 capture_output=True, text=True, check=True, env=buffered)  # fmt: skip
        assert program.stdout == (in_process if extra else run(capsys, "report", "--store", str(store_path))[1])
        assert program.stderr == ""
