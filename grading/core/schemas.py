"""Payloads the pipelines send (the API) and the importers produce: one shape, validated once."""

import math
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    UrlConstraints,
    ValidationError,
    field_validator,
)

from grading.core.outbound import url_refusal


def identifier_checked(value: str) -> str:
    """An id or a name as every route takes one, in a body, a path or a query (ValueError saying why not).

    PostgreSQL refuses NUL and lone surrogates even in a WHERE clause, so a lookup by such a name fails rather than
    finds nothing. And an id is matched and shown, never read as text: a control character in one is a broken
    record or a trick on whoever reads a log or a page, and a line break in one splits a log line in two."""
    refuse_unstorable(value)
    for char in value:
        if unicodedata.category(char) == "Cc":
            raise ValueError(f"contains the control character U+{ord(char):04X}")
    return value


def _addressable(value: str) -> str:
    # A conversation is read and appended at /conversations/{external_id}. A "/" (even written %2F, which
    # servers decode before routing) ends the segment, and "." or ".." are removed by every HTTP client, so
    # such an id could be stored but never reached again.
    if "/" in value:
        raise ValueError('may not contain "/": it could never be read or appended at /conversations/{external_id}')
    if value in (".", ".."):
        raise ValueError(f'may not be "{value}": HTTP clients remove it from a URL')
    return value


# Every name a client sends for matching rather than reading (an id, an application, a tool call, a labeller, a
# person or a pool) is an Identifier; names read from a query string go through `identifier_checked` the same way.
Identifier = Annotated[str, AfterValidator(identifier_checked)]
ExternalId = Annotated[Identifier, Field(min_length=1, max_length=200)]
# A conversation's id is also a segment of its URL.
ConversationId = Annotated[ExternalId, AfterValidator(_addressable)]
Url = Annotated[HttpUrl, UrlConstraints(max_length=1000)]
# The pipeline's id of the person an item is about (OpenTelemetry's `enduser.id`): what an erasure by end user finds.
# Omitted: the item keeps the one it has.
EndUser = Annotated[Identifier, Field(max_length=200)]


# What produced an item (a release, a prompt version, a model, an environment, a customer tier): a small map of names
# to values, kept with the item and shown, never part of its evidence (a change re-grades nothing). Keys are names a
# person filters by; values are matched, never read as text, so both are identifiers. Omitted: the item keeps its map;
# given: it replaces the map whole.
METADATA_KEYS_MAX = 20
METADATA_NAME = r"^[A-Za-z][A-Za-z0-9_.-]*$"
METADATA_VALUE_MAX = 200
MetadataKey = Annotated[str, Field(min_length=1, max_length=64, pattern=METADATA_NAME)]
MetadataValue = Annotated[Identifier, Field(min_length=1, max_length=METADATA_VALUE_MAX)]
# The metadata names an org's figures are sliced by (`Org.dimensions`): a few, as each multiplies the counters a
# review books (grading/reviews/rollups.py).
DIMENSIONS_MAX = 3
Metadata = Annotated[dict[MetadataKey, MetadataValue], Field(max_length=METADATA_KEYS_MAX)]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must hold more than white space")
    return value


# A title is shown and linked to: one of white space alone would be an empty link.
Title = Annotated[str, Field(min_length=1, max_length=300), AfterValidator(_not_blank)]


# --- times from outside --------------------------------------------------------------------------------------
# Python reads only the years 1 to 9999, PostgreSQL stores times far outside them: a row holding such a time (as
# 9999-12-31T23:59:59-14:00 is in the year 10000 in UTC) is stored, and then no read of it succeeds again, so every
# page listing it fails. So every time a client gives is checked here, at the edge, before anything compares,
# shifts or stores it.


def storable_time(value: datetime) -> datetime:
    """`value` in UTC (a time without a zone read as UTC); ValueError unless it falls within the years 1 to 9999
    in UTC, where both Python and PostgreSQL can hold it."""
    try:
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the years 1 to 9999 once converted to UTC") from None


def _zoned(value: datetime) -> datetime:
    if value.utcoffset() is None:
        raise ValueError("give a time zone (e.g. 2026-11-30T09:00:00Z)")
    return value


# A time a client says (when an assignment ends, when a label was made): it means nothing without its zone, so one
# without is refused, not read as UTC. The type of every time an API body takes, but a message's own.
ZonedTime = Annotated[datetime, AfterValidator(_zoned), AfterValidator(storable_time)]
# A message's time as pipelines and importers stamp it: one without a zone is UTC, as the exports they import write.
StorableTime = Annotated[datetime, AfterValidator(storable_time)]


