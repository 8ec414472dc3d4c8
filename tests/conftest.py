import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import torch

        torch.set_num_threads(1)  # much faster on the shared 2-core machine
    except ImportError:
        pass


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("MKBSIM_GPU_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="GPU test: set MKBSIM_GPU_TESTS=1 on a machine with an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
