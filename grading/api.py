"""The pipelines' HTTP API under /api/v1/ (django-ninja: typed endpoints and an OpenAPI document)."""

from django.db import connection
from django.http import HttpRequest
from ninja import NinjaAPI, Schema, Status
from ninja.security import HttpBearer

from grading import health
from grading.models import ApiKey
from grading.services import api_key_authenticate


class OrgApiKey(HttpBearer):
    """`Authorization: Bearer <org API key>`; `request.auth` becomes the ApiKey, and through it the org."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        return api_key_authenticate(token)


api = NinjaAPI(
    title="Tollgate API",
    version="1",
    description="Submit drafts and conversations, read verdicts. Every call is scoped to the org of its API key.",
    auth=OrgApiKey(),
    urls_namespace="api",
)


class WhoAmI(Schema):
    org: str
    key_name: str


@api.get("/whoami", response=WhoAmI, summary="The org and key name this API key belongs to")
def whoami(request: HttpRequest) -> WhoAmI:
    return WhoAmI(org=request.auth.org.slug, key_name=request.auth.name)


class ServiceStatus(Schema):
    ok: bool
    detail: str


class HealthReport(Schema):
    ok: bool
    database: ServiceStatus
    redis: ServiceStatus
    workers: ServiceStatus


@api.get("/health", response={200: HealthReport, 503: HealthReport}, summary="Database, Redis and worker liveness")
def get_health(request: HttpRequest) -> Status[HealthReport]:
    database = ServiceStatus(**health.database_status(connection))
    redis = ServiceStatus(**health.redis_status())
    workers = ServiceStatus(**health.worker_status())
    ok = database.ok and redis.ok and workers.ok
    report = HealthReport(ok=ok, database=database, redis=redis, workers=workers)
    return Status(200 if ok else 503, report)
