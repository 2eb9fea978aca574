"""Settings for Tollgate, every one of them read from the environment (docs/configuration.md).

When `DATABASE_URL` or `REDIS_URL` is unset, a private server is found or started under
`TOLLGATE_DATA_DIR` (reviewer/embedded.py). Doing it here, at settings import, is deliberate: it is the
one place every entry point passes through (manage.py, gunicorn, the Celery worker and beat).
"""

import ipaddress
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from reviewer import embedded
from reviewer.env import (
    env_bool,
    env_choice,
    env_currency,
    env_float,
    env_group_roles,
    env_headers,
    env_int,
    env_judges,
    env_list,
    env_networks,
    env_price,
    env_str,
    env_subset,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("TOLLGATE_DATA_DIR", str(BASE_DIR / ".data")))

DEBUG = env_bool("DEBUG", False)
_INSECURE_SECRET = "insecure-development-key-never-use-in-production"  # noqa: S105
SECRET_KEY = env_str("SECRET_KEY") or (_INSECURE_SECRET if DEBUG else "")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
if not DEBUG:
    # Refuse to start in production mode with development defaults.
    if not SECRET_KEY or SECRET_KEY == _INSECURE_SECRET or len(SECRET_KEY) < 50:
        raise ImproperlyConfigured(
            "SECRET_KEY (or SECRET_KEY_FILE) must be set to 50+ random characters when DEBUG is off"
        )
    if not ALLOWED_HOSTS or "*" in ALLOWED_HOSTS:
        raise ImproperlyConfigured("ALLOWED_HOSTS must list this server's host names when DEBUG is off")


