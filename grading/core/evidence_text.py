"""Evidence as text: the one rendering of a message that the judge reads and an operator's page shows, and the
active path cut into stages that each fit a judge's context, so that nothing is ever truncated."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from grading.core.evidence import EvidenceMessage, Verdict
from grading.core.untrusted import SIZING_NONCE, data_text

MESSAGE_SEPARATOR = "\n\n"
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True)
class Stage:
    """One judge call's worth of the path: `context` (earlier user requests, repeated so the judge knows
    what was asked) then `messages` (this stage's slice). `oversized` marks a stage over the budget,
    which holds exactly one message: evidence is never cut to fit (grading records such a conversation as
    not scorable by this judge rather than send what cannot fit)."""

    index: int
    context: list[EvidenceMessage]
    messages: list[EvidenceMessage]
    oversized: bool = False
    context_omitted: int = 0  # earlier user requests not repeated in `context` (it is bounded)


def render_message(m: EvidenceMessage, *, nonce: str | None = None) -> str:
    """The text the judge reads for one message, never truncated.

    A header line with the request's `nonce` (none in a rendering for people), the id and role (and name and
    tool_call_id when present), JSON-quoted so no field breaks out of it or out of its line; then `content_text`
    of the content and `tool_call_text` of each tool call, as data (`untrusted.data_text`): a line of theirs that
    could pass for a header or a delimiter gets a backslash before it. So the only header lines in the judge's
    prompt are the path's own, one per message, whatever the messages say.
    """
    header = "[message" + (f" {nonce}" if nonce else "") + f" id={_quote(m.id)} role={_quote(m.role)}"
    if m.name is not None:
        header += f" name={_quote(m.name)}"
    if m.tool_call_id is not None:
        header += f" tool_call_id={_quote(m.tool_call_id)}"
    lines = []
    content = content_text(m.content)
    if content:
        lines.append(content)
    if isinstance(m.tool_calls, list):
        lines.extend(tool_call_text(call) for call in m.tool_calls)
    elif m.tool_calls is not None:
        lines.append(f"tool calls: {_as_json(m.tool_calls)}")
    if not lines:
        return header + "]"
    return header + "]\n" + data_text("\n".join(lines))


def content_text(content: object) -> str:
    """A message's content as words: the one rendering of content that the judge reads (inside `render_message`),
    the staging budget measures, and an operator's page shows, so a person reviewing a verdict reads what the
    judge read.

    A string is itself. A list of content parts is its parts, one per line: text parts (`text`, `input_text`,
    `output_text`) as their text, a refusal part as `[refusal] <its text>`, anything else as a `[<type>]`
    placeholder (an image the judge cannot see is named, not described). Any other value is its JSON.
    Nothing is cut. Pages may lay the words out (pretty-print a tool's JSON) but should not change them.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_render_part(part) for part in content)
    return _as_json(content)


def tool_call_text(call: object) -> str:
    """One tool call as the judge reads it: its id, function name and arguments verbatim."""
    if not isinstance(call, dict):
        return f"tool call: {_as_json(call)}"
    function = call.get("function")
    if not isinstance(function, dict):
        return f"tool call id={_quote(str(call.get('id')))}: {_as_json(call)}"
    name = function.get("name")
    arguments = function.get("arguments")
    arguments_text = arguments if isinstance(arguments, str) else _as_json(arguments)
    return f"tool call id={_quote(str(call.get('id')))} function={_quote(str(name))} arguments: {arguments_text}"


def render_messages(messages: Iterable[EvidenceMessage], *, nonce: str) -> str:
    """Messages rendered for the judge, each header marked with the request's nonce, separated by a blank line."""
    return MESSAGE_SEPARATOR.join(render_message(m, nonce=nonce) for m in messages)


_DIGITS = "0123456789"


def message_size(m: EvidenceMessage, measure: Callable[[str], int] = len) -> int:
    """The budget cost of one message: its rendering plus one separator, in `measure`'s units (characters by
    default, or a judge's tokens). The size of a list of messages is the sum, which bounds the size of
    `render_messages(...)` from above (it is measured with the costliest nonce); the prompt builder and staging
    both use it."""
    return measure(render_message(m, nonce=SIZING_NONCE) + MESSAGE_SEPARATOR)


def estimate_tokens(text: str) -> int:
    """A cautious estimate of what `text` costs in an LLM tokenizer's tokens, without the tokenizer.

    Every digit counts as one token (Qwen and Llama tokenizers split numbers into digits), every other three
    bytes of UTF-8 as one. Measured against Qwen2.5's tokenizer it overestimates English prose (4.5 bytes a
    token) and CJK text (4.1), and is close on JSON tool output with figures. A judge that finds it low (a
    context-length refusal, a usage report) scales it up for the rest of the process (backends.TokenMeter).
    """
    digits = sum(map(text.count, _DIGITS))
    return digits + -(-(len(text.encode("utf-8")) - digits) // 3)


def _quote(value: str) -> str:
    # JSON escapes the C0 line breaks; these three it leaves raw, and each would end a header's line.
    return json.dumps(value, ensure_ascii=False).translate(_LINE_BREAKS_ESCAPED)


_LINE_BREAKS_ESCAPED = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _as_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _render_part(part: object) -> str:
    if not isinstance(part, dict):
        return part if isinstance(part, str) else f"[{type(part).__name__}]"
    part_type = part.get("type")
    if part_type in TEXT_PART_TYPES and isinstance(part.get("text"), str):
        return part["text"]
    if part_type == "refusal" and isinstance(part.get("refusal"), str):
        return f"[refusal] {part['refusal']}"
    return f"[{part_type if isinstance(part_type, str) else 'unknown'}]"


# --- staging ------------------------------------------------------------------------------------------------

# The share of a stage's budget that repeated earlier requests may take; the rest carries new evidence.
CONTEXT_SHARE = 0.25


def stages(path: Sequence[EvidenceMessage], *, budget: int, measure: Callable[[str], int] = len) -> list[Stage]:
    """Split the path into judge calls that each fit `budget`, never cutting a message.

    Sizes are `message_size` in `measure`'s units (characters by default; a judge's tokens in grading).

    1. If the whole path fits, one stage with every message and no context.
    2. Otherwise walk the path in order. Each stage repeats some of the user's earlier requests as context, at
       most CONTEXT_SHARE of the budget: the first request (what the conversation is about) when it fits, then
       the latest ones before the slice, in path order. `context_omitted` counts the requests left out. Bounding
       the repeated part keeps the number of stages near (path size / budget): repeating every earlier request
       made a long chat of short turns into thousands of stages, most of them repeats.
    3. The slice takes whole messages while context + slice fits. It always takes at least one; when context and
       that one message do not fit, the context shrinks to what does; a message over the budget on its own gets a
       stage of its own with no context, marked `oversized`.

    Every path message lands in exactly one stage's `messages`, in order.
    """
    if budget < 1:
        raise ValueError("budget must be positive")
    sizes = [message_size(m, measure) for m in path]
    if sum(sizes) <= budget:
        return [Stage(0, [], list(path))] if path else []

    context_budget = int(budget * CONTEXT_SHARE)
    result: list[Stage] = []
    requests: list[int] = []  # indexes of the user messages before `start`
    start = 0
    while start < len(path):
        if sizes[start] > budget:
            result.append(Stage(len(result), [], [path[start]], oversized=True, context_omitted=len(requests)))
        else:
            chosen = _context(requests, sizes, min(context_budget, budget - sizes[start]))
            used = sum(sizes[i] for i in chosen) + sizes[start]
            end = start + 1
            while end < len(path) and used + sizes[end] <= budget:
                used += sizes[end]
                end += 1
            context = [path[i] for i in chosen]
            result.append(
                Stage(len(result), context, list(path[start:end]), context_omitted=len(requests) - len(chosen))
            )
        end = start + len(result[-1].messages)
        requests.extend(i for i in range(start, end) if path[i].role == "user")
        start = end
    return result


def _context(requests: list[int], sizes: list[int], room: int) -> list[int]:
    """The earlier requests a stage repeats within `room`: the first, when it fits, then the latest ones."""
    chosen: list[int] = []
    if requests and sizes[requests[0]] <= room:
        chosen.append(requests[0])
        room -= sizes[requests[0]]
    latest: list[int] = []
    for i in reversed(requests[1:] if chosen else requests):
        if sizes[i] > room:
            break
        latest.append(i)
        room -= sizes[i]
    return chosen + latest[::-1]


def combine_stage_verdicts(per_stage: Sequence[dict[str, str]]) -> dict[str, str]:
    """One verdict per check from every stage's verdicts: `fail` if any stage failed it,
    `pass` if every stage passed it, else `unknown` (a stage that omits a check did not pass it).

    "Fails with evidence" is the caller's job: downgrade each stage verdict whose cited message ids are
    not on the path to `unknown` before combining, so an unsupported fail cannot sink a check.
    """
    checks = sorted({check for verdicts in per_stage for check in verdicts})
    combined: dict[str, str] = {}
    for check in checks:
        verdicts = [verdicts.get(check) for verdicts in per_stage]
        if Verdict.FAIL in verdicts:
            combined[check] = Verdict.FAIL
        elif all(v == Verdict.PASS for v in verdicts):
            combined[check] = Verdict.PASS
        else:
            combined[check] = Verdict.UNKNOWN
    return combined
