"""Where the client finds Tollgate and its token: arguments first, then the environment, then the config file.

    TOLLGATE_URL, TOLLGATE_TOKEN      the server's base URL and an API token
    TOLLGATE_PROFILE                  the config file's profile (default: "default")
    TOLLGATE_CONFIG                   the config file (default: $XDG_CONFIG_HOME/tollgate/config.toml,
                                      ~/.config/tollgate/config.toml without XDG_CONFIG_HOME)

The config file holds one table per profile:

    [default]
    url = "https://tollgate.example.com"
    token = "tg_..."

    [staging]
    url = "https://tollgate.staging.example.com"
    token_file = "~/.secrets/tollgate-staging"   # or the token itself, as `token`
"""

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tollgate_client.errors import ConfigurationError

API_PREFIX = "/api/v1"


@dataclass(frozen=True)
class Settings:
    base_url: str  # the server's root, without /api/v1
    token: str


def config_path(environ: Mapping[str, str] = os.environ) -> Path:
    if explicit := environ.get("TOLLGATE_CONFIG"):
        return Path(explicit).expanduser()
    root = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(root) / "tollgate" / "config.toml"


def resolve(
    *,
    base_url: str | None = None,
    token: str | None = None,
    profile: str | None = None,
    config: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Settings:
    """The base URL and token, each from the first place that has it: the argument, the environment, the profile of
    the config file. A profile named (argument or TOLLGATE_PROFILE) must exist; the default one may be absent."""
    profile_name = profile or environ.get("TOLLGATE_PROFILE")
    path = Path(config).expanduser() if config else config_path(environ)
    table = _profile(path, profile_name or "default", required=bool(profile_name) or config is not None)
    url = base_url or environ.get("TOLLGATE_URL") or table.get("url")
    secret = token or environ.get("TOLLGATE_TOKEN") or _token_of(table, path)
    if not url:
        raise ConfigurationError(f"no Tollgate URL: pass it, set TOLLGATE_URL or put `url` in {path}")
    if not secret:
        raise ConfigurationError(f"no Tollgate token: pass it, set TOLLGATE_TOKEN or put `token` in {path}")
    return Settings(base_url=root_url(str(url)), token=str(secret).strip())


def root_url(url: str) -> str:
    """`https://host/`, `https://host/api/v1` and `https://host` are the same server."""
    url = url.rstrip("/")
    return url.removesuffix(API_PREFIX)


def _profile(path: Path, name: str, *, required: bool) -> Mapping[str, object]:
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if required:
            raise ConfigurationError(f"no config file {path} (profile {name!r} was asked for)") from None
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"{path}: {exc}") from exc
    table = document.get(name)
    if table is None and required:
        known = ", ".join(sorted(k for k, v in document.items() if isinstance(v, dict))) or "none"
        raise ConfigurationError(f"{path} has no profile {name!r} (it has: {known})")
    if table is not None and not isinstance(table, dict):
        raise ConfigurationError(f"{path}: [{name}] is not a table")
    return table or {}


def _token_of(table: Mapping[str, object], path: Path) -> str | None:
    if token := table.get("token"):
        return str(token)
    if token_file := table.get("token_file"):
        try:
            return Path(str(token_file)).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigurationError(f"{path}: token_file: {exc}") from exc
    return None
