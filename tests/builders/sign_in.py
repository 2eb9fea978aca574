"""Signing in to Tollgate through the loopback OpenID provider (tests/fakes/oidc_provider.py) as a browser does: the
sign-in page's button, the provider's own login and consent pages, and back to Tollgate's callback. And ID tokens
as a hostile party would make them, for the provider to hand out in place of its own."""

import base64
import json
import re
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl, urljoin, urlsplit

import httpx
from django.test import Client
from django.urls import reverse
from joserfc import jwt
from joserfc.jwk import Key

from tests.fakes.oidc_provider import CLIENT_ID, REDIRECT_URI, OidcProvider

PROMPT = re.compile(r'name="prompt" value="(\w+)"')
FORM_ACTION = re.compile(r'<form[^>]* action="([^"]+)"')


@dataclass(frozen=True)
class Trip:
    """A sign-in that went to the provider and is on its way back: the authorization request Tollgate sent, and the
    callback (path and query) the provider redirected the browser to."""

    request: dict[str, str]
    callback: str

    @property
    def nonce(self) -> str:
        return self.request["nonce"]


def trip_to_provider(
    client: Client, provider: OidcProvider, subject: str, *, next_url: str = "", accept_invitation: bool = False
) -> Trip:
    """Press "Sign in with ..." on Tollgate's sign-in page (or, `accept_invitation`, on the invitation page the
    client has open), then sign in at the provider as `subject` and consent, in a browser of its own (new provider
    cookies each time); stop before the browser returns to Tollgate."""
    fields = {"next": next_url} | ({"accept_invitation": "1"} if accept_invitation else {})
    start = client.post(reverse("oidc_start"), fields)
    assert start.status_code == 302, start.content
    url = start["Location"]
    assert url.startswith(provider.issuer)
    request = dict(parse_qsl(urlsplit(url).query))
    with httpx.Client(timeout=10) as browser:
        for _ in range(12):  # login, consent and their redirects
            if url.startswith(REDIRECT_URI):
                parts = urlsplit(url)
                return Trip(request, f"{parts.path}?{parts.query}")
            response = browser.get(url)
            if response.is_redirect:
                url = urljoin(url, response.headers["location"])
                continue
            assert response.status_code == 200, response.text
            prompt = PROMPT.search(response.text).group(1)
            fields = {"prompt": prompt} | ({"login": subject, "password": "any"} if prompt == "login" else {})
            answer = browser.post(urljoin(url, FORM_ACTION.search(response.text).group(1)), data=fields)
            assert answer.is_redirect, answer.text
            url = urljoin(url, answer.headers["location"])
    raise AssertionError(f"the provider never sent the browser back to Tollgate (last at {url})")


def sign_in(
    client: Client, provider: OidcProvider, subject: str, *, next_url: str = "", accept_invitation: bool = False
):
    """The whole sign-in; Tollgate's answer to the callback."""
    trip = trip_to_provider(client, provider, subject, next_url=next_url, accept_invitation=accept_invitation)
    return client.get(trip.callback)


# --- hostile ID tokens ---------------------------------------------------------------------------------------------


def token_claims(provider: OidcProvider, subject: str, nonce: str, **changes) -> dict:
    """The claims of a genuine ID token for this client's sign-in as `subject`, with `changes` made."""
    now = int(time.time())
    claims = {"iss": provider.issuer, "sub": subject, "aud": CLIENT_ID, "iat": now, "exp": now + 300, "nonce": nonce}
    return claims | changes


def signed_token(claims: dict, key: Key, *, alg: str = "RS256", kid: str | None = None) -> str:
    header = {"alg": alg, "kid": kid or key.kid}
    return jwt.encode(header, claims, key, algorithms=[alg])


def unsigned_token(claims: dict, *, kid: str) -> str:
    """`alg: none`: a header, the claims, and an empty signature."""
    return f"{_b64(json.dumps({'alg': 'none', 'kid': kid}))}.{_b64(json.dumps(claims))}."


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()
