"""Strict parsers for settings read from the environment.

A junk value is an error that names the variable, never a silent default: a deployment with
`DEBUG=flase` must not start with debugging on or off by accident.
"""

import ipaddress
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

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
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum of {minimum}")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if number != number or (minimum is not None and number < minimum):  # NaN compares unequal to itself
        raise ImproperlyConfigured(f"{name}={value!r} must be a number of at least {minimum}")
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
