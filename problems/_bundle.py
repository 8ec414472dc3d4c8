"""Bundle shared kernel modules into the reference solutions that use them (DESIGN §5).

A solution is verified as one file: `mkbsim verify` refuses imports of `problems` (the reference lives
there) and reads of its files. Kernel code shared by several solutions (problems/_wgmma_tirx.py, the
moe pipeline, ...) therefore lives once, in a module, and is copied into each solution that names it
in header lines after its imports, in dependency order:

    # bundle: problems/_wgmma_tirx.py as W
    # bundle: problems/moe/solutions/_moe_tirx.py as M

Each module's top-level names are renamed `_W_name` (no clashes between modules) and gathered in the
namespace `W = SimpleNamespace(name=_W_name, ...)`, so the solution (and a module bundled after it)
keeps writing `W.name` exactly as when it imports the module. A bundled module may use one bundled
before it either way: `from problems.x import mod as A` (then `A.name`) or `from problems.x.mod import
name` (renamed to `_A_name`). The code stays at module level, where
the DSLs' source-based front ends (TVMScript, the CuTe DSL preprocessor) handle it as usual. The
bundled modules' imports join the solution's own in one sorted block, and `ruff format` lays the
result out (renamed lines grow). The generated region sits between two marker lines and is never
edited by hand:

    python -m problems._bundle            # rewrite every solution's bundle
    python -m problems._bundle --check    # exit 1 if any is stale (tests/solutions/test_bundles.py)
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "# ---- bundled shared kernel code (python -m problems._bundle; edit the source modules) ----"
END = "# ---- end of bundle ----"
HEADER_RE = re.compile(r"^# bundle: (.+)$", re.MULTILINE)
ENTRY_RE = re.compile(r"^\s*(\S+\.py) as (\w+)\s*$")
STDLIB = frozenset(sys.stdlib_module_names)


class BundleError(ValueError):
    """A solution's bundle header or a bundled module cannot be bundled."""


def header(text: str) -> list[tuple[str, str]]:
    """(module path, alias) pairs of a solution's `# bundle:` lines, in order; [] without any."""
    pairs = []
    for m in HEADER_RE.finditer(text):
        e = ENTRY_RE.match(m.group(1))
        if e is None:
            raise BundleError(f"bad bundle line {m.group(0)!r} (expected '# bundle: path.py as Alias')")
        pairs.append((e.group(1), e.group(2)))
    return pairs