def refuse_unstorable(value: Any, path: str = "") -> None:
    """PostgreSQL stores neither NUL characters, lone surrogates nor non-finite numbers (JSON has none: NaN,
    Infinity and numbers too large for a double such as 1e400 are not data); refuse them up front, by location."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"holds {value}, which is not a JSON number{path}")
    elif isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"contains a NUL character{path}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"is not valid Unicode (lone surrogate){path}") from None
    elif isinstance(value, list):
        for index, item in enumerate(value):
            refuse_unstorable(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_unstorable(key, path)
            refuse_unstorable(item, f"{path}.{key}")


def _storable(value: Any) -> Any:
    refuse_unstorable(value)
    return value


# Text and JSON that a payload carries into the database (`refuse_unstorable`).
Storable = AfterValidator(_storable)


class MessageIn(BaseModel):
    # Unknown fields are refused: a misspelt `parentId` silently ignored would rewire the tree.
    model_config = ConfigDict(extra="forbid")

    id: ExternalId
    parent_id: ExternalId | None = None
    role: Literal["system", "user", "assistant", "tool"]
    content: Annotated[str | list[dict[str, Any]] | None, Storable] = None
    tool_calls: Annotated[list[dict[str, Any]] | None, Storable] = None
    tool_call_id: Annotated[Identifier, Field(max_length=200)] | None = None
    name: Annotated[Identifier, Field(max_length=200)] | None = None
    created_at: StorableTime | None = None
    hidden: bool = False
    truncated: bool = False


class ConversationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    external_id: ConversationId
    application: Annotated[Identifier, Field(min_length=1, max_length=100)]
    closed: bool = False
    active_message_id: ExternalId | None = None
    messages: list[MessageIn] = Field(default_factory=list)
    end_user: EndUser | None = None
    metadata: Metadata | None = None


class MessagesIn(BaseModel):
    """An append: new messages (or edits of existing ids) for a conversation that exists."""

    model_config = ConfigDict(extra="forbid")

    messages: list[MessageIn] = Field(min_length=1)
    active_message_id: ExternalId | None = None
    closed: bool | None = None
    end_user: EndUser | None = None
    metadata: Metadata | None = None


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation: ConversationId
    message_id: ExternalId
    value: Literal["up", "down"]


class DraftIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    external_id: ExternalId
    title: Annotated[Title, Storable]
    slug: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$")]
    body: Annotated[str, Field(min_length=1), Storable]
    source_urls: list[Url] = Field(default_factory=list, max_length=50)
    callback_url: Url | None = None
    run_id: Annotated[Identifier, Field(max_length=200)] | None = None
    end_user: EndUser | None = None
    metadata: Metadata | None = None

    @field_validator("source_urls", "callback_url")
    @classmethod
    def fits_as_normalised(cls, value: Any) -> Any:
        # The column holds 1000 characters, and normalising (IDNA, percent-encoding) can lengthen a URL.
        for url in value if isinstance(value, list) else [value]:
            if url is not None and len(str(url)) > 1000:
                raise ValueError("a URL may be at most 1000 characters once normalised")
        return value

    @field_validator("callback_url")
    @classmethod
    def reachable_callback(cls, value: HttpUrl | None) -> HttpUrl | None:
        # What can be known now is refused now (credentials, a literal internal address); a host name is
        # checked when each webhook is sent, because what it resolves to can change.
        if value is not None:
            refusal = url_refusal(str(value))
            if refusal:
                raise ValueError(f"webhooks cannot be sent to this URL: {refusal}")
        return value


class MemoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["learning", "strategy", "fact"]
    text: Annotated[str, Field(min_length=1, max_length=5000), Storable]
    proof_terms: Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Storable] = Field(
        default_factory=list, max_length=50
    )


class ArticleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slug: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$")]
    title: Annotated[Title, Storable]
    summary: Annotated[str, Field(max_length=5000), Storable] = ""


def editor_reason(error: dict) -> str:
    """One of Pydantic's errors in words an editor can act on, for the reasons every edited document shares; a
    document's own reasons are matched by its caller before this."""
    context = error.get("ctx") or {}
    match error["type"]:
        case "value_error":
            return str(context.get("error", error["msg"]))
        case "missing":
            return "is required"
        case "string_too_short":
            return "may not be empty"
        case "literal_error":
            return f"must be one of {context['expected']}"
        case "int_parsing" | "int_from_float" | "int_type":
            return "must be a whole number"
    return str(error["msg"])


def describe_errors(exc: ValidationError) -> str:
    """A validation failure as one line naming each field, for command-line output."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
