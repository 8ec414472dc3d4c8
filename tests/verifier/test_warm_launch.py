"""The verifier's own TIRx launch that warms a watched launch's host path on cpu (``_warm_launch``): built in the
zygote, never a counted launch, and harmless to run. (Its effect on the draws' DSL time is measured, not tested:
``honest/eager_staging_every_call_p36`` and benchmarks/dsl_time_ratio.py.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from mkbsim.verifier import VerifierSession


def test_the_zygote_builds_the_warm_up_for_every_worker(cpu_session: VerifierSession) -> None:
    zygote = cpu_session.zygote()
    assert "tvm.script.tirx" in cpu_session.preload
    assert zygote.ready["warm_launch"] is True, zygote.ready["errors"]


def test_the_warm_up_is_a_plain_tvm_function_that_leaves_its_tensor_as_it_was() -> None:
    probe = textwrap.dedent(
        """
        import tvm_ffi
        from mkbsim.verifier import _warm_launch
        _warm_launch.prepare()
        assert _warm_launch.warmer() is None  # nothing where TIRx was not imported
        import tvm.script.tirx
        _warm_launch.prepare()
        warm = _warm_launch.warmer()
        # TVM FFI's own call (not the guards' hook) of a plain function (not a gate's counted function class)
        assert warm.func is vars(tvm_ffi.Function)["__call__"], warm.func
        assert type(warm.args[0]) is tvm_ffi.Function, type(warm.args[0])
        before = warm.args[1].clone()
        warm()
        warm()
        assert warm.args[1].equal(before) and warm.args[1].shape == (1,)
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
