import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

#: Seconds each long test took on two cores (setup, call and teardown; ``MKBSIM_RECORD_DURATIONS=1`` records a run's
#: into it, README "Tests"). A test over ``LONG_S`` runs with the thorough ones, unless marked ``ordinary`` (the one
#: end-to-end run of a feature the ordinary run keeps whatever it costs).
DURATIONS = Path(__file__).with_name("durations.json")
LONG_S = 5.0
#: what a run records: tests of at least this many seconds
RECORDED_S = 3.0


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import torch

        torch.set_num_threads(1)  # much faster on the shared 2-core machine
    except ImportError:
        pass


#: Markers whose tests run only where their variable is 1, and why they are skipped otherwise.
OPT_IN_MARKERS = {
    "gpu": ("MKBSIM_GPU_TESTS", "GPU test: set MKBSIM_GPU_TESTS=1 on a machine with an NVIDIA GPU"),
    "realmodel": ("MKBSIM_REALMODEL_TESTS", "real-model test (minutes): set MKBSIM_REALMODEL_TESTS=1 to run it"),
    # what keeps the ordinary run (CI) under 15 minutes on two cores: ablations (each verifier rule switched off in
    # turn, its cases then passing) and the tests measured over ``LONG_S`` (``DURATIONS``); README "Tests"
    "thorough": ("MKBSIM_THOROUGH", "ablation or long test (over 5 s): set MKBSIM_THOROUGH=1 to run it"),
}


def _node(nodeid: str) -> str:
    """A test's id without its xdist group (``@ray``)."""
    return re.sub(r"@[\w.-]+$", "", nodeid)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    measured = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    for item in items:
        if measured.get(_node(item.nodeid), 0.0) > LONG_S and item.get_closest_marker("ordinary") is None:
            item.add_marker(pytest.mark.thorough)
    for marker, (variable, reason) in OPT_IN_MARKERS.items():
        if os.environ.get(variable) == "1":
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if item.get_closest_marker(marker) is not None:  # not `in item.keywords`: that holds folder names too
                item.add_marker(skip)


@pytest.fixture
def local_ray() -> None:
    """A local Ray cluster (``ray.init(num_cpus=2)``), kept for the next test if it needs one too: the Ray modules
    share one xdist group, so one worker runs them back to back on one cluster (each module started and stopped
    its own: ~10 s each). ``pytest_runtest_teardown`` stops it after the last test of a run of them."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    def uses_ray(test: Any) -> bool:
        return "local_ray" in getattr(test, "fixturenames", ())

    if uses_ray(item) and not (nextitem is not None and uses_ray(nextitem)):
        import ray

        ray.shutdown()


_took: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("MKBSIM_RECORD_DURATIONS") == "1" and not report.skipped:
        _took[_node(report.nodeid)] = _took.get(_node(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """``MKBSIM_RECORD_DURATIONS=1``: the run's long tests into ``DURATIONS`` (on the controller, where xdist's workers
    report; the larger of a test's figures, tests not run kept)."""
    if os.environ.get("MKBSIM_RECORD_DURATIONS") != "1" or not _took or hasattr(session.config, "workerinput"):
        return
    measured = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    for node, took in _took.items():  # the larger: a test near the line on a quiet run stays out of the ordinary one
        measured[node] = max(measured.get(node, 0.0), round(took, 1))
    kept = {node: took for node, took in sorted(measured.items()) if took >= RECORDED_S}
    DURATIONS.write_text(json.dumps(kept, indent=0, sort_keys=True) + "\n")
