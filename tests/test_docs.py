"""The docs hold what the code does: every environment variable the code reads has its row in the configuration
reference and every row names one the code reads; every relative link of the README and docs/ leads to a file and
heading that exist; no comment or docstring cites a document the repository does not hold; and ARCHITECTURE.md names
every model, every beat schedule and only files that exist, and gives grading's packages in the order the import
test holds. Read from the source (ast, tokenize) and from Django's and Celery's own registries, so a variable read in
a new place, a new model or a new schedule is found without anyone listing it here."""

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings

from tests.builders.processes import REPO_ROOT
from tests.grading.test_imports import PACKAGES

ARCHITECTURE = REPO_ROOT / "ARCHITECTURE.md"
CONFIGURATION = REPO_ROOT / "docs" / "configuration.md"
PYTHON_DIRS = ("grading", "reviewer", "deploy", "bench", "tests")
CITING_DIRS = ("grading", "reviewer", "deploy", "bench", "tests")
# Read by the code, but set by others and nobody's to configure.
NOT_SETTINGS = {"PATH": "the shell's search path", "PYTEST_XDIST_WORKER": "set by pytest-xdist in each worker"}
_ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \|", re.MULTILINE)


def _python_files(*dirs: str) -> Iterator[Path]:
    yield REPO_ROOT / "manage.py"
    for name in dirs:
        yield from (path for path in (REPO_ROOT / name).rglob("*.py") if "migrations" not in path.parts)


def _env_helpers() -> set[str]:
    """The strict parsers of reviewer/env.py: each takes the variable's name as its first argument."""
    tree = ast.parse((REPO_ROOT / "reviewer" / "env.py").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("env_")}


def _is_os_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", None) == "os"


