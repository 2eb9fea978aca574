"""Draft files for `tollgate gate`: which files a path names, what each submits, and where a finding sits in it."""

import difflib
import hashlib
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

DRAFT_SUFFIXES = (".md", ".markdown", ".mdx", ".txt")
EXTERNAL_ID_MAX = 200
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?\n", re.DOTALL | re.MULTILINE)
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


class DraftFileError(Exception):
    """A path that names no draft, or a file that is not UTF-8 text."""


def draft_paths(paths: Iterable[str]) -> list[Path]:
    """The files named, and every draft file (markdown or text) under each folder named, in a stable order."""
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in DRAFT_SUFFIXES)
        elif path.is_file():
            found.append(path)
        else:
            raise DraftFileError(f"{name}: no such file or folder")
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class DraftFile:
    """A file as the gate submits it: the body is the file after its front matter, which starts at `body_start`."""

    path: Path
    text: str
    body_start: int
    title: str
    slug: str
    external_id: str
    source_urls: list[str] = field(default_factory=list)

    @property
    def body(self) -> str:
        return self.text[self.body_start :]

    def position(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset into the body."""
        starts = _line_starts(self.text)
        at = self.body_start + max(0, min(offset, len(self.body)))
        line = bisect_right(starts, at)
        return line, at - starts[line - 1] + 1


def draft_file(path: Path, *, id_prefix: str = "", source_urls: Iterable[str] = ()) -> DraftFile:
    """Front matter (`---` lines around `title:`, `slug:`, `external_id:`, `source_urls:`), when the file has it,
    names the draft; otherwise the title is the first `# heading` (else the file name), the slug the file name's,
    and the external id the path (under `id_prefix`), so the same file submitted again replaces its draft."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DraftFileError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise DraftFileError(f"{path}: {exc.strerror}") from exc
    meta: dict[str, object] = {}
    body_start = 0
    if match := _FRONT_MATTER.match(text):
        meta, body_start = _front_matter(match.group(1)), match.end()
    body = text[body_start:]
    heading = _HEADING.search(body)
    title = str(meta.get("title") or (heading.group(1) if heading else "") or path.stem)
    slug = str(meta.get("slug") or _slug(path.stem))
    external_id = str(meta.get("external_id") or _external_id(id_prefix + path.as_posix()))
    urls = meta.get("source_urls")
    sources = [*(urls if isinstance(urls, list) else []), *source_urls]
    return DraftFile(
        path=path,
        text=text,
        body_start=body_start,
        title=title,
        slug=slug,
        external_id=external_id,
        source_urls=list(dict.fromkeys(sources)),
    )


def spans_in_submitted(spans: list[list[int]], *, checked: str, submitted: str) -> Iterator[int]:
    """Each span's start as an offset into the submitted body. Findings of a draft the gate repaired point into the
    repaired body: an offset in text both share maps exactly, one inside a repair to where that repair starts."""
    if checked == submitted:
        yield from (span[0] for span in spans if span)
        return
    blocks = difflib.SequenceMatcher(None, submitted, checked, autojunk=False).get_opcodes()
    for span in spans:
        if not span:
            continue
        offset = span[0]
        for tag, sub_start, _sub_end, checked_start, checked_end in blocks:
            if checked_start <= offset < checked_end or (offset == checked_end == len(checked)):
                yield sub_start + (offset - checked_start if tag == "equal" else 0)
                break


def _front_matter(block: str) -> dict[str, object]:
    meta: dict[str, object] = {}
    key = None
    for line in block.splitlines():
        if item := re.match(r"^\s+-\s+(.+)$", line):
            if key is not None and isinstance(meta.get(key), list):
                meta[key].append(_unquoted(item.group(1)))  # type: ignore[union-attr]
            continue
        pair = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if not pair:
            continue
        key, value = pair.group(1), pair.group(2).strip()
        if value.startswith("[") and value.endswith("]"):
            meta[key] = [_unquoted(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            meta[key] = _unquoted(value) if value else []
    return meta


def _unquoted(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _slug(stem: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:200] or "draft"


def _external_id(name: str) -> str:
    if len(name) <= EXTERNAL_ID_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{name[: EXTERNAL_ID_MAX - 18]}~{digest}"


def _line_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in re.finditer("\n", text))]
