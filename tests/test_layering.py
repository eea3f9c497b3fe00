"""The package's layering, read from its source with ``ast``: no module imports one from a
higher layer, the imports have no cycle, and ``headwise.intent.decision`` (the math under the
classifiers) imports no other module of ``headwise.intent``. Every import statement counts:
at module level, inside a function, and under ``if TYPE_CHECKING:`` (a circle that only
closes when a function runs, or for the type checker, is still a circle: the two modules
cannot be understood, tested or moved apart)."""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

from source_trees import nodes

PACKAGE = Path(__file__).resolve().parent.parent / "headwise"
#: bottom to top; a module may import its own layer and those below it. The package root
#: (``headwise/__init__.py``: ``__version__`` and lazy re-exports) may be imported by all.
LAYERS = ("_lazy", "_fonts", "_files", "attention", "nn", "models", "text", "slots", "loading",
          "onnx", "train", "intent", "inspect", "serve", "integrations", "demo", "commands",
          "cli")
#: ``headwise.intent``'s classifier modules: the classifiers, how they answer, their kinds
CLASSIFIER_MODULES = ("headwise.intent.classifier", "headwise.intent.tfidf",
                      "headwise.intent.ensemble", "headwise.intent.soup",
                      "headwise.intent.kinds", "headwise.intent.answering",
                      "headwise.intent.compound")


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(path: Path, known: set[str]) -> list[tuple[str, int]]:
    """The headwise modules ``path`` imports anywhere in it (module level, functions,
    ``if TYPE_CHECKING:``), with line numbers. ``from headwise import x`` counts as
    ``headwise.x`` when ``x`` is a module; a relative import is resolved against the
    module's package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1]  # the package a module (or an __init__) sits in
    found = []
    for node in nodes(path):  # parsed once a session (source_trees)
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("headwise")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join((*base, node.module) if node.module else base)
            else:
                module = node.module or ""
            if module.split(".")[0] != "headwise":
                continue
            for a in node.names:
                sub = f"{module}.{a.name}"
                found.append((sub if sub in known else module, node.lineno))
    return found


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {headwise module it imports: the line of the first such import}. A
    package's ``__init__`` importing its own submodules, and those importing the package,
    is how Python packages work: an edge to a package counts only from outside it."""
    mods = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        edges: dict[str, int] = {}
        for target, line in imports(path, set(mods)):
            if target in mods and target != name and not name.startswith(target + "."):
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for t in sorted(graph[n]):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state and (cycle := visit(t)):
                return cycle
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (cycle := visit(n)):
            return cycle
    return None


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer(module: str) -> str | None:
    parts = module.split(".")
    return None if len(parts) == 1 else parts[1]


def test_every_module_belongs_to_a_layer():
    unknown = sorted({layer(m) for m in modules()} - set(LAYERS) - {None})
    assert not unknown, f"add {unknown} to LAYERS in its place"


def test_no_module_imports_a_higher_layer():
    mods = modules()
    bad = []
    for name, path in mods.items():
        src = layer(name)
        for target, line in imports(path, set(mods)):
            dst = layer(target)
            if src and dst and LAYERS.index(dst) > LAYERS.index(src):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name} ({src}) "
                           f"imports {target} ({dst})")
    assert not bad, "\n".join(bad)


def test_imports_have_no_cycle():
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "an import cycle (module:line of each import): " + " -> ".join(
        [f"{a}:{graph[a][b]}" for a, b in pairwise(cycle)] + [cycle[-1]])


def test_the_reader_counts_imports_in_functions_and_for_the_type_checker(tmp_path,
                                                                          monkeypatch):
    """What the cycle test reads: an import inside a function or under TYPE_CHECKING is
    an edge, and a cycle closed only by one is found."""
    pkg = tmp_path / "headwise"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from headwise.sub.b import B\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n"
        "def f():\n    from headwise.sub import a\n    return a\n")
    (pkg / "sub" / "c.py").write_text("")
    monkeypatch.setitem(globals(), "PACKAGE", pkg)
    known = set(modules())
    assert imports(pkg / "sub" / "b.py", known) == [("headwise.sub.c", 3), ("headwise.sub.a", 5)]
    graph = import_graph()
    assert find_cycle(graph) == ["headwise.sub.a", "headwise.sub.b", "headwise.sub.a"]


def test_decision_imports_no_classifier():
    """``headwise.intent.decision`` (temperature, thresholds, detectors) is math under the
    classifiers: it imports no other module of ``headwise.intent``, so none of
    :data:`CLASSIFIER_MODULES`; what works on a trained classifier is
    ``headwise.intent.posthoc``."""
    mods = modules()
    assert set(CLASSIFIER_MODULES) <= set(mods), "update CLASSIFIER_MODULES"
    bad = []
    for name, path in mods.items():
        if _within(name, "headwise.intent.decision"):
            for target, line in imports(path, set(mods)):
                if _within(target, "headwise.intent") \
                        and not _within(target, "headwise.intent.decision"):
                    classifier = any(_within(target, c) for c in CLASSIFIER_MODULES)
                    bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name} imports "
                               f"{target}" + (" (a classifier module)" if classifier else ""))
    assert not bad, "\n".join(dict.fromkeys(bad))
