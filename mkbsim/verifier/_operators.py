"""Which operator the provenance mode runs and prices: the one its schema names, read once (DESIGN §5).

The eager-work audit prices each operator the submission dispatches by its name, and the operator object
torch hands the mode is the submission's to relabel: ``op._schema = view._schema`` (or ``_name``,
``__name__``, ``_overloadname``, ``_op``, ``_handle``, ``OpOverload.__str__``/``__call__``, a packet
attribute replaced before the operator's first dispatch) makes a matrix product or a whole reduction look
like a free view. So the mode neither calls the object nor trusts its labels: it reads the object's schema
once, as a genuine ``FunctionSchema`` through accessors bound before the submission loaded, and runs the
native entry point of the operator that schema names (``torch._C._get_operation_overload``, cached per
name; a custom operator's dispatcher handle, for the redispatch below the Python key). Whatever an object
says it is, that is what runs, and what is priced: a relabelled product computes a view.
"""

from __future__ import annotations

from typing import Any

#: (priced name "ns.op.overload", native callable, dispatcher handle, whether it is composite) of an operator, by its
#: schema's (qualified name, overload name). A composite operator (a CompositeImplicitAutograd kernel and no kernel of
#: its own for cpu or cuda: ``matmul``, ``linear``, ``group_norm``, ``rnn_relu``, ``to``) is what autograd decomposes
#: into the operators it calls before the mode sees them; under ``torch.inference_mode`` autograd is skipped and it
#: came to the mode whole, priced by rules for its parts (red team rt31a: ``matmul`` of one-column batches, an
#: ``rnn_relu`` tagged random, a whole ``group_norm``, each far below its work; a ``to`` taken for a view): the mode
#: decomposes it itself.
Resolved = tuple[str, Any, Any, bool]


def dispatch_hooks(registry: Any, device: Any) -> dict[str, Any]:
    """The keyword defaults of the provenance mode's ``_provenance.dispatch`` besides its vault's ``send``,
    bound now: the operator resolver (protected by ``registry``), the mode stack's push and pop, the backend
    key a custom operator is redispatched to, the dispatcher's redispatch, and the process's CPU clock an operator's
    run is timed by (the scored calls' host time is judged against it: ``_judge.scored_host_time``)."""
    import time

    import torch

    key = torch._C.DispatchKey.CUDA if device.type == "cuda" else torch._C.DispatchKey.CPU
    return {
        "_resolve": registry.protect(resolve_operator, **operator_lib()),
        "_push": torch._C._push_on_torch_dispatch_stack,
        "_pop": torch._C._pop_torch_dispatch_stack,
        "_backend": torch._C.DispatchKeySet(key),
        "_redispatch": torch._C._DispatchOperatorHandle.redispatch_boxed,
        "_clock": time.process_time_ns,
        "_BaseException": BaseException,
    }


def operator_lib() -> dict[str, Any]:
    """The C accessors ``resolve_operator`` calls, bound now (before the submission exists), as its keyword
    defaults, with the cache it fills."""
    import torch

    schema = torch._C.FunctionSchema
    # the properties' getters (C functions): a property replaced on the class later changes nothing here
    properties = vars(schema)
    return {
        "_overload_type": torch._ops.OpOverload,
        "_schema_type": schema,
        "_qualified_name": properties["name"].fget,
        "_overload_name": properties["overload_name"].fget,
        "_native": torch._C._get_operation_overload,
        "_handle": torch._C._dispatch_find_schema_or_throw,
        "_cache": {},
        "_has_kernel": torch._C._dispatch_has_kernel_for_dispatch_key,
        "_composite_key": torch._C.DispatchKey.CompositeImplicitAutograd,
        "_backend_keys": (torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA),
    }


def resolve_operator(
    func: Any, *, _overload_type: Any, _schema_type: Any, _qualified_name: Any, _overload_name: Any, _native: Any,
    _handle: Any, _cache: dict[tuple[str, str], Resolved], _has_kernel: Any, _composite_key: Any, _backend_keys: Any,
    _type: Any = type, _error: Any = RuntimeError
) -> Resolved:  # fmt: skip
    """The operator ``func`` names, as (name, native callable, handle, whether it is composite); raises for an object
    that is no torch operator or whose schema is not torch's (nothing runs then)."""
    if _type(func) is not _overload_type:
        raise _error("mkbsim verifier: an operator object that is not torch's OpOverload was dispatched")
    schema = func._schema
    if _type(schema) is not _schema_type:
        raise _error("mkbsim verifier: an operator's schema was replaced by an object that is not torch's")
    key = (_qualified_name(schema), _overload_name(schema))
    found = _cache.get(key)
    if found is None:
        namespace, _, base = key[0].partition("::")
        natives = _native(key[0], key[1])
        if natives is None:
            raise _error(f"mkbsim verifier: no operator {key[0]}.{key[1]}")
        full = key[0] + "." + key[1] if key[1] else key[0]
        composite = _has_kernel(full, _composite_key) and not (
            _has_kernel(full, _backend_keys[0]) or _has_kernel(full, _backend_keys[1])
        )
        found = (f"{namespace}.{base}.{key[1] or 'default'}", natives[0], _handle(key[0], key[1]), composite)
        _cache[key] = found
    return found
