"""Everything the worker runs once the file is loaded is bound before it (DESIGN §5, the trust boundary): a hook's
names are resolved when it is made, a harness function it calls becomes a hook in turn, and the walk over the path
(``Registry.unbound``) names whatever a call could still look up that a submission can change (red team rt32 F1:
the per-call steps reading the threads looked up module globals, rebound from a frame's ``f_globals``)."""

from __future__ import annotations

import functools
import sys
import types
from typing import Any

import pytest

from mkbsim.verifier._vault import Registry, Unbindable, changed, global_names

# a small module of the harness's kind: a step calling a helper by name, the helper reading a constant
_MODULE = types.ModuleType("bound_path_sample")
exec(
    compile(
        "import os\n"
        "LIMIT = 3\n"
        "def helper(x):\n    return min(x, LIMIT)\n"
        "def step(xs, *, _scale):\n    return [helper(x) * _scale for x in xs]\n"
        "def recursive(n):\n    return 0 if n == 0 else 1 + recursive(n - 1)\n"
        "def uses_module():\n    return os.getpid()\n"
        "def writes():\n    global LIMIT\n    LIMIT = 4\n",
        "<bound_path_sample>",
        "exec",
    ),
    _MODULE.__dict__,
)


def test_a_hook_keeps_what_its_names_were_when_it_was_made() -> None:
    registry = Registry()
    step = registry.protect(_MODULE.step, _scale=10)
    namespace = _MODULE.__dict__
    namespace["helper"], namespace["LIMIT"] = (lambda x: -1), 100  # the submission's rebinding, after the fact
    try:
        assert step([1, 5]) == [10, 30]
        assert _MODULE.step([1, 5], _scale=10) == [-10, -10]  # the module's own function sees the rebinding
    finally:
        exec(compile("def helper(x):\n    return min(x, LIMIT)\n", "<bound_path_sample>", "exec"), namespace)
        namespace["LIMIT"] = 3
    assert registry.unbound(step) == []
    # the helper it calls is a hook of its own: its namespace is not the module's
    helper = step.__globals__["helper"]
    assert helper is not _MODULE.helper and helper.__globals__ is not namespace


def test_a_function_calling_itself_is_bound_once() -> None:
    registry = Registry()
    recursive = registry.protect(_MODULE.recursive)
    inner = recursive.__globals__["recursive"]  # a hook of its own, calling itself
    assert inner is not _MODULE.recursive and inner.__globals__["recursive"] is inner
    assert recursive(5) == 5


@pytest.mark.parametrize(("name", "said"), [("uses_module", "the module os"), ("writes", "writes or looks up by name")])
def test_a_module_or_a_write_to_globals_cannot_be_bound(name: str, said: str) -> None:
    with pytest.raises(Unbindable, match=said):
        Registry().protect(getattr(_MODULE, name))


class _Helper:
    def method(self) -> int:
        return 1


def _calls(*, _thing: Any) -> Any:
    return _thing()


@pytest.mark.parametrize(
    ("thing", "said"),
    [
        (_Helper().method, "a method of a _Helper"),
        (_Helper, "the class"),
        (_Helper(), "an instance of"),
        (sys, "the module sys"),
        (functools.cache(_MODULE.helper), "not a hook"),
        ((lambda: _MODULE), "not a hook"),
        ({"nested": [(_Helper().method,)]}, "a method of a _Helper"),
        (types.SimpleNamespace(inner=_Helper), "the class"),
        (functools.partial(_MODULE.helper, 1), "not a hook"),
    ],
    ids=["method", "class", "instance", "module", "cache", "lambda", "nested", "namespace", "partial"],
)
def test_the_walk_names_what_a_call_could_look_up_later(thing: Any, said: str) -> None:
    registry = Registry()
    hook = registry.protect(_calls, _thing=thing)
    found = registry.unbound(hook)
    assert found and said in found[0], found


def test_what_nothing_can_change_passes_the_walk() -> None:
    registry = Registry()
    fixed = (len, sorted, dict.get, str.startswith, (1, 2.0, "x", b"y", None), frozenset({3}), ValueError, int)
    hook = registry.protect(_calls, _thing=fixed)
    assert registry.unbound(hook) == []
    # a watched class (a change to it is reported: ``changed``), an opaque object
    registry = Registry()
    registry.watch(_Helper)
    assert registry.unbound(registry.protect(_calls, _thing=(_Helper, _Helper()))) == []
    other = _Helper()
    assert registry.unbound(registry.protect(_calls, _thing=other), opaque=(other,)) == []
    registry.compared(other)
    assert registry.unbound(registry.protect(_calls, _thing=[other])) == []


def _vault(lib: Any) -> Any:
    answer = None
    while True:
        request = yield answer
        answer = lib.step([request], _scale=1)


