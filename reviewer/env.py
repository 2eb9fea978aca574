"""Strict parsers for settings read from the environment.

A junk value is an error that names the variable, never a silent default: a deployment with
`DEBUG=flase` must not start with debugging on or off by accident.
"""

import ipaddress
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

N = TypeVar("N", int, float)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    """A string setting; `NAME_FILE` (a path to a file holding the value) is read when `NAME` is unset."""
    value = os.environ.get(name)
    if value is not None:
        return value
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_path!r} cannot be read: {exc.strerror}") from exc
    return default


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean: use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    return _env_number(name, default, float, "a number", minimum)


def _env_number(name: str, default: N, parse: Callable[[str], N], kind: str, minimum: N | None) -> N:
    """A number setting (`default` when unset or blank), refused unless `parse` reads it and it is at least
    `minimum`."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = parse(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not {kind}") from None
    if number != number or (minimum is not None and number < minimum):  # NaN compares unequal to itself
        raise ImproperlyConfigured(f"{name}={value!r} must be {kind} of at least {minimum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks around items are ignored, empty items are an error."""
    value = os.environ.get(name)
    if value is None:
        return default
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(f"{name}={value!r} has an empty item in its comma-separated list")
    return items


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    if value.strip() not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of: {', '.join(choices)}")
    return value.strip()


