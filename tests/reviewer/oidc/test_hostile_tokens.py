"""ID tokens that must not sign anyone in, each handed out by the real provider's own token endpoint in place of the
one it made (as a man in the middle, a provider gone wrong or a stolen token would put it there): each is refused
with a page, nobody signed in and nothing written. So is a callback replayed."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from joserfc.jwk import OctKey, RSAKey

from grading.models import AuditEvent
from reviewer.models import Membership, SignInIdentity
from tests.builders.sign_in import signed_token, token_claims, trip_to_provider, unsigned_token
from tests.fakes.oidc_provider import CLIENT_SECRET, signing_key

ADA = "ada-0001"
ANOTHER_PROVIDER = "http://127.0.0.1:9/another-provider"


def wrong_signature(provider, nonce):
    # The provider's key id on a signature by another key.
    return signed_token(token_claims(provider, ADA, nonce), signing_key(), kid=provider.key.kid)


def wrong_audience(provider, nonce):
    # Issued to another client; `azp` names Tollgate's, which must not stand in for the audience.
    return signed_token(token_claims(provider, ADA, nonce, aud="another-client", azp="tollgate"), provider.key)


def expired(provider, nonce):
    now = token_claims(provider, ADA, nonce)["iat"]
    return signed_token(token_claims(provider, ADA, nonce, iat=now - 3600, exp=now - 600), provider.key)


def earlier_nonce(provider, nonce):
    # A genuine token from an earlier sign-in of the same person, replayed into this one.
    return signed_token(token_claims(provider, ADA, "nonce-of-an-earlier-sign-in"), provider.key)


def no_nonce(provider, nonce):
    claims = token_claims(provider, ADA, nonce)
    del claims["nonce"]
    return signed_token(claims, provider.key)


def alg_none(provider, nonce):
    return unsigned_token(token_claims(provider, ADA, nonce), kid=provider.key.kid)


def hmac_with_the_client_secret(provider, nonce):
    # Anyone holding the client secret (Tollgate itself, a leaked config) could sign this: not the provider's word.
    return signed_token(token_claims(provider, ADA, nonce), OctKey.import_key(CLIENT_SECRET), alg="HS256", kid="x")


def unexpected_algorithm(provider, nonce):
    # The provider's own key, but an algorithm Tollgate was not told to accept (OIDC_ID_TOKEN_ALGS: RS256).
    key = RSAKey.import_key(
        {name: value for name, value in provider.key.as_dict(private=True).items() if name != "alg"}
    )
    return signed_token(token_claims(provider, ADA, nonce), key, alg="PS256")


def another_providers_token(provider, nonce):
    # Signed by another provider with its own key, for the same client id.
    other = signing_key()
    return signed_token(token_claims(provider, ADA, nonce, iss=ANOTHER_PROVIDER), other)


def another_issuer_with_this_key(provider, nonce):
    return signed_token(token_claims(provider, ADA, nonce, iss=ANOTHER_PROVIDER), provider.key)


def not_a_token(provider, nonce):
    return "not.a-token"


HOSTILE = [
    wrong_signature,
    wrong_audience,
    expired,
    earlier_nonce,
    no_nonce,
    alg_none,
    hmac_with_the_client_secret,
    unexpected_algorithm,
    another_providers_token,
    another_issuer_with_this_key,
    not_a_token,
]


def assert_nothing_written() -> None:
    assert get_user_model().objects.count() == 0
    assert (SignInIdentity.objects.count(), Membership.objects.count(), AuditEvent.objects.count()) == (0, 0, 0)


@pytest.mark.parametrize("make_token", HOSTILE, ids=[maker.__name__ for maker in HOSTILE])
def test_a_hostile_id_token_signs_nobody_in_and_writes_nothing(client, single_sign_on, make_token):
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=True, groups=["tollgate-admins"])
    trip = trip_to_provider(client, single_sign_on, ADA)
    single_sign_on.serve_next_id_token(make_token(single_sign_on, trip.nonce))

    response = client.get(trip.callback)

    assert response.status_code == 403
    assert b"did not pass Tollgate" in response.content
    assert "_auth_user_id" not in client.session
    assert_nothing_written()


def test_the_provider_genuine_token_is_accepted_where_the_hostile_ones_are_not(client, single_sign_on):
    # The control: the same trip with a token made exactly as the hostile ones, but right, signs in.
    single_sign_on.set_account(ADA)
    trip = trip_to_provider(client, single_sign_on, ADA)
    single_sign_on.serve_next_id_token(signed_token(token_claims(single_sign_on, ADA, trip.nonce), single_sign_on.key))
    assert client.get(trip.callback).status_code == 302
    assert SignInIdentity.objects.filter(subject=ADA).exists()


def test_a_callback_replayed_by_someone_else_signs_nobody_in(client, single_sign_on):
    single_sign_on.set_account(ADA)
    trip = trip_to_provider(client, single_sign_on, ADA)
    attacker = Client()

    response = attacker.get(trip.callback)

    assert response.status_code == 403
    assert "_auth_user_id" not in attacker.session
    assert_nothing_written()


def test_a_callback_used_once_cannot_be_used_again(client, single_sign_on):
    single_sign_on.set_account(ADA)
    trip = trip_to_provider(client, single_sign_on, ADA)
    assert client.get(trip.callback).status_code == 302
    client.logout()
    written = AuditEvent.objects.count()

    assert client.get(trip.callback).status_code == 403
    assert "_auth_user_id" not in client.session
    assert AuditEvent.objects.count() == written
