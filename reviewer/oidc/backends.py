"""How Django finds people: by password, unless local passwords are off for them, or through single sign-on."""

from django.conf import settings
from django.contrib.auth.backends import ModelBackend


def passwords_allowed(user) -> bool:
    """Whether `user` may sign in with a password: not when LOCAL_PASSWORDS is off, nor when their e-mail address is
    at a domain of LOCAL_PASSWORDS_OFF_FOR_DOMAINS (those people sign in with the OpenID provider)."""
    if not settings.LOCAL_PASSWORDS:
        return False
    domain = (user.email or "").rpartition("@")[2].lower()
    return domain not in settings.LOCAL_PASSWORDS_OFF_FOR_DOMAINS


class LocalPasswordBackend(ModelBackend):
    """Django's password check, for the people `passwords_allowed` lets in. A session begun with a password ends
    once passwords are turned off for its person (Django asks `user_can_authenticate` on every request)."""

    def user_can_authenticate(self, user) -> bool:
        return super().user_can_authenticate(user) and passwords_allowed(user)


class SingleSignOnBackend(ModelBackend):
    """The sessions begun by the OpenID provider (reviewer/oidc/views.py signs the person in after the provider's
    tokens passed their checks): it checks no credentials itself."""

    def authenticate(self, request, **credentials) -> None:
        return None
