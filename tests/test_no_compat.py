"""One name, one place, read from the source with ``ast``: no deprecation warning, no import
hook, no module-level ``__getattr__`` outside a package ``__init__``, no module that
re-exports another's names (public names live in a package's ``__init__``; every other
module's ``__all__`` lists only what it defines, and ``import x as x`` re-exports nothing),
and every ``from headwise... import name`` in the package, the tests and the benchmarks
names the module that defines it or a package that exports it."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from source_trees import nodes, parse

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "headwise"
#: where callers of the package live, besides the package itself
CALLERS = ("tests", "benchmarks")
#: what an alias of an old name warns with
DEPRECATION_WARNINGS = {"DeprecationWarning", "PendingDeprecationWarning"}
#: the import system's hooks an alias of an old module name is installed on
IMPORT_HOOKS = {"meta_path", "path_hooks"}


def sources() -> dict[str, tuple[Path, ast.Module]]:
    """Every module of the package by dotted name (a package by its own name), parsed
    (once a session: :mod:`source_trees`)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = (path, parse(path))
    return out


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"


def imported_names(tree: ast.Module) -> dict[str, str]:
    """Each name an import binds anywhere in the module -> where it comes from."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                out[a.asname or a.name] = f"{'.' * node.level}{node.module or ''}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name
    return out


@functools.cache
def defined_names(tree: ast.Module) -> frozenset[str]:
    """The names the module's top level defines: functions, classes and assignments that
    are not plain copies of an imported name (``old = new`` is an alias). Kept per tree (a
    parsed tree is shared and never changed: :mod:`source_trees`)."""
    imported = imported_names(tree)
    out: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                if isinstance(node.value, ast.Name) and node.value.id in imported:
                    continue  # an alias of an imported name defines nothing
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    out.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.If | ast.Try):  # platform branches, optional imports
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return frozenset(out)


def exported(path: Path, tree: ast.Module) -> list[str] | None:
    """The module's ``__all__`` (None: it has none); it must be a literal list of strings,
    so that it can be read."""
    found = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert isinstance(node, ast.Assign) and found is None, \
                f"{where(path, node)}: __all__ is assigned once, as a literal list"
            value = ast.literal_eval(node.value)
            assert isinstance(value, list | tuple) and all(isinstance(v, str) for v in value), \
                f"{where(path, node)}: __all__ must be a literal list of names"
            found = list(value)
    return found


def test_no_deprecation_warning_in_the_package():
    bad = [where(path, node) for path, _ in sources().values() for node in nodes(path)
           if (isinstance(node, ast.Name) and node.id in DEPRECATION_WARNINGS)
           or (isinstance(node, ast.Attribute) and node.attr in DEPRECATION_WARNINGS)]
    assert not bad, f"an old name is removed, not deprecated (nothing is released): {bad}"


def test_no_import_hook():
    bad = [where(path, node) for path, _ in sources().values() for node in nodes(path)
           if isinstance(node, ast.Attribute) and node.attr in IMPORT_HOOKS]
    assert not bad, f"no module aliases another module's name: {bad}"


def test_only_a_package_init_has_a_module_getattr():
    bad = [where(path, node) for path, tree in sources().values() if not is_package(path)
           for node in tree.body
           if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
           or isinstance(node, ast.Assign) and any(
               isinstance(n, ast.Name) and n.id == "__getattr__"
               for t in node.targets for n in ast.walk(t))]
    assert not bad, f"a module's names are what it defines, not what it resolves: {bad}"


def test_a_module_exports_only_what_it_defines():
    bad = []
    for path, tree in sources().values():
        names = exported(path, tree)
        if is_package(path) or names is None:
            continue
        imported, defined = imported_names(tree), defined_names(tree)
        bad += [f"{where(path, tree)} exports {name} from {imported[name]}" for name in names
                if name in imported and name not in defined]
        bad += [f"{where(path, tree)} exports {name}, which it does not define" for name in names
                if name not in imported and name not in defined]
    assert not bad, ("import each name from the module that defines it or from its "
                     "package's __init__:\n" + "\n".join(bad))


def lazy_map(tree: ast.Module) -> dict[str, str]:
    """A package's ``_LAZY`` (public name -> module), or {}."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "_LAZY" and node.value is not None:
            return ast.literal_eval(node.value)
    return {}


def test_a_package_exports_only_its_own_modules_names():
    mods = sources()
    bad = []
    for package, (path, tree) in mods.items():
        if not is_package(path):
            continue
        names = exported(path, tree) or []
        origin = {**imported_names(tree), **lazy_map(tree)}
        for name in names:
            module = origin.get(name)
            if module is None:
                continue  # defined in the __init__ itself
            if module.startswith("."):
                continue  # a relative import is inside the package
            if module != package and not module.startswith(package + "."):
                bad.append(f"{where(path, tree)} exports {name} from {module}, another "
                           f"package's name")
            elif module in mods and not is_package(mods[module][0]) \
                    and name not in defined_names(mods[module][1]):
                bad.append(f"{where(path, tree)} exports {name} from {module}, which does not "
                           f"define it")
    assert not bad, "\n".join(bad)


def test_no_explicit_reexport_alias():
    bad = [where(path, node) for path, _ in sources().values() for node in nodes(path)
           if isinstance(node, ast.ImportFrom) and any(a.asname == a.name for a in node.names)]
    assert not bad, f"`import x as x` re-exports x; import it from where it is defined: {bad}"


def test_every_import_names_where_the_name_lives():
    mods = sources()
    files = [*PACKAGE.rglob("*.py"), *(p for d in CALLERS for p in (ROOT / d).rglob("*.py"))]
    bad = []
    for path in sorted(files):
        for node in nodes(path):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0
                    and node.module in mods):
                continue
            where_path, where_tree = mods[node.module]
            offered = set(exported(where_path, where_tree) or ()) | set(lazy_map(where_tree)) \
                if is_package(where_path) else set()
            defined = defined_names(where_tree)
            for a in node.names:
                if f"{node.module}.{a.name}" in mods or a.name in defined | offered:
                    continue  # a submodule, a name defined there, a package's public name
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {a.name} from "
                           f"{node.module}, which neither defines nor exports it")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source, problem", [
    ("from a.b import x\n__all__ = ['x']\n", "exports x from a.b"),
    ("from a.b import x\ny = x\n__all__ = ['y']\n", "which it does not define"),
    ("def f():\n    pass\n__all__ = ['f', 'g']\n", "which it does not define"),
])
def test_the_reexport_check_finds_a_facade(tmp_path, source, problem, monkeypatch):
    (tmp_path / "headwise").mkdir()
    (tmp_path / "headwise" / "facade.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.PACKAGE", tmp_path / "headwise")
    with pytest.raises(AssertionError, match=problem):
        test_a_module_exports_only_what_it_defines()


def test_the_checks_find_a_hook_and_a_warning(tmp_path, monkeypatch):
    (tmp_path / "headwise").mkdir()
    (tmp_path / "headwise" / "old.py").write_text(
        "import sys, warnings\nfrom os import path as path\nsys.meta_path.insert(0, None)\n"
        "warnings.warn('x', DeprecationWarning)\ndef __getattr__(name):\n    pass\n",
        encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.PACKAGE", tmp_path / "headwise")
    for check in (test_no_deprecation_warning_in_the_package, test_no_import_hook,
                  test_only_a_package_init_has_a_module_getattr,
                  test_no_explicit_reexport_alias):
        with pytest.raises(AssertionError, match="old.py"):
            check()
