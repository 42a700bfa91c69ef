"""The package's shape (docs/architecture.md), read from the
source with ast, so a change that breaks it fails here rather than in review:

- no import cycle among ledgertool's modules, counting imports inside functions and the names
  ledgertool/__init__.py resolves lazily;
- only ledgertool/cli imports typer or rich, and nothing outside cli imports ledgertool.cli;
- library code (outside cli/) imports at module level, except the optional heavy dependencies;
- the modules `capture` and `verify` of a v2 ledger load import neither numpy nor pyarrow at module
  level (start-up: the functions that need them import them);
- library errors name settings, not command-line options (`errors.Setting`; cli/flags.py maps);
- no function over MAX_FUNCTION_LINES lines, but for the named ones being split;
- seal/ is pure: it opens no file and imports nothing above the ground floor (no ledger/,
  capture/, verify/, reconcile/, cli/; no fsio, os, pyarrow.parquet).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import python_source
from conftest import REPO

PKG = REPO / "ledgertool"
MAX_FUNCTION_LINES = 120

#: Functions still over MAX_FUNCTION_LINES, each being split by another change. Remove an
#: entry when its function is split; the test fails while an entry is stale.
#: Bodies over the limit since the code was formatted at 100 columns (each call's arguments on
#: lines of their own): to be split, not to grow.
LONG_FUNCTIONS: set[str] = set()

#: Top-level packages a library module may import inside a function: optional or heavy
#: dependencies loaded only on the path that needs them (scapy.layers.all takes seconds; numpy and
#: pyarrow 0.1-0.2 s of CPU, which `capture` and `verify` of a v2 ledger do not need).
DEFERRED_OK = {"scapy", "matplotlib", "fsspec", "numpy", "pyarrow"}

#: The modules whose import starts `capture` and `verify` (with the command line's own).
V2_PATH_ROOTS = (
    "ledgertool.cli.app",
    "ledgertool.capture.run",
    "ledgertool.verify.ledger",
    "ledgertool.verify.many",
)
NOT_AT_START = ("numpy", "pyarrow")

#: Files whose messages other changes rewrite (CaptureRun, the native boundary, the
#: verifier core); their option names in errors move to `Setting` there.
FLAG_WORDING_LEFT: set[str] = set()


@dataclass(frozen=True)
class Import:
    """One import statement: the module that holds it, what it imports, and where."""

    module: str
    target: str  # absolute dotted name
    lineno: int
    deferred: bool  # inside a function


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}
TREES = {name: python_source.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _imports(name: str) -> list[Import]:
    is_pkg = MODULES[name].name == "__init__.py"
    out: list[Import] = []

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                out.extend(Import(name, a.name, child.lineno, deferred) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                for a in child.names:  # `from pkg import sub` imports the module pkg.sub
                    sub = f"{mod}.{a.name}"
                    target = sub if sub in MODULES else mod
                    out.append(Import(name, target, child.lineno, deferred))
            # an import anywhere inside a function runs when it is called, not at import
            visit(child, deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(TREES[name], False)
    return out


IMPORTS = [imp for name in MODULES for imp in _imports(name)]


def _lazy_api_edges() -> list[tuple[str, str]]:
    """ledgertool/__init__.py's `_API` table: name -> "module:attribute", imported on first use."""
    for node in TREES["ledgertool"].body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "_API" for t in node.targets
        ):
            return [("ledgertool", ast.literal_eval(v).split(":")[0]) for v in node.value.values]
    raise AssertionError("ledgertool/__init__.py has no _API table")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _rel(module: str) -> str:
    return str(MODULES[module].relative_to(PKG))


def _in_cli(module: str) -> bool:
    return module == "ledgertool.cli" or module.startswith("ledgertool.cli.")


def test_no_import_cycle() -> None:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.target in MODULES and imp.target != imp.module:
            edges[imp.module].add(imp.target)
    for src, dst in _lazy_api_edges():
        edges[src].add(dst)
    assert _cycles(edges) == []


