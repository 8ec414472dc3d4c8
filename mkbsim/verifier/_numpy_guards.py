"""The runtime guards on numpy (DESIGN §5, verifier README step 2): numpy is the submission's to use, its ways to
memory at raw addresses are not.

numpy converts any object that answers ``__array_interface__`` into an array over the address the object names,
and a name built at run time gets past the static scan (``SimpleNamespace(**{name: interface})``). So the functions
that convert their arguments into arrays (``CONVERSIONS``) take plain data from the submission (Python numbers,
strings, bytes, lists and tuples of them, numpy arrays, scalars and dtypes) and refuse anything else; the functions
that reach raw memory whatever they are given (``RAW``: unchecked strides, ctypes pointers, native libraries, an
array's ``.ctypes``) are refused to the submission's calls. Each is replaced wherever numpy's modules bind it
(``numpy.asarray`` is also ``numpy._core.multiarray.asarray``...). A library's call that names the function passes,
as the guards' other hooks judge it (``handed`` in the guards' vault).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from mkbsim.verifier._rules import RAW_MEMORY

if TYPE_CHECKING:
    from mkbsim.verifier._guards import Guards

#: numpy's functions converting their arguments into arrays (``copyto`` writes through its destination).
CONVERSIONS = ("array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "asarray_chkfinite",
               "require", "frombuffer", "from_dlpack", "copyto")  # fmt: skip
#: (module, names): numpy's functions that reach raw memory whatever they are given; ``as_strided`` steps anywhere
#: from an array (``sliding_window_view``, which numpy checks, calls it by name).
RAW = (
    ("numpy.lib.stride_tricks", ("as_strided",)),
    ("numpy.ctypeslib", ("as_array", "as_ctypes", "load_library")),
)
#: The class of every array's ``.ctypes`` (module, class) and its methods that make one and cast its pointer to any
#: ctypes type: numpy's own code, which works with ctypes, so the guards' ctypes events would take its casts for the
#: library's. (Its module is not refused: numpy's C code imports it under the submission's frame for much else, a
#: dtype from a string; the static scan refuses ``_ctypes`` as any component of a name.)
_CTYPES_VIEW = ("numpy._core._internal", "_ctypes")
_CTYPES_VIEW_METHODS = ("__init__", "data_as")
#: numpy's most dimensions (numpy 2's NPY_MAXDIMS): plain data nests no deeper
MAX_DEPTH = 64
PLAIN_REASON = f"{RAW_MEMORY} (numpy takes only plain data and arrays from the submission)"


def plain_or_asked(
    *args: Any, _ask: Any, _original: Any, _caller: Any, _what: str, _reason: str, _names: Any, _plain: Any,
    _arrays: Any, _sequences: Any, _type: Any, _issubclass: Any, _max_depth: int, **kwargs: Any
) -> Any:  # fmt: skip
    """A numpy conversion (``CONVERSIONS``): run at once on plain data; given anything else (what may answer
    ``__array_interface__``), refused where the submission calls it. A type is looked up in the sets only where its
    own type is ``type``, whose hash and equality are identity: no code of the submission's runs here (a metaclass's
    ``__eq__`` would in a set lookup). ``id()`` is not used: it raises an audit event, which the guards' hook judges,
    on every call. Nesting deeper than numpy's dimensions (a list holding itself) is not plain."""
    pending = [(item, 0) for item in (*args, *kwargs.values())]
    while pending:
        item, depth = pending.pop()
        kind = _type(item)
        if _type(kind) is _type and kind in _plain:  # a plain value
            continue
        if kind is _type and item in _plain:  # a plain type itself: dtype=float, dtype=numpy.float32
            continue
        if _issubclass(kind, _arrays):  # an array or a dtype
            continue
        if _type(kind) is _type and kind in _sequences and depth < _max_depth:  # list, tuple, torch.Size: items too
            pending.extend((inner, depth + 1) for inner in item)
            continue
        refused = _ask(("culprit", _what, _reason, _caller(), _names))
        if refused is not None:
            raise refused
        break
    return _original(*args, **kwargs)


def _bindings(original: Any) -> list[tuple[Any, str]]:
    """Every (numpy module, name) that binds ``original``."""
    found = []
    for name, module in list(sys.modules.items()):
        if name.split(".", 1)[0] != "numpy" or module is None:
            continue
        for attr, value in list(getattr(module, "__dict__", {}).items()):
            if value is original:
                found.append((module, attr))
    return found


def install(guards: Guards) -> None:
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return
    import torch

    # numpy imports these on first use (``numpy.ctypeslib``, the ``.ctypes`` view's module): imported here, where
    # their functions can be replaced before the submission exists
    views_module, views_class = _CTYPES_VIEW
    for module_name in (*(name for name, _ in RAW), views_module):
        importlib.import_module(module_name)

    scalars = [t for t in set(numpy.sctypeDict.values()) if isinstance(t, type)]
    python = (int, float, complex, bool, str, bytes, bytearray, memoryview, type(None), range, slice, type(...))
    checks = {
        # exact types (builtins, numpy's scalar types: a subclass has a __dict__); numpy.dtype cannot be subclassed,
        # an ndarray subclass's instance is an array
        "_plain": frozenset((*python, *scalars)),
        "_sequences": frozenset((list, tuple, torch.Size)),
        "_arrays": (numpy.ndarray, numpy.dtype),
        "_type": type, "_issubclass": issubclass, "_max_depth": MAX_DEPTH,
    }  # fmt: skip
    for name in CONVERSIONS:
        original = getattr(numpy, name, None)
        for owner, attr in _bindings(original) if original is not None else ():
            hook = guards.registry.protect(
                plain_or_asked, _ask=guards.ask, _original=original, _caller=guards.caller, _what=f"numpy.{name}",
                _reason=PLAIN_REASON, _names=(name,), **checks,
            )  # fmt: skip
            guards.replace(owner, attr, hook)
    for module_name, names in RAW:
        for name in names:
            for owner, attr in _bindings(getattr(sys.modules[module_name], name)):
                guards.deny(owner, attr, f"{module_name}.{name}", RAW_MEMORY)
    view = getattr(sys.modules[views_module], views_class)
    for name in _CTYPES_VIEW_METHODS:
        guards.deny(view, name, "numpy.ndarray.ctypes", RAW_MEMORY, callers=("ctypes",))