def _name_in(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _reads_by_first_argument(call: ast.Call, helpers: set[str]) -> bool:
    """An env helper (`env_int(...)`, `env.env_int(...)`), `os.environ.get(...)` or `os.getenv(...)`."""
    function = call.func
    if isinstance(function, ast.Name):
        return function.id in helpers
    if not isinstance(function, ast.Attribute):
        return False
    if function.attr == "get":
        return _is_os_environ(function.value)
    if function.attr == "getenv":
        return getattr(function.value, "id", None) == "os"
    return function.attr in helpers


def variables_read(source: str, *, helpers: set[str]) -> set[str]:
    """The environment variables `source` reads by name: through an env helper (`env_int("NAME", ...)`),
    `os.environ.get("NAME")`, `os.getenv("NAME")`, `os.environ["NAME"]` or `"NAME" in os.environ`. Writes
    (`os.environ["NAME"] = ...`, `setdefault`, `del`) are not reads."""
    found: set[str] = set()
    if not any(word in source for word in ("environ", "getenv", *helpers)):
        return found  # every read names one of these: most modules are not parsed at all
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Call) and node.args and _reads_by_first_argument(node, helpers):
            name = _name_in(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_os_environ(node.value):
            name = _name_in(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_os_environ(c) for c in node.comparators):
            name = _name_in(node.left) if isinstance(node.ops[0], ast.In | ast.NotIn) else None
        if name:
            found.add(name)
    return found


def _read_by_make_and_shell() -> set[str]:
    """What the Makefile takes from the environment (`NAME ?=`, `$(NAME)` it never assigns, `$${NAME:-...}`) and
    what the shell scripts do (`${NAME:-...}`)."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    assigned = {name for name, _ in re.findall(r"^([A-Z_][A-Z0-9_]*)\s*([?:]?)=", makefile, re.MULTILINE)}
    overridable = set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*\?=", makefile, re.MULTILINE))
    used = set(re.findall(r"\$\(([A-Z_][A-Z0-9_]*)\)", makefile)) - assigned
    found = overridable | used | set(re.findall(r"\$\$\{([A-Z_][A-Z0-9_]*)", makefile))
    for script in (REPO_ROOT / ".ci" / "run", REPO_ROOT / "deploy" / "tollgate-manage"):
        found |= set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*):-", script.read_text()))
    return found


@cache  # parsed once for both directions of the check: it reads every module of the tree
def _read_in_code() -> dict[str, set[str]]:
    """Every variable read, with where. The tests call the env helpers with made-up names to test the helpers, so
    there only their reads of os.environ count."""
    helpers = _env_helpers()
    places: dict[str, set[str]] = {}
    for path in _python_files(*PYTHON_DIRS):
        in_tests = path.relative_to(REPO_ROOT).parts[0] == "tests"
        for name in variables_read(path.read_text(), helpers=set() if in_tests else helpers):
            places.setdefault(name, set()).add(str(path.relative_to(REPO_ROOT)))
    for name in _read_by_make_and_shell():
        places.setdefault(name, set()).add("Makefile or a script")
    return {name: where for name, where in places.items() if name not in NOT_SETTINGS}


def _rows() -> list[str]:
    return _ROW.findall(CONFIGURATION.read_text())


@pytest.mark.slow
def test_it_documents_every_environment_variable_the_code_reads():
    documented = set(_rows())
    missing = {name: sorted(where) for name, where in _read_in_code().items() if name not in documented}
    assert not missing, f"read by the code but not in docs/configuration.md: {missing}"


@pytest.mark.slow
def test_it_documents_no_variable_the_code_does_not_read():
    read = _read_in_code()
    assert not [name for name in _rows() if name not in read], "in docs/configuration.md but read by no code"


def test_it_documents_each_variable_in_one_row():
    rows = _rows()
    assert len(rows) == len(set(rows)), sorted({name for name in rows if rows.count(name) > 1})


def test_it_finds_a_variable_however_the_code_reads_it():
    source = """
import os
from reviewer.env import env_int
from reviewer import env
A = env_int("BY_HELPER", 1)
B = env.env_str("BY_MODULE_HELPER")
C = os.environ.get("BY_GET", "x")
D = os.getenv("BY_GETENV")
E = os.environ["BY_SUBSCRIPT"]
F = "BY_MEMBERSHIP" in os.environ
os.environ["WRITTEN"] = "1"
os.environ.setdefault("DEFAULTED", "1")
del os.environ["DELETED"]
G = os.environ | {"MERGED": "1"}
"""
    read = variables_read(source, helpers=_env_helpers())
    assert read == {"BY_HELPER", "BY_MODULE_HELPER", "BY_GET", "BY_GETENV", "BY_SUBSCRIPT", "BY_MEMBERSHIP"}


def test_it_names_in_the_settings_file_only_documented_variables():
    """deploy/tollgate.env.example, commented lines too: a misspelt name there would be silently ignored."""
    documented = set(_rows())
    example = (REPO_ROOT / "deploy" / "tollgate.env.example").read_text()
    names = re.findall(r"^#?([A-Z][A-Z0-9_]*)=", example, re.MULTILINE)
    assert names
    assert [name for name in names if name.removesuffix("_FILE") not in documented] == []


# --- links ----------------------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _without_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _without_code(path.read_text()), re.MULTILINE):
        slug, n = _slug(heading), 1
        while slug in anchors:  # a repeated heading gets -1, -2, ...
            slug, n = f"{_slug(heading)}-{n}", n + 1
        anchors.add(slug)
    return anchors


def _broken_links(path: Path) -> list[str]:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _without_code(path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
            broken.append(target)
    return broken


def test_it_links_only_to_files_and_headings_that_exist():
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    assert len(pages) > 1
    broken = {str(page.relative_to(REPO_ROOT)): links for page in pages if (links := _broken_links(page))}
    assert not broken


def test_it_finds_a_broken_link_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A heading: here\n\n[ok](#a-heading-here) [gone](nowhere.md) [no such](#elsewhere)\n")
    assert _broken_links(page) == ["nowhere.md", "#elsewhere"]


# --- citations --------------------------------------------------------------------------------------------------


def prose(source: str) -> Iterator[str]:
    """The comments and docstrings of a module: where the code cites documents."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.string
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, documented) and (docstring := ast.get_docstring(node, clean=False)):
            yield docstring


_SECTION_OF_AN_OUTSIDE_DESIGN = re.compile(r"\bDESIGN\b\W*(section\W*)?\d")
_MARKDOWN_PATH = re.compile(r"(?<![\w/.-])((?:\.\.?/)?[\w./-]*\w\.md)\b")
# A document, then one of its headings in quotes: the README's, or a docs/ file's followed by a comma or a colon.
_SECTION = re.compile(r"(?<![\w/.-])(README|(?:\.\.?/)?[\w./-]*\w\.md)(?:'s)?[,:]? \"([^\"]+)\"")


def _in_repository(path: str, folder: Path) -> Path | None:
    inside = [(base / path).resolve() for base in (REPO_ROOT, folder)]
    return next((p for p in inside if p.is_relative_to(REPO_ROOT) and p.exists()), None)


