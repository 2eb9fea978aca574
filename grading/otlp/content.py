"""A message's content from its parts, one rule for every convention: a single text part is the content as a
string (as the OpenAI format and the JSON API carry it); several texts, or any other part (an image, a file), make
a list of OpenAI content parts; nothing at all is no content."""

from typing import Any


def content_of(texts: list[str], others: list[dict]) -> Any:
    if others:
        return [{"type": "text", "text": text} for text in texts] + others
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": text} for text in texts] or None
