"""A criteria version's routing rules: beyond the machine's doubt, which items go to people whatever it decided. Pure
Python: the version's edit validates them here and the record (`review_record`) matches them against the item it
files. Each rule kind has its code, which the routed review keeps (`Review.sent`), so it says which rule sent it.

A sample rule picks a share of a slice by the fixed hash rule the audit sample uses (`sample_rank`): an item is in a
p% sample when its rank falls in the lowest p% of the hash space, so a lower rate picks a strict subset of a higher
one and nothing about the item but its id decides (the sampled figures stay unbiased).

Judge sampling is the same rule turned on spend: a version may have its judge grade only a share of a slice
(`judge_sample_validate`). It ranks items with the same salt, so a routing sample of 10% of a slice falls inside a
judge sample of 20% of it: every item the sample sends to people was judged."""

import hashlib
from collections.abc import Mapping

THUMBS_DOWN = "thumbs_down"  # a user's thumbs is down on a message of the graded path (Feedback)
METADATA = "metadata"  # the item's metadata holds every name = value the rule gives
SAMPLE = "sample"  # the item is in the rule's share of its slice (the metadata it gives; none: every item)
KINDS = (THUMBS_DOWN, METADATA, SAMPLE)
MAX_RULES = 20
MAX_MATCH = 8  # names one metadata rule may require
MAX_TEXT = 100  # characters of a name or a value, as metadata allows
_HASH_SPACE = 16**64  # sha256 hex digests


