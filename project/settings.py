"""Countersign settings, read from the environment (see README "Configuration")."""

import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG")

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (see README, Configuration).")
    # Only for local development: DEBUG on means nobody relies on sessions surviving a key change.
    SECRET_KEY = "dev-only-insecure-countersign-key-do-not-use-in-production"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "channels",
    "core",
    "approvals",
    "sandbox",
    "tools",
    "planning",
    "execution",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "project.middleware.refuse_nul_characters",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

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
                "project.context_processors.roles",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'countersign.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and beat share one file: wait for locks instead of failing with "database is locked",
    # and keep the test database on disk so worker subprocesses in tests can open it.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "inbox"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Serve straight from static/ in development (and until collectstatic has run); production serves the
# collected, compressed files from STATIC_ROOT.
WHITENOISE_USE_FINDERS = DEBUG or not STATIC_ROOT.exists()
WHITENOISE_AUTOREFRESH = DEBUG

EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "countersign@localhost")
# With EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend, notifications go through this server.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = os.environ.get("EMAIL_USE_TLS", "") == "1"
EMAIL_TIMEOUT = 10

# --- HTTPS hardening: on for any deployment behind TLS (README, "Production settings").
COUNTERSIGN_HTTPS = env_bool("COUNTERSIGN_HTTPS")
if COUNTERSIGN_HTTPS:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# --- Redis, Celery, Channels
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 120)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 150)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]


# A websocket consumer waits for its next message in a blocking read of up to 5 s (channels-redis's
# brpop_timeout). redis-py's default socket timeout is also 5 s, so an idle socket's read timed out and
# the websocket closed after 5 s without events; the read timeout must stay well above the blocking read.
# Not None: a dead Redis connection must still fail, not hang a consumer for good.
CHANNEL_REDIS_SOCKET_TIMEOUT_S = env_float("CHANNEL_REDIS_SOCKET_TIMEOUT_S", 30.0)
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [
                {
                    "address": REDIS_URL,
                    "socket_timeout": CHANNEL_REDIS_SOCKET_TIMEOUT_S,
                    "socket_connect_timeout": 5,
                    "socket_keepalive": True,
                    "health_check_interval": 15,
                }
            ]
        },
    }
}

