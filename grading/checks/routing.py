"""A criteria version's routing rules: beyond the machine's doubt, which items go to people whatever it decided. Pure
Python: the version's edit validates them here and the record (`review_record`) matches them against the item it
files. Each rule kind has its code, which the routed review keeps (`Review.sent`), so it says which rule sent it."""

from collections.abc import Mapping

THUMBS_DOWN = "thumbs_down"  # a user's thumbs is down on a message of the graded path (Feedback)
METADATA = "metadata"  # the item's metadata holds every name = value the rule gives
KINDS = (THUMBS_DOWN, METADATA)
MAX_RULES = 20
MAX_MATCH = 8  # names one metadata rule may require
MAX_TEXT = 100  # characters of a name or a value, as metadata allows


class RoutingInvalid(Exception):
    """The rules refused: `errors` maps each wrong field (`routing.2.match`) to what is wrong. Nothing was written."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{field}: {' '.join(said)}" for field, said in errors.items()))
        self.errors = errors


def routing_validate(document: object, *, drafts: bool) -> list[dict]:
    """The rules in their stored form (`{"when": "thumbs_down"}`, `{"when": "metadata", "match": {"tier":
    "enterprise"}}`), in order; RoutingInvalid naming every wrong field at once. A draft version's rules are metadata
    rules: drafts carry no user's thumbs."""
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
        match = rule.get("match")
        if set(rule) != {"when", "match"} or not isinstance(match, Mapping) or not 1 <= len(match) <= MAX_MATCH:
            errors[f"{field}.match"] = [f"From 1 to {MAX_MATCH} names, each with the value it must have."]
            continue
        if not all(_text(name) and _text(value) for name, value in match.items()):
            errors[f"{field}.match"] = [f"Names and values are non-empty text of at most {MAX_TEXT} characters."]
            continue
        rules.append({"when": METADATA, "match": dict(sorted(match.items()))})
    if errors:
        raise RoutingInvalid(errors)
    return rules


def _text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT and value.isprintable()


def routing_match(rules: list[dict], *, metadata: Mapping[str, str], thumbs_down: bool) -> str:
    """The code of the first rule the item matches, "" for none. `thumbs_down`: a user's thumbs is down on a message of
    the path the review read."""
    for rule in rules:
        if rule["when"] == THUMBS_DOWN and thumbs_down:
            return THUMBS_DOWN
        if rule["when"] == METADATA and all(metadata.get(name) == value for name, value in rule["match"].items()):
            return METADATA
    return ""


def routing_text(rule: dict) -> str:
    """A rule in words, as the diff of two versions lists it."""
    if rule["when"] == THUMBS_DOWN:
        return "a user's thumbs down on the conversation"
    return "metadata " + ", ".join(f"{name} = {value}" for name, value in rule["match"].items())