class RoutingInvalid(Exception):
    """The rules refused: `errors` maps each wrong field (`routing.2.match`) to what is wrong. Nothing was written."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{field}: {' '.join(said)}" for field, said in errors.items()))
        self.errors = errors


def sample_rank(salt: str, external_id: str) -> str:
    """The fixed hash rule: sha256(salt + external id), as hex. Compared as text it orders items as the number does
    (every digest has 64 digits), which is how the audit sample takes the smallest ones."""
    return hashlib.sha256((salt + external_id).encode()).hexdigest()


def in_sample(salt: str, external_id: str, *, percent: float) -> bool:
    """Whether the item is in a `percent`% sample: its rank in the lowest `percent`% of the hash space."""
    return int(sample_rank(salt, external_id), 16) < _HASH_SPACE * percent / 100


def routing_salt(org_id: int) -> str:
    """The salt of an org's sample rules: the same for all its versions, so a slice's sample stays the same items."""
    return f"routing-sample:{org_id}:"


def routing_validate(document: object, *, drafts: bool) -> list[dict]:
    """The rules in their stored form (`{"when": "thumbs_down"}`, `{"when": "metadata", "match": {"tier":
    "enterprise"}}`, `{"when": "sample", "percent": 10, "match": {"release": "2.4"}}`), in order; RoutingInvalid
    naming every wrong field at once. A draft version's rules match metadata: drafts carry no user's thumbs."""
    if not isinstance(document, list):
        raise RoutingInvalid({"routing": ['A list of rules, each {"when": ...}.']})
    if len(document) > MAX_RULES:
        raise RoutingInvalid({"routing": [f"At most {MAX_RULES} rules."]})
    errors: dict[str, list[str]] = {}
    rules = []
    for n, rule in enumerate(document):
        field = f"routing.{n}"
        if not isinstance(rule, Mapping) or rule.get("when") not in KINDS:
            errors[f"{field}.when"] = [f"One of {', '.join(KINDS)}."]
            continue
        if rule["when"] == THUMBS_DOWN:
            if drafts:
                errors[f"{field}.when"] = ["Drafts carry no user's thumbs: a draft version's rules match metadata."]
            elif set(rule) != {"when"}:
                errors[field] = ["A thumbs-down rule takes nothing but `when`."]
            rules.append({"when": THUMBS_DOWN})
            continue
        if rule["when"] == SAMPLE:
            percent = rule.get("percent")
            if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 < percent <= 100:
                errors[f"{field}.percent"] = ["The share of the slice sent to people: above 0, at most 100 (%)."]
                continue
            if not set(rule) <= {"when", "percent", "match"}:
                errors[field] = ["A sample rule takes `percent` and, for a slice, `match`."]
                continue
            match = rule.get("match", {})
            if not _match_valid(match, at_least=0):
                errors[f"{field}.match"] = [_MATCH_RULE]
                continue
            rules.append({"when": SAMPLE, "percent": percent, "match": dict(sorted(match.items()))})
            continue
        match = rule.get("match")
        if set(rule) != {"when", "match"} or not _match_valid(match, at_least=1):
            errors[f"{field}.match"] = [_MATCH_RULE]
            continue
        rules.append({"when": METADATA, "match": dict(sorted(match.items()))})
    if errors:
        raise RoutingInvalid(errors)
    return rules


_MATCH_RULE = (
    f"Up to {MAX_MATCH} names, each with the value it must have: non-empty text of {MAX_TEXT} characters at most."
)


def _match_valid(match: object, *, at_least: int) -> bool:
    return (
        isinstance(match, Mapping)
        and at_least <= len(match) <= MAX_MATCH
        and all(_text(name) and _text(value) for name, value in match.items())
    )


def _text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT and value.isprintable()


def routing_match(
    rules: list[dict], *, metadata: Mapping[str, str], thumbs_down: bool, external_id: str, salt: str
) -> str:
    """The code of the first rule the item matches, "" for none. `thumbs_down`: a user's thumbs is down on a message of
    the path the review read; `external_id` and `salt`: what a sample rule ranks the item by."""
    for rule in rules:
        if rule["when"] == THUMBS_DOWN and thumbs_down:
            return THUMBS_DOWN
        in_slice = all(metadata.get(name) == value for name, value in rule.get("match", {}).items())
        if rule["when"] == METADATA and in_slice:
            return METADATA
        if rule["when"] == SAMPLE and in_slice and in_sample(salt, external_id, percent=rule["percent"]):
            return SAMPLE
    return ""


def judge_sample_validate(document: object, *, drafts: bool) -> list[dict]:
    """The judge's share per slice in its stored form (`[{"percent": 20, "match": {"release": "2.4"}}]`; an item of no
    listed slice is always graded), or RoutingInvalid naming every wrong field at once under `judge_sample`. Drafts
    refuse any: a draft is a gate that a pipeline waits on, so every draft gets its verdict."""
    if not isinstance(document, list):
        raise RoutingInvalid({"judge_sample": ['A list of shares, each {"percent": ..., "match": {...}}.']})
    if document and drafts:
        raise RoutingInvalid({"judge_sample": ["A draft is a gate a pipeline waits on: every draft is graded."]})
    if len(document) > MAX_RULES:
        raise RoutingInvalid({"judge_sample": [f"At most {MAX_RULES} shares."]})
    errors: dict[str, list[str]] = {}
    shares = []
    for n, share in enumerate(document):
        field = f"judge_sample.{n}"
        if not isinstance(share, Mapping) or not set(share) <= {"percent", "match"}:
            errors[field] = ["A share takes `percent` and, for a slice, `match`."]
            continue
        percent, match = share.get("percent"), share.get("match", {})
        if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 < percent < 100:
            errors[f"{field}.percent"] = ["The share of the slice the judge grades: above 0, below 100 (%)."]
        elif not _match_valid(match, at_least=0):
            errors[f"{field}.match"] = [_MATCH_RULE]
        else:
            shares.append({"percent": percent, "match": dict(sorted(match.items()))})
    if errors:
        raise RoutingInvalid(errors)
    return shares


def judge_sampled(shares: list[dict], *, metadata: Mapping[str, str], external_id: str, salt: str) -> bool:
    """Whether the judge grades the item: the first share whose slice holds it decides; no share: always."""
    for share in shares:
        if all(metadata.get(name) == value for name, value in share["match"].items()):
            return in_sample(salt, external_id, percent=share["percent"])
    return True


def judge_sample_text(share: dict) -> str:
    """A share in words, as the version page and the diff of two versions list it."""
    slice_words = ", ".join(f"{name} = {value}" for name, value in share["match"].items())
    return f"{share['percent']:g}% of {'metadata ' + slice_words if slice_words else 'every conversation'}"


def routing_text(rule: dict) -> str:
    """A rule in words, as the diff of two versions lists it."""
    if rule["when"] == THUMBS_DOWN:
        return "a user's thumbs down on the conversation"
    slice_words = ", ".join(f"{name} = {value}" for name, value in rule["match"].items())
    if rule["when"] == SAMPLE:
        return f"a {rule['percent']:g}% sample of {'metadata ' + slice_words if slice_words else 'every item'}"
    return "metadata " + slice_words
