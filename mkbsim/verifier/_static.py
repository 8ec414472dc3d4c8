"""Static scan of a submission's source: forbidden APIs, timer tampering and inline CUDA.

The scan is the first line of defence and the one with line numbers an agent can act on; the
runtime guards in the worker catch what dynamic code hides from it.
"""

from __future__ import annotations

import ast
import gc
import threading
from dataclasses import dataclass, field
from typing import Literal

from mkbsim.verifier._rules import (
    CONFIG_PREFIXES,
    DYNAMIC_ATTRIBUTE_CALLS,
    DYNAMIC_ATTRIBUTE_FUNCTIONS,
    FORBIDDEN_BUILTINS,
    INLINE_CUDA_CALLS,
    INLINE_CUDA_PATTERN,
    INTROSPECTION_ATTRS,
    PER_ELEMENT,
    PER_ELEMENT_METHODS,
    RAW_NAMES,
    TIMER_ATTRS,
    module_rule,
    name_rule,
)

FindingKind = Literal["forbidden", "timing_tamper", "inline_cuda"]


@dataclass(frozen=True)
class Finding:
    line: int
    kind: FindingKind
    what: str
    reason: str

    def text(self) -> str:
        return f"line {self.line}: {self.what} ({self.reason})"


@dataclass
class StaticReport:
    findings: list[Finding] = field(default_factory=list)
    syntax_error: str | None = None

    def of(self, kind: FindingKind) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]


_INTROSPECTION = "introspection of the verifier's process is forbidden"
_DYNAMIC_NAMES = "attribute names must be string literals in a submission, so the verifier can read them"
#: Ways to a base class's own methods past the verifier's hooks on a class (``Tensor.tolist`` is watched).
_PAST_HOOKS = "calling a base class's methods past the verifier's hooks is forbidden"
_BASE_CLASS_NAMES = frozenset(("TensorBase", "__mro__", "__bases__", "__base__", "mro"))
#: ... and torch's tensor base class under any name that has it (``torch._C._TensorBase``, its deprecated alias: red
#: team rt67 F2, a whole eager answer out by its ``tolist``, below the hook on ``Tensor.tolist``)
_BASE_CLASS_PART = "TensorBase"
_ENVIRONMENT = "the environment the DSLs' builds read (compiler, search path, flags) is the harness's"
#: The process environment as a mapping, and the calls that change it.
_ENVIRON_MAPPINGS = frozenset(("os.environ", "os.environb", "posix.environ"))
_ENVIRON_CHANGES = frozenset(("os.putenv", "os.unsetenv", "posix.putenv", "posix.unsetenv"))
_MAPPING_WRITES = frozenset(("update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__",
                             "__ior__", "__init__", "_data", "putenv", "unsetenv"))  # fmt: skip


