"""`manage.py memory add|list|import|deactivate|reembed`: an org's memory from the command line.

Import reads JSON Lines, one item a line::

    {"kind": "learning", "text": "Lead with the answer."}
    {"kind": "fact", "text": "Contoso cut churn by 12%.", "proof_terms": ["Contoso", "12%"]}
    {"kind": "article", "slug": "pricing-pages", "title": "How to write pricing pages", "summary": "..."}

Each line is stored on its own: a bad line is reported by its number and the others still go in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.judge.client import JudgeError
from grading.management.orgs import org_from_option
from grading.management.progress import Progress
from grading.models import Article, MemoryItem, Org
from grading.reviews.memory import InvalidMemory, article_upsert, memory_add, memory_deactivate, memory_reembed

ARTICLE = "article"
_PREVIEW_CHARS = 100


class _BadLine(Exception):
    """One import line that cannot be stored; the message says why."""


class Command(BaseCommand):
    help = "Add, list, import, deactivate or re-embed an org's memory (learnings, the strategy, facts, articles)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="add one learning, strategy or fact")
        add.add_argument("--org", required=True, help="org slug")
        add.add_argument("--kind", required=True, choices=MemoryItem.Kind.values)
        add.add_argument("--proof-term", action="append", default=[], dest="proof_terms", help="facts; repeatable")
        add.add_argument("text")
        listing = actions.add_parser("list", help="list memory items (or articles with --kind article)")
        listing.add_argument("--org", required=True)
        listing.add_argument("--kind", choices=[*MemoryItem.Kind.values, ARTICLE])
        listing.add_argument("--all", action="store_true", help="include inactive items")
        importing = actions.add_parser("import", help="import a JSON Lines file")
        importing.add_argument("--org", required=True)
        importing.add_argument("file", type=Path)
        deactivate = actions.add_parser("deactivate", help="retire a memory item by id")
        deactivate.add_argument("--org", required=True)
        deactivate.add_argument("id", type=int)
        reembed = actions.add_parser("reembed", help="re-embed everything after changing EMBEDDINGS_BACKEND")
        reembed.add_argument("--org", required=True)

    def handle(self, *args: Any, action: str, org: str, **options: Any) -> None:
        the_org = org_from_option(org)
        try:
            if action == "add":
                self._add(the_org, options["kind"], options["text"], options["proof_terms"])
            elif action == "list":
                self._list(the_org, options["kind"], include_inactive=options["all"])
            elif action == "import":
                self._import(the_org, options["file"])
            elif action == "deactivate":
                self._deactivate(the_org, options["id"])
            else:
                with Progress(self.stderr, what="items re-embedded", total=None) as progress:
                    done = memory_reembed(org=the_org, on_batch=progress.reached)
                self.stdout.write(f"re-embedded {done} item(s) of {the_org.slug}")
        except (InvalidMemory, ImproperlyConfigured, JudgeError) as exc:
            raise CommandError(str(exc)) from None

    def _add(self, org: Org, kind: str, text: str, proof_terms: list[str]) -> None:
        item = memory_add(org=org, kind=kind, text=text, proof_terms=proof_terms)
        self.stdout.write(f"added {item.kind} #{item.pk}")

    def _list(self, org: Org, kind: str | None, *, include_inactive: bool) -> None:
        if kind == ARTICLE:
            for article in Article.objects.filter(org=org).order_by("slug"):
                self.stdout.write(f"{article.slug}  {article.title}")
            return
        items = MemoryItem.objects.filter(org=org).defer("embedding").order_by("kind", "pk")
        if kind:
            items = items.filter(kind=kind)
        if not include_inactive:
            items = items.filter(active=True)
        for item in items:
            self.stdout.write(_describe(item))

    def _import(self, org: Org, path: Path) -> None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from None
        stored = failed = 0
        with Progress(self.stderr, what="lines", total=sum(1 for line in lines if line.strip())) as progress:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    _import_line(org, line)
                except (_BadLine, InvalidMemory, JudgeError) as exc:
                    failed += 1
                    progress.say(self.stderr, f"{path}:{number}: {exc}\n")
                else:
                    stored += 1
                progress.advance()
        self.stdout.write(f"imported {stored} line(s), {failed} failed")
        if failed:
            raise CommandError(f"{failed} line(s) of {path} were not imported", returncode=1)

    def _deactivate(self, org: Org, item_id: int) -> None:
        item = MemoryItem.objects.filter(org=org, pk=item_id).defer("embedding").first()
        if item is None:
            raise CommandError(f"no memory item #{item_id} in {org.slug}")
        memory_deactivate(item=item)
        self.stdout.write(f"deactivated {item.kind} #{item.pk}")


def _describe(item: MemoryItem) -> str:
    text = " ".join(item.text.split())
    if len(text) > _PREVIEW_CHARS:
        text = text[: _PREVIEW_CHARS - 1] + "…"
    state = "" if item.active else " (inactive)"
    proof = f"  [proof: {', '.join(item.proof_terms)}]" if item.proof_terms else ""
    return f"#{item.pk}  {item.kind}{state}  {text}{proof}"


def _import_line(org: Org, line: str) -> None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _BadLine(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict):
        raise _BadLine("expected a JSON object")
    kind = record.get("kind")
    if kind == ARTICLE:
        article_upsert(
            org=org,
            slug=_text_field(record, "slug"),
            title=_text_field(record, "title"),
            summary=_text_field(record, "summary", required=False),
        )
        return
    if kind not in MemoryItem.Kind.values:
        raise _BadLine(f"unknown kind {kind!r}: use one of {', '.join([*MemoryItem.Kind.values, ARTICLE])}")
    proof_terms = record.get("proof_terms", [])
    if not isinstance(proof_terms, list):
        raise _BadLine("proof_terms must be a list of strings")
    memory_add(
        org=org,
        kind=kind,
        text=_text_field(record, "text"),
        proof_terms=proof_terms,
        source=MemoryItem.Source.IMPORT,
    )


def _text_field(record: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = record.get(name, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise _BadLine(f"{name!r} must be a non-empty string")
    return value