def _import_text(node: ast.Import | ast.ImportFrom) -> list[str]:
    """One normalised line per imported name."""
    if isinstance(node, ast.Import):
        return [f"import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in node.names]
    module = "." * node.level + (node.module or "")
    return [f"from {module} import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in node.names]


def _is_problems(line: str) -> bool:
    return line.startswith(("import problems", "from problems"))


def sorted_imports(lines: set[str]) -> list[str]:
    """isort order: stdlib, then third-party sections; `import x` before `from x import y`, then by name;
    names imported from one module joined on one line."""
    froms: dict[str, list[str]] = {}
    plain = []
    for line in lines:
        if line.startswith("from "):
            module, name = line[5:].split(" import ", 1)
            froms.setdefault(module, []).append(name)
        else:
            plain.append(line)
    out = []
    for stdlib in (True, False):
        section = [p for p in sorted(plain, key=str.lower) if (p.split()[1].split(".")[0] in STDLIB) == stdlib]
        for module in sorted(froms, key=str.lower):
            if (module.split(".")[0] in STDLIB) == stdlib:
                names = ", ".join(sorted(froms[module], key=lambda n: (not n[0].isupper(), n.lower())))
                section.append(f"from {module} import {names}")
        if section:
            out += [*section, ""]
    return out[:-1]


def _top_level_names(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return list(dict.fromkeys(names))


def _check_renamable(path: str, tree: ast.Module, names: set[str]) -> None:
    """Renaming by token is safe only if no top-level name is a keyword, sits inside an f-string or names
    a class member (read as `obj.name`, which keeps the old name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            members = set(_top_level_names(ast.Module(body=node.body, type_ignores=[]))) & names
            if members:
                raise BundleError(f"{path}: the top-level name {min(members)!r} is also a member of {node.name}")
        if isinstance(node, ast.keyword) and node.arg in names:
            raise BundleError(f"{path}: the top-level name {node.arg!r} is also a keyword argument")
        if isinstance(node, ast.JoinedStr):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and inner.id in names:
                    raise BundleError(f"{path}: the top-level name {inner.id!r} is used in an f-string")


def module_code(path: str, alias: str, aliases: dict[str, str]) -> tuple[str, set[str]]:
    """(renamed code of the module at `path` plus its namespace line, its imports)."""
    source = (ROOT / path).read_text()
    tree = ast.parse(source)
    imports: set[str] = set()
    imported: dict[str, str] = {}  # name bound by a `from problems... import name` -> its bundled name
    drop: set[int] = set()  # 1-based lines of imports and of the module docstring
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            assert node.end_lineno is not None
            drop.update(range(node.lineno, node.end_lineno + 1))
            for line in _import_text(node):
                if line.startswith("from __future__"):
                    continue
                if _is_problems(line):
                    imported[_bound_name(line)] = _bundled_name(path, line, aliases)
                    continue
                imports.add(line)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        assert first.end_lineno is not None
        drop.update(range(first.lineno, first.end_lineno + 1))
    names = _top_level_names(tree)
    prefix = f"_{alias}_"
    rename = {n: new for n, new in imported.items() if n != new} | {n: prefix + n for n in names}
    _check_renamable(path, tree, set(rename))
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    renamed = []
    prev = None
    for tok in tokens:
        if tok.type == tokenize.NAME and tok.string in rename and not (prev is not None and prev.string == "."):
            tok = tok._replace(string=rename[tok.string])
        renamed.append(tok)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            prev = tok
    lines = tokenize.untokenize(renamed).splitlines()
    body = [line for i, line in enumerate(lines, start=1) if i not in drop]
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    members = "".join(f"    {n}={prefix}{n},\n" for n in names)
    code = "\n".join([f"# {path}", *body, "", f"{alias} = SimpleNamespace(\n{members})"])
    return code, imports


def _bundled_name(path: str, line: str, aliases: dict[str, str]) -> str:
    """What a bundled module's `problems` import line names in the bundle: `from problems.x import mod as
    A` the namespace A of mod bundled before under alias A, `from problems.x.mod import name` its renamed
    definition `_A_name`."""
    if line.startswith("import "):
        raise BundleError(f"{path}: {line!r} (import a bundled module as `from problems.x import mod as A`)")
    module, name = line[5:].split(" import ", 1)
    if " as " in name:
        name, alias = name.split(" as ")
        if aliases.get(name) != alias:
            raise BundleError(f"{path} imports {name} as {alias}; bundle it before, under that alias")
        return alias
    stem = module.rsplit(".", 1)[-1]
    if stem not in aliases:
        raise BundleError(f"{path} imports {name} from {module}; bundle that module before it")
    return f"_{aliases[stem]}_{name}"


def _bound_name(line: str) -> str:
    """The name an import line binds (`import a.b` binds a)."""
    if " as " in line:
        return line.rsplit(" as ", 1)[1]
    if line.startswith("from "):
        return line.rsplit(" import ", 1)[1]
    return line.split()[1].split(".")[0]


def render(text: str) -> str:
    """The solution text with its import block and bundle region regenerated (unchanged without a header).

    The import block is the bundled modules' imports plus those of the solution's own imports whose
    name its own code (after the bundle) uses."""
    pairs = header(text)
    if not pairs:
        return text
    tree = ast.parse(text)
    own: set[str] = set()
    import_lines: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            assert node.end_lineno is not None
            import_lines.update(range(node.lineno, node.end_lineno + 1))
            own.update(line for line in _import_text(node) if not _is_problems(line))
    lines = text.splitlines()
    headers = list(HEADER_RE.finditer(text))
    head_line = text[: headers[0].start()].count("\n")  # 0-based lines of the first and last header
    last_line = text[: headers[-1].start()].count("\n")
    if max(import_lines) > head_line:
        raise BundleError("a solution's imports must all come before its `# bundle:` lines")
    rest = "\n".join(lines[last_line + 1 :])
    if BEGIN in rest:
        if END not in rest:
            raise BundleError(f"bundle region without its end marker {END!r}")
        rest = rest.split(END, 1)[1]
    used = {n.id for n in ast.walk(ast.parse(rest)) if isinstance(n, ast.Name)}
    imports = {line for line in own if _bound_name(line) in used} | {"from types import SimpleNamespace"}
    aliases: dict[str, str] = {}
    parts = []
    for path, alias in pairs:
        code, needed = module_code(path, alias, aliases)
        parts.append(code)
        imports |= needed
        aliases[Path(path).stem] = alias
    docstring = "\n".join(lines[: min(import_lines) - 1]).rstrip()
    blocks = [
        docstring,
        "\n".join(sorted_imports(imports)),
        "\n".join(lines[head_line : last_line + 1]),
        "\n\n".join([BEGIN, "\n\n\n".join(parts), END]),
    ]
    tail = rest.strip("\n")
    return _ruff_format("\n\n".join(blocks) + ("\n\n\n" + tail if tail else "") + "\n")


def _ruff_format(text: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", "solution.py", "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise BundleError(f"ruff format failed: {done.stderr.strip()[:500]}")
    return done.stdout


def solutions() -> list[Path]:
    """Every solution file that declares a bundle."""
    return sorted(p for p in ROOT.glob("problems/*/solutions/[0-9]*_*.py") if header(p.read_text()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Bundle shared kernel modules into the solutions that use them.")
    ap.add_argument("--check", action="store_true", help="exit 1 if a bundle is stale, writing nothing")
    args = ap.parse_args(argv)
    stale = []
    for path in solutions():
        text = path.read_text()
        new = render(text)
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new)
    for path in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {path.relative_to(ROOT)}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
