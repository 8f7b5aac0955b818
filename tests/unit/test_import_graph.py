"""No import cycles among the service's modules, counting every import the source names.

The graph is read with ``ast``, so it holds the imports under ``if TYPE_CHECKING:`` and
inside functions too: a cycle hidden from the interpreter still couples the modules.
An edge goes to the module a statement names (``from a.b import c`` names ``a.b.c`` when
that is a module, else ``a.b``); the parent packages Python imports on the way are not.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("domain", "projections", "api", "workers")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Module name -> file, for every module of ``packages`` under ``root``."""
    return {
        module_name(root, path): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }


def imported(module: str, is_package: bool, tree: ast.AST, modules: Collection[str]) -> Iterable[str]:
    """Every module of ``modules`` that ``tree`` imports, wherever the statement stands."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                named = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
                yield from [name for name in named if name in modules][:1]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                # ``from a.b import c`` names the module a.b.c when there is one, else a.b.
                name = f"{base}.{alias.name}"
                if name in modules:
                    yield name
                elif base in modules:
                    yield base


def import_graph(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports."""
    files = source_files(root, packages)
    return {
        module: set(imported(module, path.name == "__init__.py", ast.parse(path.read_text(), str(path)), files))
        - {module}
        for module, path in files.items()
    }


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle as ``[a, b, …, a]``, or None when the graph has none."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(sorted(graph.get(start, ())))]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                return path[path.index(step) :] + [step]
            elif not state.get(step):
                state[step] = 1
                path.append(step)
                stack.append(iter(sorted(graph.get(step, ()))))
    return None


def test_the_service_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "domain.studio.commands.control" in graph  # the walk found the modules
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_imports_under_type_checking_and_in_functions_make_cycles(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "domain/__init__.py": "",
            "domain/app.py": "from domain.area import commands\n",
            "domain/area/__init__.py": "",
            "domain/area/commands.py": "from . import rules\n",
            "domain/area/rules.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from ..app import App\n"
            ),
            "workers/__init__.py": "",
            "workers/boot.py": "def build():\n    import workers.later\n",
            "workers/later.py": "def f():\n    from workers import boot\n",
        },
    )
    graph = import_graph(tmp_path, ("domain", "workers"))
    assert graph["domain.app"] == {"domain.area.commands"}
    assert graph["domain.area.commands"] == {"domain.area.rules"}
    assert graph["domain.area.rules"] == {"domain.app"}
    assert find_cycle(graph) == ["domain.app", "domain.area.commands", "domain.area.rules", "domain.app"]
    assert find_cycle({k: v for k, v in graph.items() if not k.startswith("domain")}) == [
        "workers.boot",
        "workers.later",
        "workers.boot",
    ]


def test_a_graph_without_back_edges_has_no_cycle() -> None:
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