def env_networks(name: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """A comma-separated list of CIDR networks (`10.1.0.0/16, fd00::/8`; a bare address is one host).
    Host bits set under the prefix (`10.1.2.3/16`) are an error: the intent is ambiguous."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(item, strict=True))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network in CIDR form ({exc})") from None
    return tuple(networks)


def env_url(name: str, default: str = "") -> str:
    """An http(s) URL with a host, or empty; anything else is an error naming the variable."""
    from urllib.parse import urlsplit

    value = (env_str(name, default) or "").strip()
    if not value:
        return ""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(f"{name}={value!r} is not an http:// or https:// URL with a host")
    return value


def env_headers(name: str) -> dict[str, str]:
    """Headers in the OpenTelemetry form `key1=value1,key2=value2`, values percent-encoded (W3C baggage
    syntax, as OTEL_EXPORTER_OTLP_HEADERS). Read from `NAME_FILE` too, since they usually hold a secret."""
    from urllib.parse import unquote

    value = env_str(name, "") or ""
    headers: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        key, equals, header_value = item.partition("=")
        key = unquote(key).strip()
        if not equals or not key or not all(33 <= ord(c) < 127 and c not in '()<>@,;:\\"/[]?={}' for c in key):
            raise ImproperlyConfigured(f"{name} has an item that is not key=value with a header name: {item.strip()!r}")
        header_value = unquote(header_value).strip()
        if any(c in header_value for c in "\r\n\x00"):
            raise ImproperlyConfigured(f"{name}: the value of {key!r} holds a line break or NUL")
        headers[key] = header_value
    return headers


def env_price(name: str) -> float | None:
    """A price per million tokens: a number of at least 0, or None when unset (no price known)."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return env_float(name, 0.0, minimum=0.0)


def env_currency(name: str, default: str) -> str:
    """A currency's ISO 4217 code, three letters (`USD`, `eur`: read upper-cased); anything else is an error."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    code = value.strip().upper()
    if not re.fullmatch(r"[A-Z]{3}", code):
        raise ImproperlyConfigured(f"{name}={value!r} is not a currency's three-letter code, like USD or EUR")
    return code


_SLUG = re.compile(r"[-a-zA-Z0-9_]+")


def env_group_roles(name: str) -> tuple[tuple[str, str, str], ...]:
    """A rule from a provider's groups to org memberships: `GROUP=ORG:ROLE` items, comma-separated, e.g.
    `tollgate-admins=acme:org_admin,tollgate-ops=acme:operator` (ORG an org's slug, ROLE a role's name, checked
    against the roles when the app starts). A group may hold several roles (one item each); a group name may hold
    `=` (the last one splits), not a comma. As (group, org slug, role) triples."""
    rules = []
    for item in env_list(name, []):
        group, equals, grant = item.rpartition("=")
        org, colon, role = grant.partition(":")
        if not equals or not group.strip() or not colon or not _SLUG.fullmatch(org) or not _SLUG.fullmatch(role):
            raise ImproperlyConfigured(f"{name}: {item!r} is not GROUP=ORG:ROLE (e.g. tollgate-ops=acme:operator)")
        rules.append((group.strip(), org, role))
    return tuple(rules)


def env_subset(name: str, default: list[str], choices: tuple[str, ...]) -> list[str]:
    """A comma-separated list of some of `choices`; any other item is an error naming it."""
    items = env_list(name, default)
    unknown = [item for item in items if item not in choices]
    if unknown:
        raise ImproperlyConfigured(f"{name}: {unknown[0]!r} is not one of: {', '.join(choices)}")
    return items


JUDGE_NAME = re.compile(r"[a-z0-9_-]{1,40}")
# The keys a judge in JUDGES_FILE may have; any other is a mistake (a typo would otherwise be a silent default).
_JUDGE_FILE_KEYS = (
    "base_url",
    "model",
    "key_file",
    "timeout_seconds",
    "max_retries",
    "context_tokens",
    "max_output_tokens",
    "price_input_per_million",
    "price_output_per_million",
)


def env_judges(name: str, *, default: dict) -> dict[str, dict]:
    """Every configured judge by name: `default` (the JUDGE_* one) and those of the JSON file `name` names, e.g.
    {"cheap": {"base_url": "https://...", "model": "...", "key_file": "/run/secrets/cheap", "context_tokens": 8192,
    "price_input_per_million": 0.15, "price_output_per_million": 0.6}}. A judge there needs base_url and model; its
    key is read from key_file (never written in the file); timeout_seconds, max_retries and max_output_tokens default
    to the default judge's, context_tokens to 0 (ask the server), the prices to none. Anything wrong stops startup
    with one message naming the file, the judge and the problem."""
    judges = {"default": default}
    path = env_str(name, "") or ""
    if not path.strip():
        return judges
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ImproperlyConfigured(f"{name}={path!r} cannot be read: {exc.strerror}") from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={path!r} is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ImproperlyConfigured(f"{name}={path!r} must hold a JSON object of judges by name")
    for judge_name, entry in document.items():
        where = f"{name}={path!r}: judge {judge_name!r}"
        if judge_name == "default":
            raise ImproperlyConfigured(f"{where}: `default` is the JUDGE_* judge; give this one another name")
        if not JUDGE_NAME.fullmatch(judge_name):
            raise ImproperlyConfigured(f"{where}: a name is 1 to 40 of a-z, 0-9, _ and -")
        judges[judge_name] = _judge_entry(where, entry, default)
    return judges


def _judge_entry(where: str, entry: object, default: dict) -> dict:
    if not isinstance(entry, dict):
        raise ImproperlyConfigured(f"{where} must be a JSON object")
    unknown = sorted(set(entry) - set(_JUDGE_FILE_KEYS))
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(_JUDGE_FILE_KEYS)})")
    for required in ("base_url", "model"):
        if not isinstance(entry.get(required), str) or not entry[required].strip():
            raise ImproperlyConfigured(f"{where}: {required} is required, as a non-empty string")
    parts = urlsplit(entry["base_url"].strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(f"{where}: base_url {entry['base_url']!r} is not an http:// or https:// URL")
    api_key = ""
    if "key_file" in entry:
        if not isinstance(entry["key_file"], str) or not entry["key_file"]:
            raise ImproperlyConfigured(f"{where}: key_file must be a path")
        try:
            api_key = Path(entry["key_file"]).read_text().strip()
        except OSError as exc:  # the message names the path, never what is in it
            problem = f"key_file {entry['key_file']!r} cannot be read: {exc.strerror}"
            raise ImproperlyConfigured(f"{where}: {problem}") from exc
    return {
        "base_url": entry["base_url"].strip(),
        "model": entry["model"].strip(),
        "api_key": api_key,
        "timeout_seconds": _number(where, entry, "timeout_seconds", default["timeout_seconds"], minimum=0.1),
        "max_retries": _number(where, entry, "max_retries", default["max_retries"], minimum=0, whole=True),
        "context_tokens": _number(where, entry, "context_tokens", 0, minimum=0, whole=True),
        "max_output_tokens": _number(
            where, entry, "max_output_tokens", default["max_output_tokens"], minimum=64, whole=True
        ),
        "price_input_per_million": _number(where, entry, "price_input_per_million", None, minimum=0),
        "price_output_per_million": _number(where, entry, "price_output_per_million", None, minimum=0),
    }


def _number(where: str, entry: dict, key: str, default, *, minimum: float, whole: bool = False):
    """entry[key] as a number of at least `minimum` (a whole one if `whole`), or `default` when left out or null."""
    value = entry.get(key)
    if value is None:
        return default
    # JSON's true and false are ints to Python; 1.0 is not an integer setting.
    if isinstance(value, bool) or not isinstance(value, int | float) or (whole and not isinstance(value, int)):
        raise ImproperlyConfigured(f"{where}: {key} must be {'an integer' if whole else 'a number'}, not {value!r}")
    if value != value or value < minimum or value == float("inf"):
        raise ImproperlyConfigured(f"{where}: {key} must be at least {minimum:g}, not {value!r}")
    return value if whole else float(value)
