"""The package's layering, read from its source with ``ast``: no module imports one from a
higher layer (not even inside a function), and the module-level imports have no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "headwise"
#: bottom to top; a module may import its own layer and those below it. The package root
#: (``headwise/__init__.py``: ``__version__`` and lazy re-exports) may be imported by all.
LAYERS = ("_lazy", "_fonts", "_files", "attention", "nn", "models", "text", "slots", "loading",
          "train", "intent", "inspect", "serve", "integrations", "demo", "commands",
          "cli")


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(path: Path, known: set[str], *, top_level_only: bool = False
            ) -> list[tuple[str, int]]:
    """The headwise modules ``path`` imports, with line numbers (``from headwise import x``
    counts as ``headwise.x`` when ``x`` is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    if top_level_only:  # module level, and inside `if TYPE_CHECKING:` not at all
        nodes = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("headwise")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "headwise":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.append((sub if sub in known else node.module, node.lineno))
    return found


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


def test_module_level_imports_have_no_cycle():
    mods = modules()
    graph = {name: {t for t, _ in imports(path, set(mods), top_level_only=True) if t in mods
                    and t != name}
             for name, path in mods.items()}
    # a package's __init__ importing its own submodules, and those importing the package,
    # is how Python packages work: count an edge to a package only from outside it
    graph = {n: {t for t in ts if not n.startswith(t + ".")} for n, ts in graph.items()}
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
        if n not in state:
            cycle = visit(n)
            assert cycle is None, " -> ".join(cycle)
