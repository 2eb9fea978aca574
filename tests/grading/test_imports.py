"""The domain core stands on its own: grading imports nothing of the people side, its modules form no import
circle, and no module imports one of a higher layer (ARCHITECTURE.md). Read from the source, every import
statement included, not only the top-level ones."""

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


# grading's layers, from the ground up: a module may import its own layer and those below. Packages group by
# capability (conversations, drafts, criteria, figures, ...); layers cut across them by what a module does. A module
# is in the layer of the longest prefix that names it.
LAYERS: list[tuple[str, list[str]]] = [
    ("core: the domain's nouns and its pure rules", [
        "grading.models", "grading.evidence", "grading.evidence_text", "grading.outcomes", "grading.errors",
        "grading.audit", "grading.schemas", "grading.weeks", "grading.reach", "grading.figures.definitions",
        "grading.figures.expressions", "grading.figures.agreement", "grading.figures.raters",
        "grading.figures.spreadsheets",
        "grading.drafts.prose", "grading.drafts.rules", "grading.drafts.v1_vocabulary", "grading.drafts.structure",
        "grading.drafts.budget", "grading.drafts.checks", "grading.drafts.repairs", "grading.judge.untrusted",
        "grading.hooks.outbound", "grading.hooks.signing", "grading.api.request_json", "grading.importers",
        "grading.otlp.models",
        "grading.otlp.apps",
    ]),
    ("the judge: talking to the model", ["grading.judge"]),
    ("handing work on: tasks sent by name, the evaluation export", [
        "grading.passes.enqueue", "grading.hooks.evaluations",
    ]),
    ("the record: reviews and their state, the counters booked with them, grading tickets, reads of items", [
        "grading.reviews", "grading.passes.inflight", "grading.figures.rollups", "grading.conversations.reads",
        "grading.drafts.reads", "grading.drafts.memory", "grading.criteria.versions", "grading.hooks.webhooks",
        "grading.figures.human", "grading.criteria.examples", "grading.audit_reads",
    ]),
    ("grading: items in, graded, labelled and sampled", [
        "grading.conversations", "grading.drafts", "grading.figures.labels", "grading.figures.sampling",
    ]),
    ("plans over many items: grading passes, criteria impact and trials, the dashboard's figures", [
        "grading.passes", "grading.criteria", "grading.figures", "grading.erasure",
    ]),
    ("edges: the API, OTLP in, Celery tasks, commands, admin, demo data", [
        "grading.api", "grading.otlp", "grading.tasks", "grading.management", "grading.admin", "grading.demo",
    ]),
]  # fmt: skip


def _layer_of(module: str) -> int | None:
    named = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(named)[1] if named else None


def _layered_modules() -> dict[str, Path]:
    """Every module but the packages' faces: an `__init__.py` that holds nothing but its docstring."""
    modules = _modules().items()
    return {name: path for name, path in modules if path.name != "__init__.py" or not _only_a_docstring(path)}


def _only_a_docstring(path: Path) -> bool:
    return all(isinstance(node, ast.Expr) for node in ast.parse(path.read_text()).body)


def test_every_grading_module_has_a_layer():
    assert sorted(name for name in _layered_modules() if _layer_of(name) is None) == []


def test_no_grading_module_imports_a_higher_layer():
    modules = _layered_modules()
    layer = {name: _layer_of(name) for name in modules}
    upward = sorted(
        f"{name} ({LAYERS[layer[name]][0].split(':')[0]}) imports {target} ({LAYERS[layer[target]][0].split(':')[0]})"
        for name, path in modules.items()
        for target in _imports(path, set(modules)) & set(modules)
        if layer[target] is not None and layer[name] is not None and layer[target] > layer[name]
    )
    assert upward == []


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
