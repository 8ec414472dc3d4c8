"""THE key test: remove every unsupported-closure sentence from the skills of a seeded campaign, re-run
the skill-conditioned attempts against the same solo baselines, and see the lift change the model predicts.

The model's prediction. A closure is written about a plan its writer failed at or never tried, so it
rules out plans without evidence; a reader that adopts it (without re-checking) drops the plan from
its search, and where that plan was the way to a better kernel the attempt ends slower or failing.
Removing the closures — and nothing else: the reruns reuse the original treatments' seeds, and the luck
of acting on a sentence belongs to that sentence — must leave every comparison whose source skill held
no closure exactly as it was, and raise the lift of the comparisons whose skill held one.
Predicted size (seed 0, the six shipped profiles, every second problem): about +10 points of paired
lift on the affected comparisons (−7% → +5%), about +4.5 points pooled (+5% → +9%), about 4 points
fewer harmed among the affected; concentrated in the profile that writes and believes closures
(GLM-5.3-Flash-like: about +19 points pooled), near zero for the one that checks claims before using
them (GPT-5.6-Sol-like).
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

from mkbsim.campaigns import SimCampaign, SkillTransform, rerun_campaign, run_campaign
from mkbsim.claims import extract_claims, remove_categories
from mkbsim.events import EventStore
from mkbsim.metrics import harm_rate, paired_lift
from mkbsim.projections import ProjectionEngine, default_projections
from mkbsim.simulator import CampaignConfig, select_problems, shipped_profiles

FILTER = "drop_unsupported_closure"
Key = tuple[str, str, str, int]


def _ratios(conn: sqlite3.Connection, campaign: str) -> dict[Key, tuple[float, str]]:
    rows = conn.execute(
        "SELECT model, problem, direction, replicate, r, source_attempt_id FROM comparisons"
        " WHERE campaign_id = ? AND resolved = 1",
        (campaign,),
    )
    return {(m, p, d, rep): (r, source) for m, p, d, rep, r, source in rows}


def test_removing_unsupported_closures_raises_lift_where_skills_had_them(tmp_path: Path) -> None:
    problems = tuple(select_problems(None)[::2])
    config = CampaignConfig(tuple(shipped_profiles().values()), problems, seed=0)
    with EventStore(tmp_path / "events.sqlite", create=True) as store:
        original = run_campaign(store, SimCampaign(config))
        drop = SkillTransform(FILTER, lambda text: remove_categories(text, {"unsupported_closure"}))
        filtered = run_campaign(store, rerun_campaign(store, original.campaign_id, FILTER), skill_filter=drop)
        ProjectionEngine(store, default_projections()).catch_up()
        before = _ratios(store.connection, original.campaign_id)
        after = _ratios(store.connection, filtered.campaign_id)
        skills = {ev.payload["attempt_id"]: ev.payload["text"] for ev in store.read(types=["SkillWritten"])}
    assert set(before) == set(after) and len(before) == len(config.profiles) * len(problems) * 2

    def had_closure(key: Key) -> bool:
        text = skills.get(before[key][1], "")
        return any(c.category == "unsupported_closure" for c in extract_claims(text))

    affected = [k for k in before if had_closure(k)]
    untouched = [k for k in before if not had_closure(k)]
    assert len(affected) >= 60 and len(untouched) >= 60
    # nothing but the removed sentences differs between the runs
    assert all(math.isclose(before[k][0], after[k][0]) for k in untouched)

    def change(keys: list[Key]) -> float:
        return paired_lift([after[k][0] for k in keys]) - paired_lift([before[k][0] for k in keys])

    assert change(affected) >= 0.06, change(affected)
    assert harm_rate([after[k][0] for k in affected]) <= harm_rate([before[k][0] for k in affected]) - 0.02
    assert 0.02 <= change(list(before)) <= 0.08, change(list(before))
    by_model = {m: change([k for k in before if k[0] == m]) for m in {k[0] for k in before}}
    assert by_model["sim-glm-5.3-flash"] >= 0.10 and abs(by_model["sim-gpt-5.6-sol"]) <= 0.02, by_model