def test_a_vault_s_library_functions_are_bound_and_its_state_walked() -> None:
    registry = Registry()
    lib = types.SimpleNamespace(step=_MODULE.step, cached=functools.cache(_MODULE.helper))
    send = registry.open(_vault, lib)
    assert lib.step is not _MODULE.step and lib.step.__globals__["helper"] is not _MODULE.helper
    assert lib.cached.__wrapped__ is not _MODULE.helper
    assert send(7) == [3]
    assert registry.unbound(send) == []
    # what a vault's state holds is walked like a hook's defaults
    registry = Registry()
    registry.open(_vault, types.SimpleNamespace(step=_MODULE.step, extra=_Helper()))
    found = registry.unbound(registry.protect(_calls, _thing=len))
    assert found and "the vault _vault" in found[0] and "_Helper" in found[0]


def test_the_vault_body_itself_looks_no_name_up() -> None:
    def body(lib: Any) -> Any:
        yield len(lib)

    with pytest.raises(Unbindable, match="looks names up"):
        Registry().open(body, ())


def test_global_names_agree_with_dis() -> None:
    import dis

    from mkbsim.verifier import _eagerwork, _threads, _worker

    for module in (_threads, _worker, _eagerwork):
        for value in vars(module).values():
            if type(value) is not types.FunctionType:
                continue
            codes, found = [value.__code__], set()
            while codes:
                code = codes.pop()
                found |= {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}
                codes += [c for c in code.co_consts if type(c) is types.CodeType]
            assert global_names(value.__code__)[0] == found, value.__qualname__


class _Watched:
    kept = 1

    def method(self) -> int:
        return 2


def test_a_watched_class_changed_is_reported() -> None:
    # Python raises no audit event when a class's attribute is set (red team rt33 F1 replaced the ``__enter__`` of a
    # pybind11 class the harness called): what the path hands to C functions or compares is watched instead
    registry = Registry()
    registry.watch(_Watched)
    assert changed(registry.watched()) == []
    for change in ("add", "replace", "delete"):
        if change == "add":
            _Watched.extra = 3  # type: ignore[attr-defined]
        elif change == "replace":
            _Watched.method = lambda self: 3  # type: ignore[method-assign]
        else:
            del _Watched.kept
        try:
            assert changed(registry.watched()) == [
                "_Watched (an attribute of a class the harness uses was set or deleted)"
            ]
        finally:
            for name, value in registry.watched()[0][2].items():
                if name not in ("__dict__", "__weakref__"):
                    type.__setattr__(_Watched, name, value)
            if "extra" in vars(_Watched):
                del _Watched.extra  # type: ignore[attr-defined]
        assert changed(registry.watched()) == []


def test_a_vault_refuses_requests_while_a_watched_class_has_an_attribute_added() -> None:
    # a ``__del__`` set on torch.Tensor would run inside the vault wherever it frees a tensor, and could remove itself
    # before the answer reads ``changed``: every request checks the watched classes' sizes first
    registry = Registry()
    lib = types.SimpleNamespace(step=_MODULE.step)
    checked, unchecked = registry.open(_vault, lib), registry.open(_vault, lib, checked=False)
    registry.watch(_Watched)
    assert checked(2) == [2]
    _Watched.extra = 1  # type: ignore[attr-defined]
    try:
        with pytest.raises(PermissionError, match="a class the harness uses"):
            checked(2)
        assert unchecked(2) == [2]  # (the answers' signer: the answer itself reports the change)
    finally:
        del _Watched.extra  # type: ignore[attr-defined]
    assert checked(2) == [2]


class _Name(str):
    """A key whose ``__eq__`` would be the submission's code inside the harness's lookups."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        raise AssertionError("a key's __eq__ ran in the harness")


def test_a_module_namespace_with_a_key_not_a_plain_str_is_tampering_and_not_looked_up() -> None:
    from mkbsim.verifier._guards import changed_bindings
    from mkbsim.verifier._worker import int_keyed

    namespace = {"perf_counter": len, "other": 1}
    bindings = [("time", "perf_counter", len, namespace), ("time", "other", 1, namespace)]
    assert changed_bindings(bindings) == []
    del namespace["perf_counter"]
    namespace[_Name("perf_counter")] = len  # red team rt34 F1: same hash, its own __eq__
    assert changed_bindings(bindings) == ["time.perf_counter", "time.other"]
    # a class's namespace stores names as exact str, whatever it is given
    setattr(_Watched, _Name("given"), 1)
    assert all(type(name) is str for name in vars(_Watched))
    delattr(_Watched, "given")

    class _Ident(int):
        __hash__ = int.__hash__

        def __eq__(self, other: object) -> bool:
            raise AssertionError("a key's __eq__ ran in the harness")

    assert int_keyed({5: 1, _Ident(7): 2}) == {5: 1}
