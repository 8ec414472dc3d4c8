"""What a counted TIRx launch takes (``_provenance``'s gate, red team rt15b F4, FP1, FP2): torch tensors and
``nn.Parameter``s, Python and numpy numbers by value, strings, dtypes and devices. A launch with anything else
(a TVM FFI function, module or object, a Tensor subclass of the submission's) is not counted, and ``not_dsl``
names the argument; the honest cases (tests/verifier/honest/nn_parameter_argument.py,
numpy_scalar_arguments.py) pass in test_honest.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mkbsim.verifier import VerifierSession
from mkbsim.verifier._provenance import _numpy_numbers, provenance_lib

ADVERSARIAL = Path(__file__).with_name("adversarial")


@pytest.mark.parametrize(
    ("case", "named"),
    [("launch_with_a_function_argument", "argument 3 is a Function"),
     ("launch_with_a_tensor_subclass_argument", "argument 2 is a Gain")],
)  # fmt: skip
def test_an_unwatched_launch_does_not_run_and_is_named_in_the_feedback(
    cpu_session: VerifierSession, case: str, named: str
) -> None:
    report = cpu_session.verify(ADVERSARIAL / f"{case}.py", "p36", "tirx")
    assert report.failure == "exception", report.feedback  # the gate raised instead of running it
    assert f"did not run: its {named}" in report.feedback, report.feedback


def test_numpy_numbers_count_by_value_and_objects_do_not() -> None:
    lib = provenance_lib(torch.device("cpu"))
    for value in (np.float32(1e-6), np.float16(1), np.int64(3), np.int32(3), np.uint8(1), np.bool_(True),
                  np.prod((2, 3)), np.complex64(1)):  # fmt: skip
        assert id(type(value)) in lib.plain, type(value)
    assert np.timedelta64 not in _numpy_numbers()  # an integer to numpy, a duration to everyone else
    tvm_ffi = pytest.importorskip("tvm_ffi")
    for kind in (tvm_ffi.Function, tvm_ffi.Module, tvm_ffi.Object):
        assert id(kind) not in lib.plain, kind
    assert id(torch.nn.Parameter) in lib.launch_subclasses
    assert type(torch.nn.Buffer(torch.ones(1))) is torch.Tensor  # a buffer is a tensor already


def test_a_storage_shrunk_through_its_base_class_is_refused_at_the_call(cpu_session: VerifierSession) -> None:
    """Red team rt22 F3's probe shrank a storage under an nn.Parameter through ``torch._C.StorageBase.resize_``, the
    base class's method, which the guards could not replace on the immutable type: the launch gate's span check
    (``_provenance.within_storage``, on every call) was what refused the launch, and the probe, raising wherever a
    launch over it ran, told whether scored calls refused it too. The guards now set their hooks where the method is
    defined (``Guards.replace``, ``set_on_immutable_type``; red team rt70 F0's class): the shrink itself is refused on
    every call, and no route the tests know leaves a view past its storage for the span check, kept behind it."""
    probe = Path(__file__).with_name("evidence") / "probe_parameter_over_shrunk_storage_p36.py"
    report = cpu_session.verify(probe, "p36", "tirx", static_scan=False)
    assert report.failure == "forbidden_api", report.feedback
    assert "UntypedStorage.resize_" in report.feedback, report.feedback


@pytest.mark.parametrize("route", ["getstate", "pickled_state"])
def test_tvm_pickling_is_refused_at_run_time(cpu_session: VerifierSession, route: str) -> None:
    """Red team rt65 F0: a TVM tensor's ``__getstate__`` reaches the serialiser of ``to_json_graph_str`` through a
    binding no guard can replace, and ``copy.deepcopy`` calls ``__reduce_ex__`` and leaves the state in its memo. The
    static scan refuses the protocol's names; with it off, the guards refuse the calls (``copy``'s included)."""
    case = Path(__file__).with_name("adversarial") / f"eager_answer_carried_out_by_a_tvm_tensors_{route}_p36.py"
    report = cpu_session.verify(case, "p36", "tirx", static_scan=False)
    assert report.failure == "forbidden_api", report.feedback
    assert "tvm.runtime._tensor.Tensor.__" in (report.feedback or ""), report.feedback


def test_tvm_serialisation_is_refused_at_run_time(cpu_session: VerifierSession) -> None:
    """Red team rt64 F0: ``tvm.runtime.save_param_dict`` read an eager answer's bytes into Python in C++ (no operator,
    no ``tolist``). The static scan refuses the name; with it off, the runtime guard refuses the call."""
    case = Path(__file__).with_name("adversarial") / "eager_answer_carried_out_by_tvm_save_param_dict_p36.py"
    report = cpu_session.verify(case, "p36", "tirx", static_scan=False)
    assert report.failure == "forbidden_api", report.feedback
    assert "tvm.runtime.save_param_dict" in (report.feedback or ""), report.feedback
