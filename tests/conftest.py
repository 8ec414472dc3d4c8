import os
from typing import Any

import pytest


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
    # turn, its cases then passing) and the few attacks whose verification takes over ten seconds; README "Tests"
    "thorough": ("MKBSIM_THOROUGH", "ablation or long case (over 10 s): set MKBSIM_THOROUGH=1 to run it"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
