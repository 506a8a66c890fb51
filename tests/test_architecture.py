"""The house rules of the code, checked from the source: apps import only downwards, modules never import
each other in a circle, entry points are imported by nobody, no project import hides in a function body,
and every task queued by name exists.

The floors are written here, independently of the code (which declares none): a move that breaks the
direction fails this test, not a review."""

import ast
from collections import defaultdict
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
FLOORS = {"core": 0, "sandbox": 1, "approvals": 1, "tools": 1, "planning": 2, "execution": 3, "project": 4}
ENTRY_POINTS = {"views", "table_views", "api", "tasks", "consumers", "urls", "routing", "admin"}

# (module, imported module) pairs that may import inside a function body, each with its reason. None
# today: an entry here needs a reason other than a cycle (start-up cost, say).
ALLOWED_LOCAL_IMPORTS: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    modules = {}
    for app in FLOORS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                modules[_module_name(path)] = path
    return modules


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function?) for every import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(child, module, path.name == "__init__.py")
                # `from planning import services` imports the module planning.services
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in child.names]
            for target in targets:
                while target and target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in known:
                    found.append((target, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return found


@pytest.fixture(scope="module")
def graph():
    modules = project_modules()
    known = set(modules)
    return {module: imports_of(module, path, known) for module, path in modules.items()}


def _app(module: str) -> str:
    return module.split(".")[0]


def test_apps_import_only_apps_on_their_own_floor_or_below(graph):
    upward = [
        f"{module}:{line} imports {target} (floor {FLOORS[_app(target)]} > {FLOORS[_app(module)]})"
        for module, imports in graph.items()
        for target, line, _ in imports
        if FLOORS[_app(target)] > FLOORS[_app(module)]
    ]
    assert upward == []


def test_two_apps_never_import_each_other_both_ways(graph):
    edges = {(_app(module), _app(target)) for module, imports in graph.items() for target, _, _ in imports if _app(target) != _app(module)}
    assert sorted((a, b) for a, b in edges if (b, a) in edges) == []


def test_no_module_import_cycle(graph):
    adjacency = defaultdict(set)
    for module, imports in graph.items():
        for target, _, _ in imports:
            if target != module and target in graph:
                adjacency[module].add(target)
    cycles, state, stack = [], {}, []

    def walk(node):
        state[node], _ = "open", stack.append(node)
        for nxt in sorted(adjacency[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                walk(nxt)
        state[node], _ = "done", stack.pop()

    for module in sorted(graph):
        if module not in state:
            walk(module)
    assert cycles == []


def test_entry_points_are_imported_by_nobody_but_the_root_wiring(graph):
    """Views, API routers, tasks and consumers are reached through URLs, the API, Celery and ASGI, which
    project/ wires together; an app's urls/routing module may name its own views or consumers."""
    offenders = []
    for module, imports in graph.items():
        for target, line, _ in imports:
            if target.split(".")[-1] not in ENTRY_POINTS or _app(module) == "project":
                continue
            wiring = module.split(".")[-1] in {"urls", "routing"} and _app(module) == _app(target)
            if not wiring:
                offenders.append(f"{module}:{line} imports {target}")
    assert offenders == []


def test_no_project_import_hides_in_a_function_body(graph):
    hidden = [
        f"{module}:{line} imports {target} inside a function"
        for module, imports in graph.items()
        for target, line, in_function in imports
        if in_function and (module, target) not in ALLOWED_LOCAL_IMPORTS
    ]
    assert hidden == []


def _enqueued_names() -> list[tuple[str, str]]:
    names = []
    for module, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "enqueue":
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant), f"{module}:{node.lineno} queues a task by a computed name"
                names.append((module, first.value))
    return names


def test_every_name_queued_through_jobs_is_a_registered_celery_task():
    from project.celery import app

    app.loader.import_default_modules()
    names = _enqueued_names()
    assert [(module, name) for module, name in names if name not in app.tasks] == []
    # ...and every task of ours is queued by someone (or by beat): no task is left behind by a rename.
    ours = {name for name in app.tasks if name.startswith(("planning.", "approvals."))}
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert ours - scheduled == {name for _, name in names}