def test_cycle_finder_finds_a_cycle() -> None:
    """The finder itself: a three-module ring and a self-contained pair."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": set()}) == [
        ["a", "b", "c"]
    ]


def test_only_cli_imports_typer_and_rich() -> None:
    bad = [
        f"{_rel(i.module)}:{i.lineno} imports {i.target}"
        for i in IMPORTS
        if i.target.split(".")[0] in ("typer", "rich") and not _in_cli(i.module)
    ]
    assert bad == []


def test_nothing_outside_cli_imports_cli() -> None:
    bad = [
        f"{_rel(i.module)}:{i.lineno} imports {i.target}"
        for i in IMPORTS
        if _in_cli(i.target) and not _in_cli(i.module)
    ]
    assert bad == []


def test_library_imports_at_module_level() -> None:
    bad = [
        f"{_rel(i.module)}:{i.lineno} imports {i.target} inside a function"
        for i in IMPORTS
        if i.deferred and not _in_cli(i.module) and i.target.split(".")[0] not in DEFERRED_OK
    ]
    assert bad == []


def _runtime_top_imports(name: str) -> list[str]:
    """What importing module `name` imports: its module-level imports, outside functions and
    `if TYPE_CHECKING:` blocks (annotations only), and the packages above each."""
    is_pkg = MODULES[name].name == "__init__.py"
    out: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                out.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                out.extend(
                    f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names
                )
            elif isinstance(node, ast.ExceptHandler | ast.ClassDef | ast.If | ast.Try | ast.With):
                visit(
                    node.body
                    + getattr(node, "orelse", [])
                    + getattr(node, "finalbody", [])
                    + getattr(node, "handlers", [])
                )

    visit(TREES[name].body)
    parents = {".".join(m.split(".")[:k]) for m in out for k in range(1, m.count(".") + 1)}
    return out + sorted(parents)


def test_v2_capture_and_verify_modules_import_no_numpy_or_pyarrow_at_module_level() -> None:
    """Every module that loading `capture` or `verify` imports (following module-level imports
    from V2_PATH_ROOTS) leaves numpy and pyarrow to the functions that use them."""
    seen: set[str] = set()
    todo = list(V2_PATH_ROOTS)
    bad = []
    while todo:
        name = todo.pop()
        if name in seen or name not in MODULES:
            continue
        seen.add(name)
        for target in _runtime_top_imports(name):
            if target.split(".")[0] in NOT_AT_START:
                bad.append(f"{_rel(name)} imports {target}")
            todo.append(target)
    assert "ledgertool.seal.document" in seen and "ledgertool.ledger.reader" in seen, sorted(seen)
    assert bad == []


_FLAG = re.compile(r"(?<![\w-])--[a-z]")


def _raise_texts(tree: ast.AST):
    """(line, text) of every string piece in the arguments of a raised exception call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            for arg in node.exc.args:
                for sub in ast.walk(arg):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        yield sub.lineno, sub.value


def test_library_errors_name_settings_not_options() -> None:
    bad = [
        f"{_rel(m)}:{line}: {text!r}"
        for m, tree in TREES.items()
        if not _in_cli(m) and _rel(m) not in FLAG_WORDING_LEFT
        for line, text in _raise_texts(tree)
        if _FLAG.search(text)
    ]
    assert bad == []


def _long_functions() -> dict[str, int]:
    out = {}
    for m, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # the body's lines: a signature of many options (a CLI command) and the docstring
                # say what the function takes, not how much it does
                body = node.body
                if (
                    len(body) > 1
                    and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                ):
                    body = body[1:]
                n = node.end_lineno - body[0].lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out[f"{_rel(m)}::{node.name}"] = n
    return out


def test_no_long_functions() -> None:
    long = _long_functions()
    assert sorted(set(long) - LONG_FUNCTIONS) == [], f"over {MAX_FUNCTION_LINES} lines: {long}"


def test_long_function_allowlist_is_current() -> None:
    stale = sorted(LONG_FUNCTIONS - set(_long_functions()))
    assert stale == [], f"split now, drop from LONG_FUNCTIONS: {stale}"


def test_architecture_doc_names_real_files() -> None:
    """docs/architecture.md draws the flow with the real module names: every `pkg/module.py` and
    native file it names exists (ADR 0007), so the drawing cannot drift from the tree unnoticed."""
    root = PKG.parent
    text = (root / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"\bnative/(?:src|include|bypass)/[a-z_0-9]+\.[ch]\b", text))
    named |= set(re.findall(r"(?<![/\w])[a-z_]+/[a-z_0-9]+\.py\b", text))
    bare_c = set(re.findall(r"(?<![/\w<])[a-z_0-9]+\.c\b", text))  # native/src/x.c written as x.c
    assert len(named) + len(bare_c) > 30, named  # the drawing names the modules, not just packages
    missing = [
        rel for rel in sorted(named) if not ((root / rel).is_file() or (PKG / rel).is_file())
    ]
    missing += [
        c
        for c in sorted(bare_c)
        if not any((root / "native" / d / c).is_file() for d in ("src", "bypass"))
    ]
    assert missing == []


