"""A real OpenID provider on loopback: the OpenID-certified `oidc-provider` package for Node (installed by `npm ci`
from package.json), run by oidc_provider.mjs beside this file.

The tests make its signing keys, so they can sign an ID token as the provider would and hand it out through the
provider's own token endpoint (`serve_next_id_token`): that is how the hostile tokens reach Tollgate.
"""

import json
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
from joserfc.jwk import KeySet, RSAKey

from tests.builders.processes import free_port

SCRIPT = Path(__file__).with_name("oidc_provider.mjs")
CLIENT_ID = "tollgate"
CLIENT_SECRET = "tollgate-test-secret"  # noqa: S105 - the loopback provider's test client
TEST_SERVER = "http://testserver"  # Django's test client's
REDIRECT_URI = f"{TEST_SERVER}/oidc/callback/"
POST_LOGOUT_REDIRECT_URI = f"{TEST_SERVER}/login/"


def signing_key() -> RSAKey:
    """A new RSA key as a provider publishes one: its own `kid`, for signatures, RS256."""
    return RSAKey.generate_key(2048, parameters={"kid": uuid.uuid4().hex[:12], "use": "sig", "alg": "RS256"})


class OidcProvider:
    """One provider process, issuer http://127.0.0.1:PORT, with the client `tollgate` registered for the callback
    and sign-in page of the Tollgate at `tollgate_url`. `key` is the key it signs with now."""

    def __init__(self, tollgate_url: str = TEST_SERVER) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not installed: the single sign-on tests need it (README, 'The suite')")
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.key = signing_key()
        self._directory = tempfile.TemporaryDirectory(prefix="oidc-provider-")
        config = Path(self._directory.name) / "config.json"
        config.write_text(
            json.dumps(
                {
                    "issuer": self.issuer,
                    "port": self.port,
                    "client": {
                        "client_id": CLIENT_ID,
                        "client_secret": CLIENT_SECRET,
                        "redirect_uris": [f"{tollgate_url}/oidc/callback/"],
                        "post_logout_redirect_uris": [f"{tollgate_url}/login/"],
                        "grant_types": ["authorization_code"],
                        "response_types": ["code"],
                        "token_endpoint_auth_method": "client_secret_basic",
                    },
                    "jwks": _private_key_set(self.key),
                }
            )
        )
        self._process = subprocess.Popen(
            [node, str(SCRIPT), str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self._wait_until_listening()
        self.http = httpx.Client(base_url=self.issuer, timeout=10)

    def _wait_until_listening(self) -> None:
        # The script prints `listening` once it serves (or its error and exits); oidc-provider's warnings about
        # its development defaults come before it.
        printed = []
        for line in self._process.stdout:
            if line.strip() == "listening":
                # Read on what it prints later, or a full pipe would stop it.
                threading.Thread(target=self._process.stdout.read, daemon=True).start()
                return
            printed.append(line)
        raise RuntimeError("the OpenID provider did not start:\n" + "".join(printed))

    def set_account(self, subject: str, **claims) -> None:
        """The person who signs in as `subject`, and what the provider says about them (email, groups, ...)."""
        self._control(f"accounts/{subject}", claims)

    def rotate_key(self) -> RSAKey:
        """Sign with a new key from now on, publishing only it (the old one retired), as a key rotation does."""
        self.key = signing_key()
        self._control("keys", _private_key_set(self.key))
        return self.key

    def serve_next_id_token(self, id_token: str) -> None:
        """The next token response hands out `id_token` instead of the one the provider made."""
        self._control("next-id-token", {"id_token": id_token})

    def _control(self, path: str, body: dict) -> None:
        self.http.put(f"/__control/{path}", json=body).raise_for_status()

    def close(self) -> None:
        self.http.close()
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._directory.cleanup()


def _private_key_set(key: RSAKey) -> dict:
    return KeySet([key]).as_dict(private=True)


def unix_now() -> int:
    return int(time.time())
