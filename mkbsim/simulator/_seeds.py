"""Profiles over many seeds: each seed a whole simulated campaign in memory, seeds spread over a process pool.

Calibration fits the expectation over seeds, not one draw; the shape benchmark reports the share of seeds
each statement of the study holds at. Common random numbers: an attempt's draws depend on the campaign seed
and its place (model, problem, arm, replicate), never on the profile's parameters, so candidate parameter
sets evaluated on the same seeds meet the same luck. Results come back in seed order and do not depend on
the number of workers.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass

from mkbsim.simulator._campaign import CampaignConfig, simulate
from mkbsim.simulator._profiles import AgentProfile
from mkbsim.simulator._shape import StatementVerdict, check_all, panel
from mkbsim.simulator._spaces import all_design_spaces
from mkbsim.simulator._stats import profile_stats, records

Stats = dict[str, float | None]


@dataclass(frozen=True)
class SeedResult:
    seed: int
    stats: dict[str, Stats]  # profile name -> its statistics (``ProfileStats.flat``)
    verdicts: tuple[StatementVerdict, ...]  # the study's panel statements (``_shape``) on this campaign


def run_seed(profiles: tuple[AgentProfile, ...], problems: tuple[str, ...], replicates: int, seed: int
             ) -> SeedResult:  # fmt: skip
    config = CampaignConfig(profiles, problems, replicates, seed)
    rec = records(config.campaign_id, simulate(config))
    stats = profile_stats(rec)
    study = {p.name: p.study_model for p in profiles}
    verdicts = tuple(check_all(panel(rec, stats, study, len(problems))))
    return SeedResult(seed, {name: s.flat() for name, s in stats.items()}, verdicts)


def _run_seed(args: tuple[tuple[AgentProfile, ...], tuple[str, ...], int, int]) -> SeedResult:
    return run_seed(*args)


class SeedPool:
    """A process pool that evaluates profile sets over seeds; ``workers = 1`` runs in this process. Forked after
    the design spaces are loaded, so every worker starts with them."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: cf.ProcessPoolExecutor | None = None
        if workers > 1:
            all_design_spaces()
            self._pool = cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))

    def run(self, profiles: tuple[AgentProfile, ...], problems: tuple[str, ...], seeds: Sequence[int],
            replicates: int = 1) -> list[SeedResult]:  # fmt: skip
        jobs = [(profiles, problems, replicates, seed) for seed in seeds]
        if self._pool is None:
            return [_run_seed(job) for job in jobs]
        return list(self._pool.map(_run_seed, jobs))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> SeedPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