def cited_elsewhere(source: str, *, folder: Path) -> list[str]:
    """What `source` cites that the repository does not hold: sections of a design document it never had,
    Markdown files that are not in it (relative to the repository, or to the file's own folder), and headings a
    document it holds does not have."""
    missing: list[str] = []
    if not any(word in source for word in ("DESIGN", ".md", "README")):
        return missing  # each citation names one of these: most modules are not read token by token
    for text in prose(source):
        missing += [match.group(0) for match in _SECTION_OF_AN_OUTSIDE_DESIGN.finditer(text)]
        missing += [path for path in _MARKDOWN_PATH.findall(text) if _in_repository(path, folder) is None]
        for document, heading in _SECTION.findall(text):
            found = _in_repository("README.md" if document == "README" else document, folder)
            if found is not None and _slug(heading) not in _anchors(found):
                missing.append(f'{document} "{heading}"')
    return missing


@pytest.mark.slow
def test_it_cites_no_document_the_repository_does_not_hold():
    cited = {}
    for path in _python_files(*CITING_DIRS):
        if found := cited_elsewhere(path.read_text(), folder=path.parent):
            cited[str(path.relative_to(REPO_ROOT))] = found
    assert not cited


def test_it_finds_a_citation_of_what_is_not_here():
    design = "DESIGN"  # written apart, so this module's own source cites nothing
    source = f'''"""The gate ({design} 5.3), the rules ({design} section 9)."""
# see docs/nowhere.md and ../outside/README.md; README.md and docs/configuration.md are here
# the README's "Two commands" is a heading there, and so is docs/production.md, "Mail"; README, "Tests" is not
path = "clean.md"  # a file name in code is no citation
'''
    found = cited_elsewhere(source, folder=REPO_ROOT)
    cited = [f"{design} 5", f"{design} section 9", "docs/nowhere.md", "../outside/README.md", 'README "Tests"']
    assert sorted(found) == sorted(cited)


def _code_spans(text: str) -> list[str]:
    """What a Markdown text writes as code: the text between each pair of backticks on a line."""
    return re.findall(r"`([^`\n]*)`", text)


def _named(names: list[str], text: str) -> list[str]:
    """The names of `names` that `text` never writes as code (in a span between backticks, alone or in a list)."""
    written = {word for span in _code_spans(text) for word in re.findall(r"[\w-]+", span)}
    return [name for name in names if name not in written]


def test_the_architecture_names_every_model_of_the_project():
    models = [model.__name__ for model in apps.get_models() if model.__module__.startswith(("grading.", "reviewer."))]
    assert len(models) > 40  # the registry was read
    assert not _named(models, ARCHITECTURE.read_text())


def test_the_architecture_names_every_beat_schedule():
    schedules = list(settings.CELERY_BEAT_SCHEDULE)
    assert len(schedules) > 5
    assert not _named(schedules, ARCHITECTURE.read_text())


def test_a_name_counts_only_where_it_is_written_as_code():
    text = "| `Review` and `Decision`, `Answer`; a Claim in prose, `RegressionRunItem` | `grading-pass-hourly` (:05) |"
    names = ["Review", "Answer", "Claim", "RegressionRun", "Run", "grading-pass-hourly", "grading-pass"]
    assert _named(names, text) == ["Claim", "RegressionRun", "Run", "grading-pass"]


def test_the_architecture_gives_the_package_order_the_import_test_holds():
    text = ARCHITECTURE.read_text()
    order = text[text.index("`core` →") :].split("\n\n", 1)[0]
    assert re.findall(r"`(\w+)`", order) == [package.removeprefix("grading.") for package, _ in PACKAGES]


def _files_named(text: str) -> set[str]:
    """The repository's paths `text` writes as code: those under a folder at the repository's top (of a placeholder
    such as `tests/<area>/`, the part before it)."""
    folders = "|".join(path.name for path in REPO_ROOT.iterdir() if path.is_dir() and not path.name.startswith("."))
    return {path for span in _code_spans(text) for path in re.findall(rf"\b(?:{folders})/[\w./-]*", span)}


def test_the_architecture_names_only_files_that_exist():
    named = _files_named(ARCHITECTURE.read_text())
    assert len(named) > 100
    assert sorted(path for path in named if not (REPO_ROOT / path.rstrip(".")).exists()) == []
