"""Orgs, their API keys and their audit trail."""

import secrets

from django.conf import settings
from django.db import models


def new_webhook_secret() -> str:
    return secrets.token_hex(32)


class Org(models.Model):
    """A tenant: users, keys, criteria, memory, drafts and conversations belong to one org."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    webhook_secret = models.CharField(
        max_length=64, default=new_webhook_secret, help_text="Signs webhook deliveries (HMAC-SHA256)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    """A pipeline's credential. Only a SHA-256 of the key is stored: keys are 256-bit random, so a
    fast hash is enough (there is nothing to brute-force), and it lets us look a key up by its hash."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The first characters of the key, to recognise it by.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.name} ({self.prefix}…)"


class AuditEvent(models.Model):
    """Who did what, when, to which object. Written by `audit_record`, never updated."""

    org = models.ForeignKey(Org, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["org", "action", "at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action} {self.object_type}:{self.object_id}"
