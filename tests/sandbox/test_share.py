"""``Policy.share`` keeps a host namespace (the verifier's cuda zygote may need the host's PID namespace for
CUDA IPC, DESIGN §5); by default every namespace is new."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mkbsim.sandbox import Policy, probe, python_paths, run

pytestmark = pytest.mark.skipif(not probe().ok, reason=f"bubblewrap cannot run here: {probe().reason}")


def _namespaces(tmp_path: Path, share: tuple[str, ...]) -> dict[str, str]:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    policy = Policy(ro=python_paths(), rw=(tmp_path,), cwd=tmp_path, env=env, share=share)
    policy.hand_over(tmp_path)
    finished = run(policy, ["bash", "-c", "readlink /proc/self/ns/pid /proc/self/ns/ipc"], timeout_s=60)
    pid, ipc = (finished.output.head + finished.output.tail).decode().split()
    return {"pid": pid, "ipc": ipc}


@pytest.mark.parametrize("share", [(), ("pid",), ("ipc", "pid")])
def test_only_the_shared_namespaces_are_the_hosts(tmp_path: Path, share: tuple[str, ...]) -> None:
    host = {ns: os.readlink(f"/proc/self/ns/{ns}") for ns in ("pid", "ipc")}
    inside = _namespaces(tmp_path, share)
    assert {ns for ns in host if inside[ns] == host[ns]} == set(share), (inside, host)
