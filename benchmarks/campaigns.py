"""Campaign executors benchmark: the default simulated campaign (six profiles × 74 problems × 4 arms)
through the local executor (process pool) and the Ray executor (tasks + one writer actor) in one run,
and the rate at which each run appended its events against the store's own batched append rate on
the very same events.

    .venv/bin/python benchmarks/campaigns.py [--workers N] [--repeats 3] [--replicates 1]

Each round starts a fresh Ray instance (not counted), then times the local run, Ray's first campaign on it
(the job's first tasks, the writer actor's process) and a second one (warm workers).

Targets (issue 8): Ray within 1.5× of local; events appended at ≥ 90% of the store's batched rate.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import tempfile
import time
from pathlib import Path

from mkbsim.campaigns import SimCampaign, default_workers, run_campaign
from mkbsim.events import EventStore, NewEvent
from mkbsim.simulator import CampaignConfig, all_design_spaces, select_problems, shipped_profiles

BATCH = 5000


def _campaign(workers: int, replicates: int) -> SimCampaign:
    config = CampaignConfig(tuple(shipped_profiles().values()), tuple(select_problems(None)), replicates=replicates)
    return SimCampaign(config, workers=workers)


def _run(campaign: SimCampaign, executor: str, path: Path) -> tuple[float, float, float]:
    """(wall seconds, events appended per wall second and per CPU second of the writer's appends)."""
    with EventStore(path, create=True) as store:
        t0 = time.perf_counter()
        result = run_campaign(store, campaign, executor=executor)
        wall = time.perf_counter() - t0
    assert result.ran == result.attempts
    return wall, result.events / result.append_s, result.events / result.append_cpu_s


def _store_rate(source: Path, target: Path) -> tuple[float, float]:
    """The store's batched append rate (batches of 5,000) on the events a campaign wrote, per wall and CPU second."""
    with EventStore(source) as store:
        events = [NewEvent(e.stream_id, e.type, e.payload) for e in store.read()]
    gc.freeze()  # as the campaign runner does: the loaded modules are not rescanned by the collector
    with EventStore(target, create=True) as store:
        t0, c0 = time.perf_counter(), time.thread_time()
        for i in range(0, len(events), BATCH):
            store.append(events[i : i + BATCH])
        return len(events) / (time.perf_counter() - t0), len(events) / (time.thread_time() - c0)


def _median_and_range(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--repeats", type=int, default=3, help="rounds, each on a fresh Ray instance (default 3)")
    ap.add_argument("--replicates", type=int, default=1, help="replicates per arm (1: the default campaign)")
    args = ap.parse_args()
    all_design_spaces("h200")  # the catalogue and torch, loaded once before either executor starts
    campaign = _campaign(args.workers, args.replicates)
    import ray

    runs: dict[str, list[tuple[float, float, float]]] = {"local": [], "ray, cold workers": [], "ray, warm": []}
    store_rates: list[tuple[float, float]] = []
    inits: list[float] = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
        inits.append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            runs["local"].append(_run(campaign, "local", d / "local.sqlite"))
            runs["ray, cold workers"].append(_run(campaign, "ray", d / "ray.sqlite"))  # the job's first tasks
            runs["ray, warm"].append(_run(campaign, "ray", d / "ray2.sqlite"))  # the same workers again
            store_rates.append(_store_rate(d / "local.sqlite", d / "raw.sqlite"))
        ray.shutdown()
    store_wall = statistics.median(r[0] for r in store_rates)
    store_cpu = statistics.median(r[1] for r in store_rates)
    attempts = len(campaign.attempts())
    print(f"{platform.node()} · {args.workers} workers · Python {platform.python_version()} · ray {ray.__version__} · "
          f"{attempts:,} attempts · {args.repeats} rounds: median (range)")  # fmt: skip
    print(f"ray.init (each round, not counted): {_median_and_range(inits)} s")
    print(f"store batched appends (batches of {BATCH:,}): {store_wall:,.0f} events/s wall, {store_cpu:,.0f} per CPU s")
    local = [r[0] for r in runs["local"]]
    for name, rows in runs.items():
        walls = [r[0] for r in rows]
        ratios = [w / base for w, base in zip(walls, local, strict=True)]
        print(
            f"{name:18} {_median_and_range(walls)} s · {_median_and_range(ratios)}× local (target ≤ 1.5×) · "
            f"appends {statistics.median(r[1] for r in rows) / store_wall:.0%} of the store's rate per wall s, "
            f"{statistics.median(r[2] for r in rows) / store_cpu:.0%} per CPU s (target ≥ 90%)"
        )


if __name__ == "__main__":
    main()
