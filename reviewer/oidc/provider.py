"""The OpenID provider, as Authlib's Django client speaks to it: discovery from OIDC_ISSUER, the authorization code
flow with PKCE (S256), `state` and `nonce` kept in the session, and the ID token checked by Authlib: its signature
against the provider's published keys (fetched again when a token names a key not seen before, so a rotated key is
picked up without a restart), only with the algorithms OIDC_ID_TOKEN_ALGS allows, and its issuer, audience, expiry
and nonce. Nothing here checks a token by hand.
"""

import functools
from dataclasses import dataclass

import requests
from authlib.integrations.base_client import OAuthError
from authlib.integrations.django_client import DjangoIntegration, DjangoOAuth2App
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from joserfc.errors import JoseError

# Kept for the logout: the provider's end-session asks for the ID token as a hint.
ID_TOKEN_SESSION_KEY = "oidc_id_token"  # noqa: S105 - the name of a session key


class ProviderUnreachable(Exception):
    """The provider did not answer, or answered with something other than its discovery document."""


class SignInNotVerified(Exception):
    """The provider's answer failed a check (state, the token exchange, the ID token): nobody is signed in."""


# How a provider that is down, or answers with something else than OpenID Connect, shows through Authlib and requests:
# an HTTP error or none, a reply that is not JSON, a discovery document without an endpoint Authlib needs.
_NOT_ANSWERING = (requests.RequestException, RuntimeError)


@dataclass(frozen=True)
class ProviderConfig:
    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    algorithms: tuple[str, ...]
    timeout_seconds: float


def configured() -> bool:
    return bool(settings.OIDC_ISSUER)


def provider_name() -> str:
    return settings.OIDC_PROVIDER_NAME


def authorize_redirect(request: HttpRequest, redirect_uri: str) -> HttpResponse:
    """The redirect to the provider's sign-in, with a new state, nonce and PKCE verifier kept in the session."""
    try:
        return _client(_config()).authorize_redirect(request, redirect_uri)
    except _NOT_ANSWERING as exc:
        raise ProviderUnreachable(str(exc)) from exc


def id_token_claims(request: HttpRequest) -> tuple[dict, str]:
    """The claims of the ID token the provider issued for this callback, and the token itself, once every check
    passed: the state is this session's (and used once), the code is exchanged with the PKCE verifier, and the
    token is the provider's, for this client, unexpired, with this sign-in's nonce."""
    config = _config()
    try:
        token = _client(config).authorize_access_token(
            request,
            # Authlib checks the audience only when told which to expect: without this, a token issued to another
            # client that names Tollgate's as `azp` would pass. The issuer is held to OIDC_ISSUER itself.
            claims_options={
                "iss": {"essential": True, "value": config.issuer},
                "aud": {"essential": True, "value": config.client_id},
            },
        )
    except _NOT_ANSWERING as exc:  # first: a reply that is not JSON is a ValueError too
        raise ProviderUnreachable(str(exc)) from exc
    except (OAuthError, JoseError, ValueError) as exc:
        raise SignInNotVerified(str(exc)) from exc
    if "userinfo" not in token:  # no ID token (or no nonce kept for it): an OAuth answer, not a sign-in
        raise SignInNotVerified("the provider's answer holds no ID token")
    return dict(token["userinfo"]), token["id_token"]


def end_session_url(id_token: str, post_logout_redirect_uri: str) -> str | None:
    """Where to send someone signing out, so the provider ends its session too (RP-initiated logout): its
    end-session endpoint with the ID token as a hint. None when the provider has none or cannot be reached."""
    config = _config()
    try:
        client = _client(config)
        if not client.load_server_metadata().get("end_session_endpoint"):
            return None
        return client.create_logout_url(
            post_logout_redirect_uri=post_logout_redirect_uri, id_token_hint=id_token, client_id=config.client_id
        )["url"]
    except (*_NOT_ANSWERING, ProviderUnreachable):
        return None


def _config() -> ProviderConfig:
    return ProviderConfig(
        issuer=settings.OIDC_ISSUER,
        client_id=settings.OIDC_CLIENT_ID,
        client_secret=settings.OIDC_CLIENT_SECRET,
        scopes=settings.OIDC_SCOPES,
        algorithms=tuple(settings.OIDC_ID_TOKEN_ALGS),
        timeout_seconds=settings.OIDC_TIMEOUT_SECONDS,
    )


class _PinnedProvider(DjangoOAuth2App):
    """Authlib's client, with the discovery document held to what Tollgate was configured with."""

    def __init__(self, config: ProviderConfig, **kwargs) -> None:
        super().__init__(**kwargs)
        self.config = config

    def load_server_metadata(self) -> dict:
        metadata = super().load_server_metadata()
        # A document naming another issuer is not this provider's (OpenID Connect Discovery, 4.3).
        if metadata.get("issuer") != self.config.issuer:
            raise ProviderUnreachable(f"the discovery document names the issuer {metadata.get('issuer')!r}")
        # Authlib accepts the algorithms the provider says it uses; Tollgate accepts only those it was told to.
        metadata["id_token_signing_alg_values_supported"] = list(self.config.algorithms)
        return metadata


@functools.cache
def _client(config: ProviderConfig) -> _PinnedProvider:
    """One client per configuration for the life of the process: it keeps the discovery document and the
    provider's keys (fetched again when a token names a key it has not seen)."""
    return _PinnedProvider(
        config,
        framework=DjangoIntegration("oidc"),
        name="oidc",
        client_id=config.client_id,
        client_secret=config.client_secret or None,
        server_metadata_url=config.issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={
            "scope": config.scopes,
            "code_challenge_method": "S256",
            "token_endpoint_auth_method": "client_secret_basic" if config.client_secret else "none",
            "default_timeout": config.timeout_seconds,
        },
    )
