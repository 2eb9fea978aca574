"""Untrusted text in a judge prompt: it cannot pass for the prompt's own structure.

The prompts draw their structure with two shapes of line: block markers (`<<<EVIDENCE nonce>>>`,
`<<<END MEMORY nonce>>>`) and message headers (`[message nonce id="m1" role="user"]`). Every closing marker and
every header carries the request's nonce, fresh and random for every request, so text written before the request
cannot know it: that is what tells the judge a real line from a copy. What the prompts also guarantee without the
nonce: every piece of untrusted text (a message's content and tool calls, a draft, the org's memory) goes in
through `data_text`, which puts a backslash before each of its lines that could be read as either shape. So no
text, even one that has seen the nonce, produces a line the prompt would read as its own.

A line could be read as structure when its first visible characters, in any case and under compatibility
normalisation (a full-width bracket is a bracket), are `<<<` or `[message`; blanks, control, format and combining
characters (a zero-width space, a byte-order mark) are not visible. Lines break wherever `str.splitlines`
breaks them, which includes every break a tokenizer knows (CR, U+2028, NEL, ...).
"""

import re
import secrets
import unicodedata

NONCE_BYTES = 12
NONCE_LENGTH = 2 * NONCE_BYTES
# For measuring a prompt before its nonce is drawn: all digits, the costliest nonce under evidence_text.estimate_tokens.
SIZING_NONCE = "0" * NONCE_LENGTH
ESCAPE = "\\"

_STRUCTURE = ("<<<", "[message")
_LONGEST = max(map(len, _STRUCTURE))
# Every character whose compatibility form holds "<" or "[" (Unicode 14; tests/grading/core/test_untrusted.py holds
# this equal to the rule): a line whose first visible character is none of them cannot read as structure.
OPENERS = frozenset("<[\ufe47\ufe64\uff1c\uff3b")
_ANY_OPENER = re.compile(f"[{re.escape(''.join(sorted(OPENERS)))}]")


def new_nonce() -> str:
    return secrets.token_hex(NONCE_BYTES)


def data_text(text: str) -> str:
    """`text` with a backslash before each line that could be read as a marker or a message header; the rest as is."""
    if not _ANY_OPENER.search(text):
        return text
    lines = text.splitlines(keepends=True)
    return "".join(ESCAPE + line if reads_as_structure(line) else line for line in lines)


def reads_as_structure(line: str) -> bool:
    """Whether the line's first visible characters are `<<<` or `[message`. Reads no further than it must: the
    invisible characters before the first visible one, and past that only when it is an opener, then at most
    eight visible characters."""
    seen = ""
    for char in line:
        if unicodedata.category(char)[0] in "CMZ":
            continue
        if not seen and char not in OPENERS:
            return False
        seen += unicodedata.normalize("NFKC", char).casefold()
        if len(seen) >= _LONGEST:
            break
    return seen.startswith(_STRUCTURE)
