"""Conversation importers: export files (OpenAI messages, ChatGPT, Open WebUI) to canonical conversation payloads.

Pure Python, no Django: `parse_file(fmt, path_or_text)` returns one `ParsedConversation` or `ParseFailure` per
conversation in the file and raises `ImportFormatError` only when the file as a whole cannot be read.
"""

from grading.importers.base import (
    FORMATS,
    Format,
    ImportFormatError,
    ParsedConversation,
    ParseFailure,
    ParseResult,
    parse_file,
)

__all__ = [
    "FORMATS",
    "Format",
    "ImportFormatError",
    "ParseFailure",
    "ParseResult",
    "ParsedConversation",
    "parse_file",
]