def database_from_url(url: str) -> dict:
    """Django DATABASES entry for a `postgresql://user:password@host:port/name?opt=value` URL.

    `?host=/path` selects a unix socket directory (how the embedded server is reached); other query
    options (sslmode, ...) are passed to psycopg.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgresql:// URL, not {parts.scheme or 'empty'}://")
    options = dict(parse_qsl(parts.query))
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured("DATABASE_URL names no database (postgresql://host/NAME)")
    return {
        "ENGINE": "reviewer.postgresql",  # Django's, with a pool that survives a failover
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": options.pop("host", parts.hostname or ""),
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
        "CONN_MAX_AGE": env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        "CONN_HEALTH_CHECKS": True,
    }


DATABASE_URL = env_str("DATABASE_URL") or embedded.postgres_url(DATA_DIR)
DATABASES = {"default": database_from_url(DATABASE_URL)}
# A pool of connections per process (psycopg_pool), shared by its threads. The judge workers run many threads
# that mostly wait on the judge: a thread hands its connection back before each judge call and at the end of
# each task (Celery closes connections around every task, which without a pool means a new PostgreSQL backend
# per review), so a process needs only as many connections as touch the database at once. 0 turns pooling off
# and keeps persistent connections (DATABASE_CONN_MAX_AGE) instead.
DATABASE_POOL_MAX_SIZE = env_int("DATABASE_POOL_MAX_SIZE", 8, minimum=0)
if DATABASE_POOL_MAX_SIZE:
    DATABASES["default"]["OPTIONS"]["pool"] = {"min_size": 1, "max_size": DATABASE_POOL_MAX_SIZE, "timeout": 30}
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django's pool replaces persistent connections
# Parameters bound by the server, and a statement a connection has run this many times prepared there: a grader
# sends the same few statements for every review, and parsing and planning them each time would be about half of
# PostgreSQL's CPU per review. 0 binds on the client and prepares nothing: needed behind a pooler that hands one
# server connection to many clients (PgBouncer in transaction mode).
DATABASE_PREPARE_THRESHOLD = env_int("DATABASE_PREPARE_THRESHOLD", 5, minimum=0)
if DATABASE_PREPARE_THRESHOLD:
    DATABASES["default"]["OPTIONS"] |= {"server_side_binding": True, "prepare_threshold": DATABASE_PREPARE_THRESHOLD}
REDIS_URL = env_str("REDIS_URL") or embedded.redis_url(DATA_DIR)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "csp",
    "axes",
    "django_celery_beat",
    "ninja",  # serves the API docs (Swagger UI) from our own static files, with no inline script
    "grading",
    "grading.otlp",
    "reviewer",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "reviewer.middleware.private_responses",  # reads request.user, so after AuthenticationMiddleware
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

ROOT_URLCONF = "reviewer.urls"
WSGI_APPLICATION = "reviewer.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "reviewer.context_processors.navigation",
            ],
        },
    }
]

# Passwords as Django checks them unless LOCAL_PASSWORDS turns them off; people signed in by the OpenID provider are
# found again through the second (reviewer/oidc/backends.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "reviewer.oidc.backends.LocalPasswordBackend",
    "reviewer.oidc.backends.SingleSignOnBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_HOURS", 0.25, minimum=0)
# A lockout is per username *and* address, so failures from one place never lock the user out elsewhere.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]


def client_address(request) -> str:
    """Where a sign-in came from, for its throttling. Behind the TLS proxy REMOTE_ADDR is the proxy for everyone,
    so the client is the last X-Forwarded-For entry: the one the proxy appended. Earlier entries are whatever the
    client sent, so trusting one would let anybody pose as anybody (and lock them out)."""
    from django.conf import settings  # read at request time: tests switch the proxy on and off

    if settings.BEHIND_TLS_PROXY:
        appended = request.META.get("HTTP_X_FORWARDED_FOR", "").rsplit(",", 1)[-1].strip()
        try:
            return str(ipaddress.ip_address(appended))
        except ValueError:
            pass  # no proxy in between (a health probe): the peer is the client
    return request.META.get("REMOTE_ADDR", "")


AXES_CLIENT_IP_CALLABLE = client_address
AXES_RESET_ON_SUCCESS = True

# Single sign-on with the company's OpenID provider (reviewer/oidc, docs/production.md): off unless OIDC_ISSUER
# is set. The provider's endpoints and keys come from its discovery document, OIDC_ISSUER/.well-known/....
OIDC_ISSUER = env_url("OIDC_ISSUER")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "")  # or OIDC_CLIENT_SECRET_FILE; none: a public client
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")  # the sign-in page's "Sign in with ..."
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
# What an ID token may be signed with: never `none`, nor HMAC (keyed with the client secret, which is no proof that
# the provider signed it).
OIDC_ID_TOKEN_ALGS = env_subset(
    "OIDC_ID_TOKEN_ALGS",
    ["RS256"],
    ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"),
)
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUP_ROLES = env_group_roles("OIDC_GROUP_ROLES")  # checked against the roles at startup (reviewer/apps.py)
OIDC_CREATE_USERS = env_bool("OIDC_CREATE_USERS", True)
OIDC_TIMEOUT_SECONDS = env_float("OIDC_TIMEOUT_SECONDS", 10.0, minimum=0.1)
LOCAL_PASSWORDS = env_bool("LOCAL_PASSWORDS", True)
LOCAL_PASSWORDS_OFF_FOR_DOMAINS = [domain.lower() for domain in env_list("LOCAL_PASSWORDS_OFF_FOR_DOMAINS", [])]
if OIDC_ISSUER and not OIDC_CLIENT_ID:
    raise ImproperlyConfigured("OIDC_CLIENT_ID must be set with OIDC_ISSUER: the client Tollgate is at the provider")
if OIDC_ISSUER and "openid" not in OIDC_SCOPES.split():
    raise ImproperlyConfigured(f"OIDC_SCOPES={OIDC_SCOPES!r} must include openid")
if not OIDC_ISSUER and (not LOCAL_PASSWORDS or LOCAL_PASSWORDS_OFF_FOR_DOMAINS):
    raise ImproperlyConfigured("Local passwords are turned off but OIDC_ISSUER is not set: nobody could sign in")

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# With DEBUG off, pages name each static file by its content's hash (collectstatic writes those copies and their
# manifest), so the proxy may let browsers keep them for a year (deploy/nginx/tollgate.conf) and a new release's
# files are fetched at once. Without collectstatic such a server cannot render a page.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage."
        + ("StaticFilesStorage" if DEBUG else "ManifestStaticFilesStorage")
    },
}

# Security. The CSP allows no inline script: htmx comes from our own static files, and
# behaviour lives in static JS. htmx injects its indicator styles inline unless told not to
# (htmx.config.includeIndicatorStyles is turned off by a meta tag in _base.html).
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # read by nothing: the token travels in hx-headers on <body>
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
BEHIND_TLS_PROXY = env_bool("BEHIND_TLS_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_TLS_PROXY else None
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])


def csp_form_action(oidc_issuer: str) -> list[str]:
    """Where a form may lead, its redirects included (Chromium holds them to form-action): this site, and the
    OpenID provider, which the sign-in and sign-out buttons go on to."""
    if not oidc_issuer:
        return ["'self'"]
    parts = urlsplit(oidc_issuer)
    return ["'self'", f"{parts.scheme}://{parts.netloc}"]


CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": csp_form_action(OIDC_ISSUER),
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))},
    "loggers": {"pgserver": {"level": "WARNING"}},
}
AXES_VERBOSE = False

# Celery: configured from these settings under the CELERY_ namespace (reviewer/celery.py).
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# A task running when its worker loses Redis runs to its end (Celery 6 would cancel it by default): its judge call
# is not made twice, and its acknowledgement, which can no longer be made, is logged (reviewer/celery.py).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Judge tasks wait on the network: the judge queue runs a thread pool (docs/production.md).
JUDGE_WORKER_THREADS = env_int("JUDGE_WORKER_THREADS", 32, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 900, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
# A late-acked task is redelivered when its visibility timeout passes, so the timeout must outlast the
# longest a task may run, or a slow judge call would run twice.
# A broker host that stops answering (rather than refusing) must fail a send within seconds, not hang it.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT * 2, "socket_connect_timeout": 5}
CELERY_TASK_DEFAULT_QUEUE = "default"

# Webhooks have a queue and a worker of their own (docs/production.md): a receiver that answers slowly must hold
# neither the workers that grade nor the one that runs the grading pass.
CELERY_TASK_ROUTES = {
    "grading.tasks.grade_*": {"queue": "judge"},
    "grading.tasks.deliver_webhook": {"queue": "webhooks"},
    "reviewer.tasks.escalation_*": {"queue": "webhooks"},
    "grading.tasks.monitor_notice": {"queue": "webhooks"},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SCHEDULE = {
    "grading-pass-hourly": {"task": "grading.tasks.grading_pass", "schedule": crontab(minute=5)},
    # Sends again the grading tasks that were lost (a broker restart, a dead worker, a failed send): see
    # grading/reviews/inflight.py. Cheap when nothing is lost, so a waiting pipeline hears within minutes, not an hour.
    "grading-recover": {"task": "grading.tasks.grading_recover", "schedule": crontab()},
    # The dashboards' counters from the reviews, to put right what no review write sees (the weeks written since the
    # last run; every week once a day): grading/reviews/rollups.py.
    "rollups-rebuild-hourly": {"task": "grading.tasks.rebuild_all_rollups", "schedule": crontab(minute=35)},
    # Certificates computed again from people's newest verdicts (grading/certify/services.py); a label import and a
    # changed target ask at once.
    "certificates-refresh": {"task": "grading.tasks.certificates_refresh", "schedule": crontab(minute="*/10")},
    # Items newly due soon or overdue, told to whom each org's escalation names: reviewer/queue/escalation.py.
    "escalations-sweep": {"task": "reviewer.tasks.escalations_sweep", "schedule": crontab()},
    # Every monitor's figure against its levels, and a notice on each change of state: grading/monitors/evaluate.py.
    "monitors-evaluate": {"task": "grading.tasks.monitors_evaluate", "schedule": crontab(minute="*/5")},
    # Items past their org's retention period erased, and erasures a dead worker left unfinished resumed:
    # grading/erasure/runs.py.
    "retention-daily": {"task": "grading.tasks.retention_pass", "schedule": crontab(minute=25, hour=3)},
}

# The judge. With no JUDGE_BASE_URL, the offline heuristic judge (labelled as such) grades.
JUDGE_BASE_URL = env_str("JUDGE_BASE_URL", "")
JUDGE_MODEL = env_str("JUDGE_MODEL", "gpt-4o-mini")
JUDGE_API_KEY = env_str("JUDGE_API_KEY", "")
JUDGE_TIMEOUT_SECONDS = env_float("JUDGE_TIMEOUT_SECONDS", 60.0, minimum=0.1)
JUDGE_MAX_RETRIES = env_int("JUDGE_MAX_RETRIES", 3, minimum=0)
# The judge's context window for one request, in tokens; 0 asks the server (llama.cpp, Ollama) and falls back to
# 16,384. Stages are cut to fit it, less the reply's limit: the judge never sees a truncated conversation.
JUDGE_CONTEXT_TOKENS = env_int("JUDGE_CONTEXT_TOKENS", 0, minimum=0)
JUDGE_MAX_OUTPUT_TOKENS = env_int("JUDGE_MAX_OUTPUT_TOKENS", 1_024, minimum=64)
# Per million prompt (input) and completion (output) tokens, in one currency; unset: spend is counted in tokens only.
JUDGE_PRICE_INPUT_PER_MILLION = env_price("JUDGE_PRICE_INPUT_PER_MILLION")
JUDGE_PRICE_OUTPUT_PER_MILLION = env_price("JUDGE_PRICE_OUTPUT_PER_MILLION")
# The currency every judge's prices are in, named wherever a cost is shown; USD because the hosted judges price
# their tokens in US dollars.
SPEND_CURRENCY = env_currency("SPEND_CURRENCY", "USD")
# Every judge a criteria version may name (CriteriaVersion.judge): `default`, the one above, and those of the JSON
# file JUDGES_FILE names (reviewer/env.py `env_judges` says its form). JSON because the judges are a nested
# document that environment variables carry badly, Python reads it strictly with no dependency, and its errors say
# where; each judge's key stays in a file of its own, so the document holds no secret and can be committed.
JUDGES = env_judges(
    "JUDGES_FILE",
    default={
        "base_url": JUDGE_BASE_URL,
        "model": JUDGE_MODEL,
        "api_key": JUDGE_API_KEY,
        "timeout_seconds": JUDGE_TIMEOUT_SECONDS,
        "max_retries": JUDGE_MAX_RETRIES,
        "context_tokens": JUDGE_CONTEXT_TOKENS,
        "max_output_tokens": JUDGE_MAX_OUTPUT_TOKENS,
        "price_input_per_million": JUDGE_PRICE_INPUT_PER_MILLION,
        "price_output_per_million": JUDGE_PRICE_OUTPUT_PER_MILLION,
    },
)
EMBEDDINGS_BACKEND = env_choice("EMBEDDINGS_BACKEND", "hashing", ("hashing", "openai", "sentence-transformers"))
# The `openai` backend: EMBEDDINGS_BASE_URL, else the judge's server (the key is JUDGE_API_KEY either way).
EMBEDDINGS_BASE_URL = env_str("EMBEDDINGS_BASE_URL", "")
EMBEDDINGS_MODEL = env_str("EMBEDDINGS_MODEL", "text-embedding-3-small")
# Orgs with up to this many learnings are searched exactly (deterministic memory snapshots); above, by HNSW.
MEMORY_EXACT_SEARCH_MAX = env_int("MEMORY_EXACT_SEARCH_MAX", 20_000, minimum=0)

# Conversations and the grading pass.
MAX_MESSAGES_PER_CONVERSATION = env_int("MAX_MESSAGES_PER_CONVERSATION", 10_000, minimum=1)
MAX_MESSAGE_BYTES = env_int("MAX_MESSAGE_BYTES", 1_000_000, minimum=1_000)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BYTES", 64_000_000, minimum=1_000_000)
# A draft is judged whole, in one prompt (drafts have no stages): 200 kB is some 30,000 words.
MAX_DRAFT_BYTES = env_int("MAX_DRAFT_BYTES", 200_000, minimum=1_000)
# One OTLP request is served well inside a worker's 30 s timeout, on a loaded machine too (bench/bench_otlp.py
# measures a request at these limits); the SDKs export 512 spans a batch by default.
MAX_OTLP_SPANS_PER_REQUEST = env_int("MAX_OTLP_SPANS_PER_REQUEST", 1_000, minimum=1)
MAX_OTLP_CONVERSATIONS_PER_REQUEST = env_int("MAX_OTLP_CONVERSATIONS_PER_REQUEST", 250, minimum=1)
MAX_OTLP_LOG_RECORDS_PER_REQUEST = env_int("MAX_OTLP_LOG_RECORDS_PER_REQUEST", 1_000, minimum=1)
# How long a model call's messages (OTLP log records) are waited for before every answer says they are overdue.
OTLP_CONTENT_WAIT_MINUTES = env_int("OTLP_CONTENT_WAIT_MINUTES", 10, minimum=0)
# A model call waiting for its other part (span or log records) is given up this long after its first part came
# (grading/otlp/pending.py; the daily retention pass removes what no request of its org did). Per org, the waiting
# calls and the bytes their log records hold are capped: what would wait beyond either is refused, named.
OTLP_PENDING_EXPIRY_HOURS = env_int("OTLP_PENDING_EXPIRY_HOURS", 24, minimum=1)
OTLP_PENDING_MAX_CALLS = env_int("OTLP_PENDING_MAX_CALLS", 10_000, minimum=1)
OTLP_PENDING_MAX_BYTES = env_int("OTLP_PENDING_MAX_BYTES", 100_000_000, minimum=1_000)
# CPU seconds the checks and repairs of one draft may spend (grading, trials); a criteria preview's checks, which run
# inside the web request, share PREVIEW_CPU_BUDGET_SECONDS, kept under the web worker's timeout.
CHECKS_CPU_BUDGET_SECONDS = env_float("CHECKS_CPU_BUDGET_SECONDS", 5.0, minimum=0.01)
PREVIEW_CPU_BUDGET_SECONDS = env_float("PREVIEW_CPU_BUDGET_SECONDS", 15.0, minimum=0.01)
# Labels one POST /api/v1/labels may hold (413 beyond), sized so that a request finishes well inside a 30 s web
# worker timeout on a busy host (bench/bench_labels.py); they are written a few hundred to a transaction.
MAX_LABELS_PER_REQUEST = env_int("MAX_LABELS_PER_REQUEST", 5_000, minimum=1)
CONVERSATION_QUIET_MINUTES = env_int("CONVERSATION_QUIET_MINUTES", 30, minimum=0)
GRADING_PASS_CAP = env_int("GRADING_PASS_CAP", 5_000, minimum=1)
# Items per grading task a pass sends: graded one after another in the task, so Celery's cost per task is shared
# (and a worker thread holds a batch's locks while it works through it).
GRADING_BATCH_SIZE = env_int("GRADING_BATCH_SIZE", 8, minimum=1)
# How many items every grading worker together grades at once (processes x threads): a pass's last tasks are sized
# by it (planner.task_size). Guessing high costs a few more tasks; guessing low leaves a longer tail.
GRADING_CONCURRENCY = env_int("GRADING_CONCURRENCY", 64, minimum=1)
SAMPLING_SALT = env_str("SAMPLING_SALT", "tollgate")
# A trial spends paid judge calls (up to CRITERIA_TRIAL_MAX_ITEMS items): one runs per version at a time, and an org
# starts at most this many in any hour.
CRITERIA_TRIALS_PER_ORG_PER_HOUR = env_int("CRITERIA_TRIALS_PER_ORG_PER_HOUR", 10, minimum=1)
# The most items a trial may grade (each is at least one paid judge call): enough for a trial scored against a
# couple of hundred people's verdicts.
CRITERIA_TRIAL_MAX_ITEMS = env_int("CRITERIA_TRIAL_MAX_ITEMS", 200, minimum=1)

# Requests to URLs that users give (webhooks): internal addresses are refused unless a network here names them.
OUTBOUND_ALLOWED_NETWORKS = env_networks("OUTBOUND_ALLOWED_NETWORKS")

# Draft webhooks. The timeout is for a whole try, not per read.
WEBHOOK_TIMEOUT_SECONDS = env_float("WEBHOOK_TIMEOUT_SECONDS", 10.0, minimum=0.1)
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 6, minimum=1)
WEBHOOK_RETRY_BASE_SECONDS = env_float("WEBHOOK_RETRY_BASE_SECONDS", 10.0, minimum=0)
WEBHOOK_RETRY_CAP_SECONDS = env_float("WEBHOOK_RETRY_CAP_SECONDS", 600.0, minimum=0)

CLAIM_LEASE_MINUTES = env_int("CLAIM_LEASE_MINUTES", 15, minimum=1)

# How long each monitor evaluation (its figure, n and state) is kept for the monitor's history.
MONITOR_HISTORY_DAYS = env_int("MONITOR_HISTORY_DAYS", 30, minimum=1)

# Escalation mails (service-level targets). Without EMAIL_HOST they are written to the worker's log instead.
TOLLGATE_BASE_URL = env_url("TOLLGATE_BASE_URL", "http://127.0.0.1:8000")  # links in mails point here
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")  # or EMAIL_HOST_PASSWORD_FILE
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0, minimum=0.1)  # a silent SMTP server fails a try, not a worker
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tollgate@localhost")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend"
)

# Verdicts out as OpenTelemetry `gen_ai.evaluation.result` log records (OTLP/HTTP, protobuf). Off unless an
# endpoint is configured: Tollgate's own variable names the logs URL in full; otherwise the standard OTLP
# variables are read as every OpenTelemetry SDK reads them (the base endpoint gets /v1/logs appended).
_OTLP_BASE_ENDPOINT = env_url("OTEL_EXPORTER_OTLP_ENDPOINT")
OTLP_EVALUATIONS_ENDPOINT = (
    env_url("TOLLGATE_OTLP_EVALUATIONS_ENDPOINT")
    or env_url("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    or (_OTLP_BASE_ENDPOINT.rstrip("/") + "/v1/logs" if _OTLP_BASE_ENDPOINT else "")
)
OTLP_EVALUATIONS_HEADERS = (
    env_headers("TOLLGATE_OTLP_EVALUATIONS_HEADERS")
    or env_headers("OTEL_EXPORTER_OTLP_LOGS_HEADERS")
    or env_headers("OTEL_EXPORTER_OTLP_HEADERS")
)
OTLP_EVALUATIONS_TIMEOUT_SECONDS = env_float("TOLLGATE_OTLP_EVALUATIONS_TIMEOUT_SECONDS", 10.0, minimum=0.1)
OTLP_EVALUATIONS_MAX_ATTEMPTS = env_int("TOLLGATE_OTLP_EVALUATIONS_MAX_ATTEMPTS", 6, minimum=1)
OTLP_EVALUATIONS_RETRY_BASE_SECONDS = env_float("TOLLGATE_OTLP_EVALUATIONS_RETRY_BASE_SECONDS", 10.0, minimum=0)
OTLP_EVALUATIONS_RETRY_CAP_SECONDS = env_float("TOLLGATE_OTLP_EVALUATIONS_RETRY_CAP_SECONDS", 600.0, minimum=0)
