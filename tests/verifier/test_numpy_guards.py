"""The runtime guards on numpy (``_numpy_guards``, verifier README step 2): numpy is the submission's to use with
plain data, arrays and numpy's own helpers, while its ways to memory at raw addresses are refused to the submission's
calls however they are reached: a conversion of an object that may answer ``__array_interface__`` (its name built at
run time, so the static scan cannot see it), numpy's unchecked ``as_strided``, ``ctypeslib`` and an array's
``.ctypes``. One guarded process: the guards installed as the worker installs them, a submission file imported and
its functions called."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SUBMISSION = """
import types

import numpy as np
import torch

NAME = "__array_" + "interface__"  # no string holds the name


def _interface(address):
    return {"shape": (4,), "typestr": "|u1", "data": (address, True), "version": 3}


def _foreign(address):
    return types.SimpleNamespace(**{NAME: _interface(address)})


class _Equal(type):  # a class claiming to equal every type it is compared with
    def __eq__(cls, other):
        return True

    def __hash__(cls):
        return hash(float)


def _like_float(address):
    holder = _Equal("F", (), {})()
    holder.__dict__[NAME] = _interface(address)
    return holder


def _scalar_subclass(address):
    value = type("F64", (np.float64,), {})(1.0)
    value.__dict__[NAME] = _interface(address)
    return value


def _cyclic():
    items = [1]
    items.append(items)
    return items


HONEST = {
    "constant": lambda a: float(np.float32(1e-6)),
    "list_table": lambda a: torch.from_numpy(np.array([[1, 2], [3, 4]], dtype=np.int32)).sum().item(),
    "shape": lambda a: int(np.prod(np.array(torch.Size([2, 3])))),
    "dtype_as_type": lambda a: np.asarray([1.0], dtype=float).dtype.name,
    "dtype_from_string": lambda a: np.dtype("i4,f4").itemsize,
    "bytes": lambda a: np.frombuffer(b"abcd", dtype=np.uint8).sum(),
    "copyto_list": lambda a: np.copyto(np.zeros(2), [1.0, 2.0]),
    "sliding_window": lambda a: np.lib.stride_tricks.sliding_window_view(np.arange(6), 3).shape,
    "array_of_arrays": lambda a: np.ascontiguousarray((np.zeros(2), np.ones(2))).shape,
}
ATTACKS = {
    "interface": lambda a: np.asarray(_foreign(a)),
    "interface_private_module": lambda a: np._core.multiarray.array(_foreign(a)),
    "interface_nested": lambda a: np.array([[1, 2, 3, 4], _foreign(a)]),
    "interface_copyto": lambda a: np.copyto(np.zeros(4, dtype=np.uint8), _foreign(a)),
    "interface_metaclass_eq": lambda a: np.asarray(_like_float(a)),
    "interface_scalar_subclass": lambda a: np.asarray(_scalar_subclass(a)),
    "tensor_dlpack": lambda a: np.from_dlpack(torch.zeros(4)),
    "as_strided": lambda a: np.lib.stride_tricks.as_strided(np.zeros(2), shape=(2,), strides=(1 << 20,)),
    "ctypeslib": lambda a: np.ctypeslib.load_library("libm.so.6", "/lib/x86_64-linux-gnu/"),
    "ctypes_view": lambda a: np.zeros(1).ctypes,
    "cyclic_list": lambda a: np.array(_cyclic()),  # not a route: the check ends (nesting past numpy's dimensions)
}
"""

GUARDED = """
import importlib.util, os, sys
import numpy, torch
from mkbsim.verifier._attribution import attribution_config
from mkbsim.verifier._control import ControlPage, map_control
from mkbsim.verifier._guards import Guards
from mkbsim.verifier._vault import Registry
from mkbsim.verifier._worker import HARNESS_DIR

path = sys.argv[1]
control = ControlPage()
guards = Guards(Registry(), attribution_config(HARNESS_DIR, path, []), "tirx", map_control(os.dup(control.take_fd())))
guards.install()
guards.install_audit_hook()
spec = importlib.util.spec_from_file_location("submission", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
address = numpy.zeros(4, dtype=numpy.uint8).__array_interface__["data"][0]  # memory the attacks may read safely
for table in ("HONEST", "ATTACKS"):
    for name, call in getattr(module, table).items():
        try:
            call(address)
            print(table, name, "ran")
        except PermissionError as exc:
            print(table, name, "refused", exc)
"""


def test_numpy_helpers_run_and_its_raw_memory_routes_are_refused(tmp_path: Path) -> None:
    submission = tmp_path / "submission.py"
    submission.write_text(textwrap.dedent(SUBMISSION))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", GUARDED, str(submission)], cwd=root, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = {tuple(line.split(" ", 3)[:3]) for line in done.stdout.splitlines()}
    ran = {name for table, name, outcome in outcomes if table == "HONEST" and outcome == "ran"}
    refused = {name for table, name, outcome in outcomes if table == "ATTACKS" and outcome == "refused"}
    assert ran == {"constant", "list_table", "shape", "dtype_as_type", "dtype_from_string", "bytes", "copyto_list",
                   "sliding_window", "array_of_arrays"}, done.stdout  # fmt: skip
    assert refused == {"interface", "interface_private_module", "interface_nested", "interface_copyto",
                       "interface_metaclass_eq", "interface_scalar_subclass", "tensor_dlpack", "as_strided",
                       "ctypeslib", "ctypes_view", "cyclic_list"}, done.stdout  # fmt: skip
