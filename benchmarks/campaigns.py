"""Campaign executors benchmark: the default simulated campaign (six profiles × 74 problems × 4 arms)
through the local executor (process pool) and the Ray executor (tasks + one writer actor) in one run,
and the rate at which each run appended its events against the store's own batched append rate on
the very same events.

    .venv/bin/python benchmarks/campaigns.py [--workers N]

Targets (issue 8): Ray within 1.5× of local; events appended at ≥ 90% of the store's batched rate.
"""

from __future__ import annotations

import argparse
import gc
import platform
import tempfile
import time
from pathlib import Path

from mkbsim.campaigns import Limits, SimCampaign, default_workers, run_simulated
from mkbsim.events import EventStore, NewEvent
from mkbsim.simulator import CampaignConfig, all_design_spaces, select_problems, shipped_profiles

BATCH = 5000


def _campaign(workers: int) -> SimCampaign:
    config = CampaignConfig(tuple(shipped_profiles().values()), tuple(select_problems(None)))
    return SimCampaign(config, limits=Limits(workers))


def _run(campaign: SimCampaign, executor: str, path: Path) -> tuple[float, float, float]:
    """(wall seconds, events appended per wall second and per CPU second of the writer's appends)."""
    with EventStore(path, create=True) as store:
        t0 = time.perf_counter()
        result = run_simulated(store, campaign, executor=executor)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=default_workers())
    args = ap.parse_args()
    all_design_spaces("h200")  # the catalogue and torch, loaded once before either executor starts
    campaign = _campaign(args.workers)
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_start = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        local = _run(campaign, "local", d / "local.sqlite")
        ray_cold = _run(campaign, "ray", d / "ray.sqlite")  # the cluster's workers import mkbsim
        ray_warm = _run(campaign, "ray", d / "ray2.sqlite")  # the same workers again
        store_wall, store_cpu = _store_rate(d / "local.sqlite", d / "raw.sqlite")
    ray.shutdown()
    print(f"{platform.node()} · {args.workers} workers · Python {platform.python_version()} · ray {ray.__version__}")
    print(f"ray.init (once, not counted): {ray_start:.2f} s")
    print(f"store batched appends (batches of {BATCH:,}): {store_wall:,.0f} events/s wall, {store_cpu:,.0f} per CPU s")
    for name, (wall, rate, cpu_rate) in (("local", local), ("ray, cold workers", ray_cold), ("ray, warm", ray_warm)):
        print(
            f"{name:18} {wall:5.2f} s ({wall / local[0]:.2f}× local; target ≤ 1.5×) · appends {rate:,.0f} events/s "
            f"wall ({rate / store_wall:.0%}), {cpu_rate:,.0f} per CPU s ({cpu_rate / store_cpu:.0%}; target ≥ 90%)"
        )


if __name__ == "__main__":
    main()
