"""The package's layers (docs/architecture.md, its `layers` block: the one place the order is written),
checked on the imports themselves: every import, at module level or inside a function, under
TYPE_CHECKING too, goes to the importer's own layer or one below it, no module imports itself
round a circle and no two packages of the block import each other round a loop. A new import against
the order fails here, naming both modules. Modules and functions stay small enough to read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "workflow" / "rlvr_scaling"
ARCHITECTURE = REPO / "docs" / "architecture.md"


def layers() -> list[tuple[str, list[str]]]:
    """(name, module prefixes), bottom first, from the fenced ```layers block of docs/architecture.md."""
    block = re.search(r"```layers\n(.*?)```", ARCHITECTURE.read_text(), re.S)
    assert block, f"{ARCHITECTURE} has no ```layers block"
    found = []
    for line in block.group(1).splitlines():
        if line.strip():
            name, _, prefixes = line.partition(":")
            found.append((name.strip(), [p.strip() for p in prefixes.split(",") if p.strip()]))
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(module: str) -> set[str]:
    """The package's modules `module` imports, wherever in it the import stands."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])]
                )
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("rlvr_scaling") and name != module:
                found.add(name)
    return found


def placed(module: str, order: list[tuple[str, list[str]]]) -> tuple[str, int] | None:
    """(the longest prefix of the layers block that names `module`, its layer's index), or None."""
    best: tuple[str, int] | None = None
    for index, (_, prefixes) in enumerate(order):
        for prefix in prefixes:
            # "rlvr_scaling" alone is the package's __init__, not everything under it
            matches = (
                module == prefix if prefix == "rlvr_scaling" else module == prefix or module.startswith(prefix + ".")
            )
            if matches and (best is None or len(prefix) > len(best[0])):
                best = (prefix, index)
    return best


def layer_of(module: str, order: list[tuple[str, list[str]]]) -> int | None:
    found = placed(module, order)
    return None if found is None else found[1]


def test_every_module_has_a_layer() -> None:
    order = layers()
    assert [m for m in MODULES if layer_of(m, order) is None] == []


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    order = layers()
    upward = []
    for module in MODULES:
        own = layer_of(module, order)
        for imported in sorted(imports_of(module)):
            theirs = layer_of(imported, order)
            if own is not None and theirs is not None and theirs > own:
                upward.append(f"{module} ({order[own][0]}) imports {imported} ({order[theirs][0]})")
    assert upward == [], "imports against docs/architecture.md's layers:\n" + "\n".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_between_modules() -> None:
    graph = {m: imports_of(m) for m in MODULES}
    found = cycles(graph)
    assert found == [], "modules that import each other round a circle:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_loop_between_packages() -> None:
    # Two packages of one layer (the top's commands and plan_view, say) may not import each other round a
    # loop either, even where no two modules do: the package named in the layers block is the unit.
    order = layers()
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        unit = placed(module, order)
        for imported in imports_of(module):
            theirs = placed(imported, order)
            if unit and theirs and theirs[0] != unit[0]:
                graph.setdefault(unit[0], set()).add(theirs[0])
    found = cycles(graph)
    assert found == [], "packages that import each other round a loop:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checks_see_an_import_against_the_order_and_a_circle() -> None:
    # The checks themselves, on a made-up graph: they must be able to fail.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    order = layers()
    bottom, top = order[0][1][-1], order[-1][1][0]
    assert layer_of(bottom, order) == 0 and layer_of(top, order) == len(order) - 1
    assert layer_of("rlvr_scaling.no_such_top_level_module", order) is None


MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# A function may be longer when its docstring says why, in a sentence starting with this.
LONG_BECAUSE = "Over 60 lines because"


def test_modules_and_functions_stay_small_enough_to_read() -> None:
    too_long = []
    for module, path in MODULES.items():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{module}: {len(text.splitlines())} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and LONG_BECAUSE not in (ast.get_docstring(node) or ""):
                    too_long.append(f"{module}.{node.name}: {length} lines, and no '{LONG_BECAUSE}' in its docstring")
    assert too_long == []
