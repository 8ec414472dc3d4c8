"""The environment a verification ran in: machine, driver, library versions."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

_DISTRIBUTIONS = {
    "torch": "torch",
    "numpy": "numpy",
    "tvm": "apache-tvm",
    "tvm_ffi": "apache-tvm-ffi",
    "cutlass_dsl": "nvidia-cutlass-dsl",
}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_driver() -> str | None:
    """The kernel driver's version (e.g. 580.159.04), from /proc or nvidia-smi."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        for token in text.split():
            if token.count(".") >= 1 and token.replace(".", "").isdigit():
                return token
    except OSError:
        pass
    try:  # the verifier's own process: running a tool here is fine
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        )  # fmt: skip
        return out.stdout.splitlines()[0].strip() or None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def capture(device: torch.device) -> dict[str, Any]:
    from mkbsim._version import __version__

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "executable": sys.executable,
        "mkbsim": __version__,
        "versions": {name: _version(dist) for name, dist in _DISTRIBUTIONS.items()},
        "cpu": _cpu_model(),
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            device=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            gpu_memory_bytes=int(props.total_memory),
            # which physical GPU measured: with several, each verifier process sees only its own
            gpu_uuid=str(getattr(props, "uuid", "")) or None,
            driver=_nvidia_driver(),
            cuda_runtime=torch.version.cuda,
        )
    else:
        env["device"] = env["cpu"]
    return env
