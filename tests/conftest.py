import os

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
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, (variable, reason) in OPT_IN_MARKERS.items():
        if os.environ.get(variable) == "1":
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if item.get_closest_marker(marker) is not None:  # not `in item.keywords`: that holds folder names too
                item.add_marker(skip)
