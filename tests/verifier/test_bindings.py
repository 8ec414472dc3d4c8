"""The harness's check of its installed hooks looks nothing up on their owners (red team rt16 F3)."""

from __future__ import annotations

import types

from mkbsim.verifier._guards import binding, changed_bindings


def test_a_deleted_binding_is_found_without_running_the_module_s_getattr() -> None:
    module = types.ModuleType("victim")
    module.hooked = lambda: None
    installed = [binding(module, "hooked")]
    assert changed_bindings(installed) == []
    called: list[str] = []

    def fallback(name: str) -> object:  # what a submission's module __getattr__ would run in the harness's path
        called.append(name)
        return installed[0][2]  # "nothing moved": the hook itself

    del module.hooked
    module.__getattr__ = fallback  # type: ignore[attr-defined]
    assert changed_bindings(installed) == ["victim.hooked"]
    assert called == []


def test_a_class_binding_replaced_or_shadowed_is_found() -> None:
    class Owner:
        def method(self) -> None: ...

    installed = [binding(Owner, "method")]
    Owner.method = lambda self: None  # type: ignore[method-assign]
    assert changed_bindings(installed) == ["Owner.method"]
    inherited = [binding(Owner, "__len__")]  # not the class's own: installed as None, any later binding is a change
    assert changed_bindings(inherited) == []
    Owner.__len__ = lambda self: 0  # type: ignore[attr-defined]
    assert changed_bindings(inherited) == ["Owner.__len__"]