# --- Countersign
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_TIMEOUT_S = env_float("OPENAI_TIMEOUT_S", 60.0)
OPENAI_MAX_RETRIES = env_int("OPENAI_MAX_RETRIES", 2)
COUNTERSIGN_PLANNER_MODEL = os.environ.get("COUNTERSIGN_PLANNER_MODEL", "gpt-4.1-mini")
COUNTERSIGN_FOUR_EYES = env_bool("COUNTERSIGN_FOUR_EYES", True)
COUNTERSIGN_MAX_STEPS = env_int("COUNTERSIGN_MAX_STEPS", 30)
COUNTERSIGN_REPAIR_ROUNDS = env_int("COUNTERSIGN_REPAIR_ROUNDS", 2)
COUNTERSIGN_HTTP_ALLOWLIST = env_list("COUNTERSIGN_HTTP_ALLOWLIST")
# Preflight (planning/preflight.py): the organisation's email domains (recipients elsewhere are a finding;
# empty = no check), and how far above the largest earlier value a numeric argument counts as unusual.
COUNTERSIGN_ORG_DOMAINS = env_list("COUNTERSIGN_ORG_DOMAINS")
COUNTERSIGN_PREFLIGHT_OUTLIER_FACTOR = env_float("COUNTERSIGN_PREFLIGHT_OUTLIER_FACTOR", 10.0)
# An LLM critic reads every new revision of a step plan (planning/critic.py); off by default: it costs tokens.
COUNTERSIGN_PREFLIGHT_CRITIC = os.environ.get("COUNTERSIGN_PREFLIGHT_CRITIC", "").lower() in {"1", "true", "yes"}
COUNTERSIGN_HTTP_MAX_BYTES = env_int("COUNTERSIGN_HTTP_MAX_BYTES", 1_000_000)
COUNTERSIGN_HTTP_TIMEOUT_S = env_float("COUNTERSIGN_HTTP_TIMEOUT_S", 10.0)
COUNTERSIGN_ONCALL_FROM = os.environ.get("COUNTERSIGN_ONCALL_FROM", DEFAULT_FROM_EMAIL)
# API bearer tokens expire this many days after they are issued (`issue_token --days` overrides it).
COUNTERSIGN_TOKEN_DAYS = env_int("COUNTERSIGN_TOKEN_DAYS", 90)
# Approval policies (Cedar files, checked at start-up; README "Policy files"). Deadlines in seconds, 0 = none.
COUNTERSIGN_POLICY_DIR = os.environ.get("COUNTERSIGN_POLICY_DIR", str(BASE_DIR / "approvals" / "policies"))
COUNTERSIGN_APPROVAL_DEADLINE_S = env_int("COUNTERSIGN_APPROVAL_DEADLINE_S", 0)
COUNTERSIGN_GATE_DEADLINE_S = env_int("COUNTERSIGN_GATE_DEADLINE_S", 0)
COUNTERSIGN_APPROVAL_EXPIRY_S = env_int("COUNTERSIGN_APPROVAL_EXPIRY_S", 0)
COUNTERSIGN_GATE_EXPIRY_S = env_int("COUNTERSIGN_GATE_EXPIRY_S", 0)
COUNTERSIGN_ESCALATION_GROUP = os.environ.get("COUNTERSIGN_ESCALATION_GROUP", "admin")
COUNTERSIGN_SITE_URL = os.environ.get("COUNTERSIGN_SITE_URL", "http://localhost:8000")
COUNTERSIGN_WEBHOOK_ATTEMPTS = env_int("COUNTERSIGN_WEBHOOK_ATTEMPTS", 5)
COUNTERSIGN_WEBHOOK_BACKOFF_S = env_float("COUNTERSIGN_WEBHOOK_BACKOFF_S", 2.0)
COUNTERSIGN_WEBHOOK_TIMEOUT_S = env_float("COUNTERSIGN_WEBHOOK_TIMEOUT_S", 10.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}},
}

# --- Execution
COUNTERSIGN_MAX_ATTEMPTS = env_int("COUNTERSIGN_MAX_ATTEMPTS", 3)
COUNTERSIGN_RETRY_BACKOFF_S = env_float("COUNTERSIGN_RETRY_BACKOFF_S", 1.0)
COUNTERSIGN_MAX_REPLANS = env_int("COUNTERSIGN_MAX_REPLANS", 2)
COUNTERSIGN_DEADLINE_GRACE_S = env_int("COUNTERSIGN_DEADLINE_GRACE_S", 30)
COUNTERSIGN_RECONCILE_EVERY_S = env_int("COUNTERSIGN_RECONCILE_EVERY_S", 30)
# Recovery bounds (docs/deploy.md, "Recovery"): a queued step that no worker claimed is queued again after
# COUNTERSIGN_QUEUED_DEADLINE_S (a running one gets its tool's timeout + grace from the claim); a plan
# still planning after COUNTERSIGN_PLANNING_DEADLINE_S fails planning; a finished plan without its answer
# or replan gets its aftermath task again after COUNTERSIGN_AFTERMATH_DEADLINE_S (longer than the tasks'
# own time limits, so a slow LLM is not raced).
COUNTERSIGN_QUEUED_DEADLINE_S = env_float("COUNTERSIGN_QUEUED_DEADLINE_S", 300.0)
COUNTERSIGN_PLANNING_DEADLINE_S = env_float("COUNTERSIGN_PLANNING_DEADLINE_S", 600.0)
# After this long a plan still drafting says "planning is taking longer than usual".
COUNTERSIGN_PLANNING_SLOW_S = env_float("COUNTERSIGN_PLANNING_SLOW_S", 20.0)
COUNTERSIGN_AFTERMATH_DEADLINE_S = env_float("COUNTERSIGN_AFTERMATH_DEADLINE_S", 360.0)
# Extra modules that register tools at start-up (e.g. an organisation's own tools); comma-separated.
COUNTERSIGN_TOOL_MODULES = env_list("COUNTERSIGN_TOOL_MODULES")
CELERY_BEAT_SCHEDULE = {
    "reconcile-stuck-steps": {"task": "planning.tasks.reconcile_task", "schedule": float(COUNTERSIGN_RECONCILE_EVERY_S)},
}