#: What seal/ may import from ledgertool besides itself: the ground floor (ADR 0007).
SEAL_MAY_IMPORT = {
    "ledgertool.algorithms",
    "ledgertool.canonical",
    "ledgertool.errors",
    "ledgertool.keyfiles",
    "ledgertool.plural",
}
#: Modules that reach files; seal/ imports none of them.
FILE_MODULES = {
    "os",
    "io",
    "shutil",
    "tempfile",
    "mmap",
    "glob",
    "pyarrow.parquet",
    "ledgertool.fsio",
}
#: Calls that open, read, write or list files (builtins.open, os.open, Path.read_bytes, ...).
FILE_CALLS = {
    "open",
    "fdopen",
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "iterdir",
    "glob",
    "rglob",
    "mkdir",
    "unlink",
    "touch",
    "rename",
    "stat",
    "lstat",
    "exists",
    "is_file",
    "is_dir",
    "read_regular",
    "write_atomic",
}


def _file_touches(tree: ast.AST) -> list[str]:
    """`line: what` for each import of a file module and each file call in `tree`."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")]
        elif isinstance(node, ast.Call):
            f = node.func
            name = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            if name in FILE_CALLS:
                out.append(f"{node.lineno}: calls {name}")
            continue
        else:
            continue
        out += [
            f"{node.lineno}: imports {n}"
            for n in names
            if n in FILE_MODULES
            or n.split(".")[0] in FILE_MODULES
            or n.startswith(".")
            and n.lstrip(".") == "fsio"
        ]
    return out


def _in_seal(module: str) -> bool:
    return module.startswith("ledgertool.seal.") or module == "ledgertool.seal"


def test_seal_opens_no_file() -> None:
    bad = [
        f"{_rel(m)}:{t}" for m, tree in TREES.items() if _in_seal(m) for t in _file_touches(tree)
    ]
    assert bad == []


def test_seal_imports_nothing_above_it() -> None:
    bad = [
        f"{_rel(i.module)}:{i.lineno} imports {i.target}"
        for i in IMPORTS
        if _in_seal(i.module)
        and i.target.startswith("ledgertool")
        and not _in_seal(i.target)
        and i.target not in SEAL_MAY_IMPORT
    ]
    assert bad == []


def test_file_check_finds_file_access() -> None:
    """The checker itself: each way of reaching a file is named, pure code is not."""
    code = (
        "import os\nimport pyarrow.parquet as pq\nfrom ..fsio import read_regular\n"
        "open('x')\nPath('x').read_bytes()\np.write_text('y')\nos.open('x', 0)\n"
        "h = hashlib.sha256(b'').hexdigest()\n"
    )
    found = _file_touches(python_source.parse(code))
    assert found == [
        "1: imports os",
        "2: imports pyarrow.parquet",
        "3: imports ..fsio",
        "4: calls open",
        "5: calls read_bytes",
        "6: calls write_text",
        "7: calls open",
    ], found


#: `module::name` of private names another library module may import (none: a name shared by two
#: modules is public in the module that owns it).
PRIVATE_IMPORTS_OK: set[str] = set()


def _private_imports(tree: ast.Module, rel: str) -> list[str]:
    """Private names (`_x`, not dunders) `tree` takes from another ledgertool module: imported by
    name, or read as an attribute of a ledgertool module it imported."""
    private = re.compile(r"_(?!_)")
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").split(".")[0] == "ledgertool"
        ):
            for alias in node.names:
                modules.add(alias.asname or alias.name)
                if private.match(alias.name):
                    found.append(f"{rel}:{node.lineno} imports {alias.name}")
        elif isinstance(node, ast.Import):
            modules |= {
                alias.asname or alias.name.split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] == "ledgertool"
            }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and private.match(node.attr)
        ):
            found.append(f"{rel}:{node.lineno} reads {node.value.id}.{node.attr}")
    return [f for f in found if f"{rel}::{f.rsplit(' ', 1)[1]}" not in PRIVATE_IMPORTS_OK]


def test_no_private_name_crosses_modules() -> None:
    """One concept per module: what two modules share is public in the one that owns it."""
    found = [hit for m, tree in TREES.items() for hit in _private_imports(tree, _rel(m))]
    assert found == []


def test_private_import_scan_finds_both_forms() -> None:
    sample = python_source.parse(
        "from .keyfiles import _write, public\n"
        "from ..seal import witness\n"
        "import ledgertool.ledger.layout\n"
        "from . import rate as _rate\n"
        "x = witness._NAME_RE, ledgertool._lazy, public.__doc__, _rate\n"
    )
    assert _private_imports(sample, "m.py") == [
        "m.py:1 imports _write",
        "m.py:5 reads witness._NAME_RE",
        "m.py:5 reads ledgertool._lazy",
    ]
