"""The domain core stands on its own: grading imports nothing of the people side, and its modules form no
import circle (DESIGN 11). Read from the source, every import statement included, not only the top-level ones."""

import ast
from pathlib import Path

GRADING = Path(__file__).resolve().parents[2] / "grading"


def _module_name(path: Path) -> str:
    parts = path.relative_to(GRADING.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in GRADING.rglob("*.py") if "migrations" not in path.parts}


def _imports(path: Path, known: set[str]) -> set[str]:
    """Every module `path` imports, wherever the statement stands; `from pkg import name` counts as an import
    of `pkg.name` when that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names} & known
    return found


def test_grading_imports_nothing_from_reviewer():
    modules = _modules()
    offending = {
        name: sorted(i for i in _imports(path, set(modules)) if i.split(".")[0] == "reviewer")
        for name, path in modules.items()
    }
    assert {name: found for name, found in offending.items() if found} == {}


def test_grading_has_no_import_circle():
    modules = _modules()
    graph = {name: sorted(_imports(path, set(modules)) & set(modules) - {name}) for name, path in modules.items()}
    circles = []
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in graph[name]:
            if state.get(target) == "open":
                circles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_no_grading_model_reaches_a_reviewer_table_through_a_relation():
    """Reverse accessors would let grading read the people side without an import (`review.claims`)."""
    from django.apps import apps

    reachable = [
        f"{model.__name__}.{relation.get_accessor_name()} -> {relation.related_model._meta.label}"
        for model in apps.get_app_config("grading").get_models()
        for relation in model._meta.related_objects
        if relation.related_model._meta.app_label == "reviewer" and not relation.remote_field.is_hidden()
    ]
    assert reachable == []
