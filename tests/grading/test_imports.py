"""The domain core stands on its own: grading imports nothing of the people side, its modules form no import
circle, and its packages stand in one order, each importing only those before it (ARCHITECTURE.md).
Read from the source, every import statement included, not only the top-level ones."""

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


# grading's packages from the ground up: each may import its own modules and the packages before it, never one
# after it. A package is one layer, so the order of this list is the whole layering rule; a new package is placed
# in it on purpose. The three modules Django and Celery look for by name (admin, tasks) and the demo data stand at
# the top with the edges.
PACKAGES: list[tuple[str, str]] = [
    ("grading.core", "the evidence contract, check names, weeks, payloads, untrusted text, the guarded HTTP client"),
    ("grading.importers", "export files read into conversation payloads"),
    ("grading.checks", "a draft's deterministic checks and repairs"),
    ("grading.models", "the nouns (the otlp app's too), the audit trail's write, what a membership reaches"),
    ("grading.judge", "one OpenAI-compatible call, the prompts, the log-probability-weighted score, embeddings"),
    ("grading.figures", "what each figure counts, and the agreement statistics"),
    ("grading.delivery", "tasks sent by name, webhook signing, the evaluation export"),
    ("grading.reviews", "the record: reviews and their state, counters, criteria versions, reads of items"),
    ("grading.certify", "certificates: where the judge may decide alone; the quality rate's interval"),
    ("grading.passes", "which items a grading pass grades"),
    ("grading.conversations", "conversations taken in and graded"),
    ("grading.drafts", "drafts taken in, graded by the gate, their pipelines told"),
    ("grading.dashboard", "the dashboard's figures, re-grade progress, labels, the audit sample"),
    ("grading.criteria", "what a criteria version would change, trials, trials scored against people"),
    ("grading.sets", "regression sets: frozen items with expected answers, and runs of a version over them"),
    ("grading.erasure", "erasure and retention in batches"),
    ("grading.monitors", "monitors: a figure over a window against levels, evaluated, its changes told"),
    ("grading.otlp", "OpenTelemetry in: the receiver, and the otlp app's migrations"),
    ("grading.api", "the HTTP API"),
    ("grading.management", "manage.py commands"),
    ("grading.admin", "the Django admin"),
    ("grading.demo", "the demo's data"),
    ("grading.tasks", "the Celery tasks: thin, they take ids"),
]  # fmt: skip


def _package_of(module: str) -> int | None:
    """The place in PACKAGES of the package that holds `module`; None for none."""
    for index, (package, _) in enumerate(PACKAGES):
        if module == package or module.startswith(package + "."):
            return index
    return None


def _layered_modules() -> dict[str, Path]:
    """Every module but the packages' faces: an `__init__.py` that holds nothing but its docstring."""
    modules = _modules().items()
    return {name: path for name, path in modules if path.name != "__init__.py" or not _only_a_docstring(path)}


def _only_a_docstring(path: Path) -> bool:
    return all(isinstance(node, ast.Expr) for node in ast.parse(path.read_text()).body)


def test_every_grading_module_is_in_a_package_of_the_order():
    assert sorted(name for name in _layered_modules() if _package_of(name) is None) == []


def test_no_grading_package_imports_one_after_it_in_the_order():
    modules = _layered_modules()
    known = set(_modules())
    upward = sorted(
        f"{name} imports {target} ({PACKAGES[_package_of(target)][0]} stands above {PACKAGES[_package_of(name)][0]})"
        for name, path in modules.items()
        for target in _imports(path, known)
        if _package_of(target) is not None and _package_of(target) > _package_of(name)
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