# --- Sandbox (code as plan)
COUNTERSIGN_SANDBOX_TIMEOUT_S = env_float("COUNTERSIGN_SANDBOX_TIMEOUT_S", 5.0)
COUNTERSIGN_SANDBOX_MEMORY_MB = env_int("COUNTERSIGN_SANDBOX_MEMORY_MB", 256)
COUNTERSIGN_SANDBOX_OUTPUT_CHARS = env_int("COUNTERSIGN_SANDBOX_OUTPUT_CHARS", 20_000)

# --- Audit and metrics
# Signs exported chain heads; defaults to SECRET_KEY. Set a separate key to verify heads across key rotations.
COUNTERSIGN_AUDIT_HMAC_KEY = os.environ.get("COUNTERSIGN_AUDIT_HMAC_KEY", "")
# Estimated cost in USD per million tokens, by model: {"model": [input, output]}; JSON in the environment.
COUNTERSIGN_MODEL_PRICES = json.loads(
    os.environ.get("COUNTERSIGN_MODEL_PRICES", "") or '{"gpt-4.1-mini": [0.4, 1.6], "gpt-4.1": [2.0, 8.0], "gpt-4o-mini": [0.15, 0.6]}'
)
# What the model accepts (core/llm_capabilities.py): JSON or words, e.g. "no-temperature,max_completion_tokens,json_object".
COUNTERSIGN_LLM_CAPABILITIES = os.environ.get("COUNTERSIGN_LLM_CAPABILITIES", "")
# Added to max_completion_tokens for reasoning models, whose hidden reasoning counts against it.
COUNTERSIGN_LLM_REASONING_TOKENS = env_int("COUNTERSIGN_LLM_REASONING_TOKENS", 2000)
# Above this many tools, step arguments are sent as JSON strings instead of one typed branch per tool.
COUNTERSIGN_STRICT_SCHEMA_MAX_TOOLS = env_int("COUNTERSIGN_STRICT_SCHEMA_MAX_TOOLS", 60)
# What one plan may spend on LLM calls (planning, repairs, replans, steps, answers); empty = no limit.
COUNTERSIGN_PLAN_BUDGET_USD = env_float("COUNTERSIGN_PLAN_BUDGET_USD", 0.0) or None
COUNTERSIGN_PLAN_BUDGET_TOKENS = env_int("COUNTERSIGN_PLAN_BUDGET_TOKENS", 0) or None

# --- Queues per workload (docs/deploy.md): workers can specialise with `celery worker -Q steps`.
COUNTERSIGN_QUEUE_PLANNING = os.environ.get("COUNTERSIGN_QUEUE_PLANNING", "planning")
COUNTERSIGN_QUEUE_STEPS = os.environ.get("COUNTERSIGN_QUEUE_STEPS", "steps")
COUNTERSIGN_QUEUE_SANDBOX = os.environ.get("COUNTERSIGN_QUEUE_SANDBOX", "sandbox")
CELERY_TASK_ROUTES = {
    "planning.tasks.plan_generate_task": {"queue": COUNTERSIGN_QUEUE_PLANNING},
    "planning.tasks.replan_task": {"queue": COUNTERSIGN_QUEUE_PLANNING},
    "planning.tasks.compose_answer_task": {"queue": COUNTERSIGN_QUEUE_PLANNING},
    "planning.tasks.preflight_critic_task": {"queue": COUNTERSIGN_QUEUE_PLANNING},
    "planning.tasks.execute_step_task": {"queue": COUNTERSIGN_QUEUE_STEPS},
    "planning.tasks.code_dry_run_task": {"queue": COUNTERSIGN_QUEUE_SANDBOX},
}