def _literal_str(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Scanner(ast.NodeVisitor):
    def __init__(self, dsl: str, defined: set[str]) -> None:
        self.dsl = dsl
        self.defined = defined  # names the file binds itself, which shadow builtins
        self.aliases: dict[str, str] = {}  # local name -> dotted module path it stands for
        self.findings: list[Finding] = []
        self._seen: set[tuple[int, str, str]] = set()
        self.methods: list[tuple[str, str]] = []  # (class, first parameter) of each method being visited
        self.docstrings: set[int] = set()  # the ids of the docstrings' constants (``visit_Constant``)

    def add(self, node: ast.AST, kind: FindingKind, what: str, reason: str) -> None:
        line = getattr(node, "lineno", 0)
        if (line, kind, what) not in self._seen:
            self._seen.add((line, kind, what))
            self.findings.append(Finding(line, kind, what, reason))

    # --- names -------------------------------------------------------------------------------
    def dotted(self, node: ast.AST) -> str | None:
        """``a.b.c`` with its root resolved through the file's imports, or None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def is_module_rooted(self, node: ast.AST) -> bool:
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.aliases

    def check_dotted(self, node: ast.AST, dotted: str) -> None:
        hit = name_rule(dotted)
        if hit:
            self.add(node, "forbidden", f"use of {dotted}", hit[1])
        last = dotted.rsplit(".", 1)[-1]
        if last in INLINE_CUDA_CALLS:
            self.add(node, "inline_cuda", f"{dotted}", "inline CUDA/PTX inside a DSL kernel")

    def check_attr_name(self, node: ast.AST, attr: str) -> None:
        if attr in INTROSPECTION_ATTRS:
            self.add(node, "forbidden", f"access to .{attr}", _INTROSPECTION)
        if attr in _BASE_CLASS_NAMES or _BASE_CLASS_PART in attr:
            self.add(node, "forbidden", f"the name {attr}", _PAST_HOOKS)
        if attr in RAW_NAMES:
            self.add(node, "forbidden", f"the name {attr}", RAW_NAMES[attr])
        if attr in PER_ELEMENT_METHODS:
            self.add(node, "forbidden", f"the name {attr}", PER_ELEMENT)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.check_attr_name(node, node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for item in node.body:  # each method, with its class and first parameter (what super(C, self) may name)
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.args.args:
                self.methods.append((node.name, item.args.args[0].arg))
                self.visit(item)
                self.methods.pop()
            else:
                self.visit(item)
        for expr in (*node.bases, *node.keywords, *node.decorator_list):
            self.visit(expr)

    def check_super(self, node: ast.Call) -> None:
        """``super()`` with arguments other than the enclosing method's class and first parameter reaches any
        class's base (``super(torch.Tensor, t).tolist()``)."""
        args = node.args
        own = (
            len(args) == 2 and bool(self.methods) and isinstance(args[0], ast.Name) and isinstance(args[1], ast.Name)
            and (args[0].id, args[1].id) == self.methods[-1]
        )  # fmt: skip
        if args and not own:
            self.add(node, "forbidden", "super() with arguments other than its own class and instance", _PAST_HOOKS)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg is not None:
            self.check_attr_name(node, node.arg)
        self.generic_visit(node)

    # --- imports -----------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            hit = module_rule(alias.name, self.dsl)
            if hit:
                self.add(node, "forbidden", f"import {alias.name}", hit[1])
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else local

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level == 0:
            hit = module_rule(module, self.dsl)
            if hit:
                self.add(node, "forbidden", f"from {module} import ...", hit[1])
        for alias in node.names:
            self.check_attr_name(node, alias.name)
            full = f"{module}.{alias.name}" if module else alias.name
            if node.level == 0 and alias.name != "*":
                hit = module_rule(full, self.dsl) or name_rule(full)
                if hit:
                    self.add(node, "forbidden", f"from {module} import {alias.name}", hit[1])
            self.aliases[alias.asname or alias.name] = full

    # --- uses --------------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            self.check_attr_name(root, root.attr)
            root = root.value
        dotted = self.dotted(node)
        if dotted is not None:
            self.check_dotted(node, dotted)
            if dotted in _ENVIRON_CHANGES or (
                node.attr in _MAPPING_WRITES and self.dotted(node.value) in _ENVIRON_MAPPINGS
            ):  # fmt: skip
                self.add(node, "forbidden", f"use of {dotted}", _ENVIRONMENT)
            if node.attr == "__dict__" and self.is_module_rooted(node.value):
                self.add(node, "forbidden", f"use of {dotted}", "modifying imported modules is forbidden")
        self.visit(root)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_BUILTINS and node.id not in self.defined:
            self.add(node, "forbidden", f"{node.id}", FORBIDDEN_BUILTINS[node.id])
        if node.id in self.aliases:
            full = self.aliases[node.id]
            hit = name_rule(full)
            if hit:
                self.add(node, "forbidden", f"use of {full}", hit[1])
        self.check_attr_name(node, node.id)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in DYNAMIC_ATTRIBUTE_CALLS and func.id not in self.defined:
            attr = _literal_str(node.args[1]) if len(node.args) >= 2 else None
            if attr is None:
                self.add(node, "forbidden", f"{func.id}() with a computed name", _DYNAMIC_NAMES)
            else:
                self.check_attr_name(node, attr)
                base = self.dotted(node.args[0])
                if base is not None:
                    self.check_dotted(node, f"{base}.{attr}")
                if func.id in ("setattr", "delattr") and self.is_module_rooted(node.args[0]):
                    self.patched(node, f"{base}.{attr}", attr)
        if isinstance(func, ast.Name) and func.id == "super" and "super" not in self.defined:
            self.check_super(node)
        if isinstance(func, ast.Name) and func.id == "type" and "type" not in self.defined and len(node.args) == 3:
            self.add(node, "forbidden", "type() with three arguments", _DYNAMIC_NAMES + " (a class built at run time)")
        if any(k.arg == "source_code" for k in node.keywords):
            self.add(node, "inline_cuda", "a kernel call with source_code=", "inline CUDA inside a DSL kernel")
        dotted = self.dotted(func)
        if dotted in DYNAMIC_ATTRIBUTE_FUNCTIONS and not all(_literal_str(a) is not None for a in node.args):
            self.add(node, "forbidden", f"{dotted}() with a computed name", _DYNAMIC_NAMES)
        self.generic_visit(node)

    def patched(self, node: ast.AST, dotted: str, attr: str) -> None:
        if dotted.startswith(CONFIG_PREFIXES):
            return
        if attr in TIMER_ATTRS:
            self.add(node, "timing_tamper", f"replacing {dotted}", "timing functions must not be modified")
        else:
            self.add(node, "forbidden", f"assignment to {dotted}", "modifying imported modules is forbidden")

    def check_targets(self, targets: list[ast.expr]) -> None:
        for target in targets:
            if isinstance(target, ast.Tuple | ast.List):
                self.check_targets(list(target.elts))
            elif isinstance(target, ast.Starred):
                self.check_targets([target.value])
            elif isinstance(target, ast.Attribute) and self.is_module_rooted(target.value):
                self.patched(target, self.dotted(target) or target.attr, target.attr)
            elif isinstance(target, ast.Subscript) and self.dotted(target.value) in _ENVIRON_MAPPINGS:
                self.add(target, "forbidden", f"changing {self.dotted(target.value)}", _ENVIRONMENT)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.check_targets(node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_targets([node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_targets([node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self.check_targets(node.targets)
        self.generic_visit(node)

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and _literal_str(first.value) is not None:
                self.docstrings.add(id(first.value))
        super().visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if id(node) in self.docstrings:
            # prose (a docstring naming ``__del__``: red team rt30b's false positive); it reaches code only as a
            # ``__doc__``, a computed name every dynamic-name rule refuses
            return
        if node.value in INTROSPECTION_ATTRS:
            self.add(node, "forbidden", f"the name {node.value!r}", _INTROSPECTION)
        if node.value in _BASE_CLASS_NAMES - {"mro"} or _BASE_CLASS_PART in node.value:
            self.add(node, "forbidden", f"the name {node.value!r}", _PAST_HOOKS)
        if node.value in PER_ELEMENT_METHODS:  # whole strings only: "map_" is part of many honest names
            self.add(node, "forbidden", f"the name {node.value!r}", PER_ELEMENT)
        for name, reason in RAW_NAMES.items():
            if name in node.value:
                self.add(node, "forbidden", f"the name {name} in a string", reason)
        if INLINE_CUDA_PATTERN.search(node.value):
            self.add(node, "inline_cuda", "CUDA/PTX source in a string", "inline CUDA inside a DSL kernel")


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the file defines itself (functions, classes, assignments, parameters)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either operand order)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.ops) != 1:
        return False
    sides = [node.test.left, *node.test.comparators]
    names = [n for n in sides if isinstance(n, ast.Name) and n.id == "__name__"]
    return isinstance(node.test.ops[0], ast.Eq) and len(names) == 1 and "__main__" in map(_literal_str, sides)


def _name_rebindable(tree: ast.Module) -> bool:
    """Whether the file could set its module's ``__name__``: any binding, attribute store, keyword or string of
    that name, or a ``__dict__`` reached (dynamic code, ``globals()``, ``setattr`` with a computed name are
    refused elsewhere)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "__name__" and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.Attribute) and (
            node.attr == "__dict__" or (node.attr == "__name__" and not isinstance(node.ctx, ast.Load))
        ):
            return True
        if isinstance(node, ast.Global | ast.Nonlocal) and "__name__" in node.names:
            return True
        if isinstance(node, ast.alias) and "__name__" in (node.name, node.asname):
            return True
        if isinstance(node, ast.keyword | ast.arg) and "__name__" in (getattr(node, "arg", None),):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__name__" in node.value:
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.ExceptHandler) and (
            node.name == "__name__"
        ):
            return True
        if isinstance(node, ast.MatchAs | ast.MatchStar) and node.name == "__name__":
            return True
        if isinstance(node, ast.MatchMapping) and node.rest == "__name__":
            return True
    return False


def _without_main_block(tree: ast.Module) -> ast.Module:
    """The file as the worker runs it: a top-level ``if __name__ == "__main__":`` body never runs there (the
    module is loaded under another name), so its self-test is not scanned, unless the file could rename its
    module; its ``else`` runs. What such a body would do if run anyway still meets the runtime guards."""
    if _name_rebindable(tree):
        return tree
    body: list[ast.stmt] = []
    for node in tree.body:
        body.extend(node.orelse if _is_main_guard(node) else [node])  # type: ignore[attr-defined]
    return ast.Module(body=body, type_ignores=tree.type_ignores)


# CPython 3.11 keeps the AST builder's depth per interpreter (gh-106905): another parse meanwhile (a second scan,
# a traceback's carets, a collection's callback or a finaliser run mid-build) makes a sound parse fail with this
# SystemError. Scans in threads (a campaign's attempts) wait for each other, and the collector is held off during a
# parse, so that no callback or finaliser parses in the middle of it (retrying alone failed CI's test once: 20
# clashes in a row where its callback clashes with 16 parses in 20); a clash with another thread's own parse is
# retried: it says nothing of the source.
_AST_BUILDS = threading.Lock()
_AST_CLASH = "AST constructor recursion depth mismatch"
_AST_TRIES = 20


def _parse(source: str, filename: str) -> ast.Module:
    tries_left = _AST_TRIES
    while True:
        with _AST_BUILDS:
            collecting = gc.isenabled()
            gc.disable()
            try:
                return ast.parse(source, filename=filename)
            except SystemError as exc:
                tries_left -= 1
                if _AST_CLASH not in str(exc) or not tries_left:
                    raise
            finally:
                if collecting:
                    gc.enable()


def scan_source(source: str, dsl: str, filename: str = "submission.py") -> StaticReport:
    """Scan ``source`` (a ``dsl`` submission) and return its findings in line order."""
    try:
        tree = _without_main_block(_parse(source, filename))
        scanner = _Scanner(dsl, _bound_names(tree))
        scanner.visit(tree)
    except SyntaxError as exc:
        return StaticReport(syntax_error=f"line {exc.lineno}: {exc.msg}")
    except (RecursionError, MemoryError) as exc:
        # the file's own shape (an expression nested thousands deep) stops the parser or the scan: a file the
        # verifier cannot read is the submission's failure, never the verifier's (which would go uncounted)
        return StaticReport(
            syntax_error=f"nested too deeply for the verifier to read ({type(exc).__name__}); split the deep expression"
        )
    return StaticReport(findings=sorted(scanner.findings, key=lambda f: (f.line, f.kind)))
