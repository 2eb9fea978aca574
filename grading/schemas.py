"""Payloads the pipelines send (the API) and the importers produce: one shape, validated once."""

from datetime import datetime
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

from grading.outbound import url_refusal


def _storable(value: Any) -> Any:
    _refuse_unstorable(value)
    return value


# Ids reach queries as well as rows, and PostgreSQL refuses NUL even in a WHERE clause.
ExternalId = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_storable)]
Url = Annotated[HttpUrl, UrlConstraints(max_length=1000)]


def _refuse_unstorable(value: Any, path: str = "") -> None:
    """PostgreSQL stores neither NUL characters nor lone surrogates; refuse them up front, by location."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"contains a NUL character{path}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"is not valid Unicode (lone surrogate){path}") from None
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_unstorable(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_unstorable(key, path)
            _refuse_unstorable(item, f"{path}.{key}")


class MessageIn(BaseModel):
    # Unknown fields are refused: a misspelt `parentId` silently ignored would rewire the tree.
    model_config = ConfigDict(extra="forbid")

    id: ExternalId
    parent_id: ExternalId | None = None
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = Field(default=None, max_length=200)
    name: str | None = Field(default=None, max_length=200)
    created_at: datetime | None = None
    hidden: bool = False
    truncated: bool = False

    @field_validator("id", "parent_id", "content", "tool_calls", "tool_call_id", "name")
    @classmethod
    def storable(cls, value: Any) -> Any:
        _refuse_unstorable(value)
        return value


class ConversationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    external_id: ExternalId
    application: Annotated[str, Field(min_length=1, max_length=100)]
    closed: bool = False
    active_message_id: ExternalId | None = None
    messages: list[MessageIn] = Field(default_factory=list)

    @field_validator("external_id", "application", "active_message_id")
    @classmethod
    def storable(cls, value: Any) -> Any:
        _refuse_unstorable(value)
        return value


class MessagesIn(BaseModel):
    """An append: new messages (or edits of existing ids) for a conversation that exists."""

    model_config = ConfigDict(extra="forbid")

    messages: list[MessageIn] = Field(min_length=1)
    active_message_id: ExternalId | None = None
    closed: bool | None = None


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation: ExternalId
    message_id: ExternalId
    value: Literal["up", "down"]


class DraftIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    external_id: ExternalId
    title: Annotated[str, Field(min_length=1, max_length=300)]
    slug: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$")]
    body: Annotated[str, Field(min_length=1)]
    source_urls: list[Url] = Field(default_factory=list, max_length=50)
    callback_url: Url | None = None
    run_id: Annotated[str, Field(max_length=200)] | None = None

    @field_validator("external_id", "title", "body", "run_id")
    @classmethod
    def storable(cls, value: Any) -> Any:
        _refuse_unstorable(value)
        return value

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
    text: Annotated[str, Field(min_length=1, max_length=5000)]
    proof_terms: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(default_factory=list, max_length=50)

    @field_validator("text", "proof_terms")
    @classmethod
    def storable(cls, value: Any) -> Any:
        _refuse_unstorable(value)
        return value


class ArticleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slug: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$")]
    title: Annotated[str, Field(min_length=1, max_length=300)]
    summary: Annotated[str, Field(max_length=5000)] = ""

    @field_validator("title", "summary")
    @classmethod
    def storable(cls, value: Any) -> Any:
        _refuse_unstorable(value)
        return value


def describe_errors(exc: ValidationError) -> str:
    """A validation failure as one line naming each field, for command-line output."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
