"""Worked examples in a judge prompt: items whose human verdict shows how a check is read (CriteriaExample).

The judge layer knows no models: a criteria version's examples reach it as `PromptExample`s, in the order the
version gives them (position, then id). They are rendered once, without the nonce, into the EXAMPLES block of the
stable prefix; every piece a person or an agent wrote (quoted messages, a draft, the note, the explanation, even
the item's external id) goes in through `untrusted.data_text`, so no example can write a line the prompt would
read as its own structure. The rendering is also what the criteria fingerprint hashes, so the fingerprint changes
exactly when what the judge reads of the examples does.
"""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from grading.core.untrusted import data_text


@dataclass(frozen=True)
class QuotedMessage:
    """One message of a conversation example, as the person decided it: its content and tool calls as text."""

    id: str
    role: str
    content: str
    tool_calls: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromptExample:
    """One worked example as the judge reads it. `messages` for a conversation, `title` and `body` for a draft."""

    external_id: str
    check: str  # a conversation check, or pass_fail for a draft
    human_verdict: str
    note: str
    explanation: str
    messages: tuple[QuotedMessage, ...] = ()
    title: str = ""
    body: str = ""


def examples_text(examples: Sequence[PromptExample]) -> str:
    """The inside of the EXAMPLES block: each example in the order given, separated by a blank line."""
    return "\n\n".join(_example_text(number, example) for number, example in enumerate(examples, start=1))


def _example_text(number: int, example: PromptExample) -> str:
    lines = [
        f"EXAMPLE {number}: check {_quote(example.check)}; the people's verdict: {_quote(example.human_verdict)}",
        data_text(f"item {_quote(example.external_id)}"),
    ]
    if example.messages:
        lines.append("the conversation as the person read it:")
        lines.extend(_message_text(message) for message in example.messages)
    else:
        lines.append("the draft as the person read it:")
        lines.append(data_text(f"# {example.title}\n\n{example.body}"))
    if example.note:
        lines += ["the person's note:", data_text(example.note)]
    if example.explanation:
        lines += ["how the criteria admin reads it:", data_text(example.explanation)]
    return "\n".join(lines)


def _message_text(message: QuotedMessage) -> str:
    # No nonce and no "[message" header: an example's messages must never read as the evidence being judged (their
    # ids could be the same as the path's), only as quoted text.
    header = f"quoted message id={_quote(message.id)} role={_quote(message.role)}:"
    body = "\n".join(part for part in (message.content, *message.tool_calls) if part)
    return header + ("\n" + data_text(body) if body else "")


def _quote(value: str) -> str:
    # ASCII JSON: no character of an id or a role can break its line.
    return json.dumps(value, ensure_ascii=True)


def criteria_fingerprint(*, rubric: str, rules: dict, examples: Sequence[PromptExample]) -> str:
    """`cf1:` + SHA-256 of what the judge reads of a criteria version: the rubric, the rules document and the
    examples as rendered, in prompt order. The version's number is left out: two versions that read the same
    fingerprint the same."""
    canonical = json.dumps(
        {"rubric": rubric, "rules": rules, "examples": examples_text(examples)},
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return "cf1:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
