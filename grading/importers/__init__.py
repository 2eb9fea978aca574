"""Conversation importers: export files (OpenAI messages, ChatGPT, Open WebUI) to canonical conversation payloads.

Pure Python, no Django: `parse_file(fmt, path_or_text)` returns one `ParsedConversation` or `ParseFailure` per
conversation in the file and raises `ImportFormatError` only when the file as a whole cannot be read.

This module is the registry: the format modules import `base`, and only this module imports the formats.
"""

import os
from collections.abc import Callable

from grading.importers import chatgpt, openai_format, openwebui
from grading.importers.base import (
    FORMATS,
    Format,
    ImportFormatError,
    ParsedConversation,
    ParseFailure,
    ParseResult,
    read_text,
)

PARSERS: dict[str, Callable[[str], list[ParseResult]]] = {
    "openai": openai_format.parse,
    "chatgpt": chatgpt.parse,
    "openwebui": openwebui.parse,
}


def parse_file(fmt: Format, source: str | os.PathLike[str]) -> list[ParseResult]:
    """Parse an export file in format `fmt`. A `str` is the file's text; a path is read as UTF-8."""
    if fmt not in PARSERS:
        raise ImportFormatError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    text = read_text(source) if isinstance(source, os.PathLike) else source
    return PARSERS[fmt](text)


__all__ = [
    "FORMATS",
    "Format",
    "ImportFormatError",
    "ParseFailure",
    "ParseResult",
    "ParsedConversation",
    "parse_file",
]
