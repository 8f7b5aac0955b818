"""Every ``SQUADOPS_*`` environment variable, read in this one place."""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from api.auth import check_algorithms
from api.browser import origin_of
from domain.shared.ids import is_valid_id, is_valid_repo_slug
from domain.studio.squad import CLAUDE_CODE_CLI, CODEX
from domain.workspaces.model_routes import parse_prices, parse_upstream_models

DEFAULT_SQLITE_PATH = Path("var") / "squadops.db"
EXECUTION_PLANES = ("simulator", "local")
# Providers the local plane has a command line for (``workers.planes.local.launch``).
LOCAL_CLI_PROVIDERS = (CLAUDE_CODE_CLI, CODEX)
# Settings that hold secrets: each may instead be read from the file SQUADOPS_<NAME>_FILE
# names (how container secrets are mounted), so it need not sit in the environment.
SECRET_SETTINGS = (
    "database_url",
    "edge_jwt_key",
    "mcp_token_key",
    "api_keys",
    "model_proxy_token",
    "model_proxy_client_key",
    "upstream_anthropic_key",
    "upstream_openai_key",
    "error_tracking_token",
    "novu_api_key",
)  # and SQUADOPS_NOVU_SECRET_KEY, read on every request (workers.builders.notification_secret)
# Keys that sign or MAC something the service then trusts: at least this many bytes.
SIGNING_KEYS = ("edge_jwt_key", "mcp_token_key", "model_proxy_client_key")
MIN_KEY_BYTES = 32


class SettingsError(ValueError):
    """A ``SQUADOPS_*`` variable holds a value the service cannot use."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The service's configuration; the README's configuration table lists each field."""

    database_url: str = ""
    nats_url: str = ""
    # C19: a database that cannot be reached answers 503 within about 2 s: a wait for a
    # pooled connection, all of one request's waits together, and each statement are bounded.
    database_wait_seconds: float = 1.0
    database_request_wait_seconds: float = 1.5
    database_statement_seconds: float = 1.5
    # A stopping process lets its projector and fan-out catch up this long.
    shutdown_drain_seconds: float = 3.0
    host: str = "127.0.0.1"
    port: int = 8000
    env: str = "dev"
    log_format: str = "console"
    log_level: str = "info"
    demo: bool = False
    tick_seconds: float = 1.0
    max_active_runs: int = 64
    agent_domain: str = "agents.squadops.local"
    edge_jwt_key: str = ""
    edge_jwt_audience: str = ""
    edge_jwt_issuer: str = ""
    # The edge proxy's public signing keys (a JWK Set file path or an http(s) URL), and the
    # algorithms an assertion may use (default: HS256 with a key, RS256 and ES256 with a JWKS).
    edge_jwks: str = ""
    edge_jwt_algorithms: tuple[str, ...] = ()
    edge_jwks_cache_seconds: float = 300.0
    # The longest an edge assertion may be valid for (exp - iat, and exp - now).
    edge_jwt_max_lifetime_seconds: float = 24 * 3600.0
    # Browsers: origins besides the service's own (SQUADOPS_BASE_URL) that may send commands.
    allowed_origins: tuple[str, ...] = ()
    # Commands (POST/PUT/PATCH/DELETE) one principal may send a minute; 0: no limit.
    rate_limit_per_minute: int = 6000
    # A connection that has not sent a whole request head within this is closed.
    header_read_timeout_seconds: float = 10.0
    api_keys: tuple[str, ...] = ()
    projection_poll_seconds: float = 0.5
    projection_page_size: int = 2000
    # The projector's memory of documents between passes, all read models together.
    projection_cache_mib: int = 64
    projection_gap_timeout_seconds: float = 5.0
    # C19: reads given X-Squadops-Min-Position, and commands waiting for their own writes.
    min_position_wait_seconds: float = 2.0
    projector_heartbeat_seconds: float = 1.0
    projector_stale_seconds: float = 10.0
    health_max_lag_seconds: float = 5.0
    rebuild_page_size: int = 10_000
    rebuild_workers: int = 2
    # A rebuild process's documents in memory, all its read models together; 0: no bound.
    rebuild_memory_mib: int = 64
    live_stream_name: str = "PORTAL_LIVE_EVENTS"
    live_stream_max_age_seconds: float = 7 * 24 * 3600.0
    live_stream_max_bytes: int = 1024 * 1024 * 1024
    live_max_acks_in_flight: int = 256
    live_heartbeat_seconds: float = 15.0
    live_subject_prefix: str = "portal_live_events"
    live_stream_duplicate_window_seconds: float = 120.0
    live_memory_buffer_events: int = 10_000
    live_fanout_page_size: int = 2000
    live_gap_timeout_seconds: float = 0.2
    controller_timeout_seconds: float = 25.0
    strict_observation: bool = False
    watch_interval_seconds: float = 30.0
    project_assets_path: str = ""
    auto_recovery: bool = True
    # PostgreSQL connections of one process (see workers.bootstrap.connection_budget):
    # each pool keeps its minimum open and grows on demand to its maximum.
    event_store_pool_min: int = 1
    event_store_pool_max: int = 3
    read_model_pool_min: int = 1
    read_model_pool_max: int = 3
    # The API's copies of stored feeds (PostgreSQL): their bound in memory, in MiB; 0: none.
    read_copies_mib: int = 64
    base_url: str = "http://127.0.0.1:8000"
    model_proxy_aliases: tuple[tuple[str, str], ...] = ()
    # Execution planes (C21): the built-in simulator, or agent CLIs run as local processes.
    execution_plane: str = "simulator"
    # Simulator: tool calls a delivery lane makes after opening its pull request, waiting for
    # review (its mailbox is read meanwhile) before it finishes; 0: it finishes at once.
    simulator_review_calls: int = 0
    # Simulator: whether its agents misbehave at their seeded rates (stalls, lost sandboxes,
    # skipped pull requests, corrupt checkouts); false: never (a journey that must reach a PR).
    simulator_faults: bool = True
    data_dir: str = "var"
    local_agent_command: str = ""
    local_max_processes: int = 4
    local_first_tool_seconds: float = 120.0
    local_stop_grace_seconds: float = 5.0
    # A provider whose CLI runs here, taken by sessions whose provider has none (recorded as a switch).
    local_provider_fallback: str = ""
    # Extra command prefixes agents may run without asking (the project's build and test
    # commands), comma-separated: ``make check,tox -e py311``.
    local_allowed_commands: str = ""
    # The agent sandbox (issue 25): bubblewrap around every agent process, or none (refused
    # in production unless SQUADOPS_AGENT_SANDBOX_UNSAFE=1); extra host paths agents may read.
    agent_sandbox: str = "bwrap"
    agent_sandbox_unsafe: bool = False
    agent_sandbox_read_only: str = ""
    # The address agents (and links) reach this service at; "" = the address it listens on.
    public_url: str = ""
    # The agents' model endpoint (C22): "" = this service's own model proxy (/v1/model-proxy),
    # with a proxy token per agent; set, it is used as given with SQUADOPS_MODEL_PROXY_TOKEN.
    model_proxy_base_url: str = ""
    model_proxy_token: str = ""
    mcp_token_key: str = ""
    # The model proxy (issue 26): API roots and keys of the upstreams ("" = the built-in
    # model), alias -> upstream model (JSON, over the defaults), prices (JSON, over the
    # defaults), and how long an agent's proxy token is valid.
    upstream_anthropic_url: str = ""
    upstream_anthropic_key: str = ""
    upstream_openai_url: str = ""
    upstream_openai_key: str = ""
    model_proxy_upstream_models: str = ""
    model_prices: str = ""
    model_proxy_token_seconds: float = 24 * 3600.0
    # Jobs, sync and the gate: their files live under ``data_dir``.
    connector_dir: str = ""  # the local connector source; "" = <data_dir>/connectors
    vcs_dir: str = ""  # the gate's bare repositories; "" = <data_dir>/vcs
    vcs_base_url: str = "https://vcs.squadops.local"
    # Sources a binding may bring (``domain.projects.sources``): ':'-separated absolute
    # directories a local source must lie under ("": any path outside the service's data,
    # none at all under SQUADOPS_ENV=production), and whether a network source may be a
    # loopback, private or link-local address (an in-house git server).
    source_local_roots: str = ""
    source_private_hosts: bool = False
    gate_app_identity: str = "squadops-gate[bot]"
    gate_default_repo: str = "squadops/gate-default"
    power_device_addr: str = "127.0.0.1:9"
    power_device_timeout_seconds: float = 2.0
    job_poll_seconds: float = 0.25
    job_max_attempts: int = 3
    job_retry_base_seconds: float = 1.0
    job_retry_cap_seconds: float = 60.0
    job_lease_seconds: float = 300.0
    # Error-reporting DSNs for new projects (Sentry's client-keys API); empty: none.
    error_tracking_url: str = ""
    error_tracking_token: str = ""
    error_tracking_org: str = "squadops"
    # Notifications: Novu's trigger API when a URL is set, else the in-portal inbox. The
    # subscriber-hash secret is read from SQUADOPS_NOVU_SECRET_KEY on every request.
    novu_api_url: str = ""
    novu_api_key: str = ""
    novu_workflow_id: str = "squadops"
    novu_application_identifier: str = ""
    novu_socket_url: str = ""
    # The copilot's model: an OpenAI-compatible chat-completions endpoint; empty: built-in.
    model_proxy_url: str = ""
    copilot_model: str = "copilot"
    # Extra skill files (a directory of *.json) for GET /v1/skills, asked under a deadline.
    skills_path: str = ""
    skills_deadline_seconds: float = 5.0
    # Developer workspaces (issue 11): material, the meter, and the workspace controller.
    model_proxy_client_key: str = ""
    kube_api_server: str = "https://kube.squadops.local"
    kube_oidc_issuer: str = "https://idp.squadops.local/realms/squadops"
    kube_oidc_client_id: str = "kube-access"
    edge_oidc_client_id: str = "edge-web-ide"
    usage_metric_prefix: str = "squadops_dev_workspace_model"
    usage_dashboard_uid: str = "squadops-dev-workspace-usage"
    usage_dashboard_base_url: str = "http://127.0.0.1:3000"
    controller_host: str = "127.0.0.1"
    controller_port: int = 8001
    controller_interval_seconds: float = 5.0
    controller_reconcile_enabled: bool = True
    workspace_stale_seconds: float = 420.0
    workspace_idle_seconds: float = 1800.0
    workspace_tool_timeout_seconds: float = 300.0
    workspace_root: str = ""
    workspace_scratch_size: str = "10Gi"
    workspace_scratch_class: str = "scratch"
    workspace_scratch_access_mode: str = "ReadWriteOnce"

    @property
    def is_postgres(self) -> bool:
        return self.database_url.startswith(("postgresql://", "postgres://"))

    @property
    def sqlite_path(self) -> Path:
        if self.is_postgres:
            raise SettingsError("sqlite_path asked of a PostgreSQL configuration")
        if self.database_url.startswith("sqlite:///"):
            return Path(self.database_url.removeprefix("sqlite:///"))
        if self.database_url.startswith("sqlite://"):
            return Path(self.database_url.removeprefix("sqlite://"))
        return DEFAULT_SQLITE_PATH

    @property
    def connectors_path(self) -> Path:
        return Path(self.connector_dir or Path(self.data_dir) / "connectors")

    @property
    def vcs_path(self) -> Path:
        return Path(self.vcs_dir or Path(self.data_dir) / "vcs")

    @property
    def source_roots(self) -> tuple[Path, ...] | None:
        """The directories a local source must lie under; None: anywhere outside the
        service's data (unset, but for production, where unset means none)."""
        roots = tuple(Path(p) for p in self.source_local_roots.split(":") if p)
        if not roots and self.env != "production":
            return None
        return roots

    def replace(self, **changes: object) -> Settings:
        return msgspec.structs.replace(self, **changes)


_BOOL_TRUE = {"1", "true", "yes", "y", "on"}
_BOOL_FALSE = {"0", "false", "no", "n", "off", ""}


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _BOOL_TRUE:
        return True
    if value in _BOOL_FALSE:
        return False
    raise SettingsError(f"SQUADOPS_{name.upper()} must be a boolean, got {raw!r}")


def _number(name: str, raw: str, kind: type[int] | type[float]) -> int | float:
    try:
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"SQUADOPS_{name.upper()} must be a number, got {raw!r}") from None
    if value < 0:
        raise SettingsError(f"SQUADOPS_{name.upper()} must not be negative, got {raw!r}")
    return value


def _aliases(raw: str) -> tuple[tuple[str, str], ...]:
    """``provider=alias,provider=alias`` overrides of the model proxy alias table."""
    pairs = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        provider, sep, alias = item.partition("=")
        if not sep or not provider.strip() or not alias.strip():
            raise SettingsError(
                f"SQUADOPS_MODEL_PROXY_ALIASES entries are provider=alias, got {item!r}"
            )
        pairs.append((provider.strip(), alias.strip()))
    return tuple(pairs)


def _secret_file(name: str, path: str) -> str:
    """The content of a ``SQUADOPS_<NAME>_FILE``, without one trailing newline."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"SQUADOPS_{name.upper()}_FILE cannot be read: {exc}") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise SettingsError(f"SQUADOPS_{name.upper()}_FILE names an empty file ({path})")
    return text


def secret_value(environ: Mapping[str, str], name: str) -> str | None:
    """``SQUADOPS_<NAME>``, or the content of the file ``SQUADOPS_<NAME>_FILE`` names;
    None when neither is set, a SettingsError when both are."""
    variable, file_variable = f"SQUADOPS_{name.upper()}", f"SQUADOPS_{name.upper()}_FILE"
    raw, path = environ.get(variable), environ.get(file_variable)
    if raw is not None and path is not None:
        raise SettingsError(f"{variable} and {file_variable} are both set; set one of them")
    if path is not None:
        return _secret_file(name, path)
    return raw


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listening address or name) is this machine only."""
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings) -> None:
    """``SQUADOPS_ENV=production`` on a non-loopback address needs a way to verify the
    edge (a JWT key or JWKS): trusted headers there would let anyone claim any identity."""
    if settings.env == "production" and not is_loopback(settings.host) and not (settings.edge_jwt_key or settings.edge_jwks):
        raise SettingsError(
            f"SQUADOPS_ENV=production on {settings.host} (not loopback) needs SQUADOPS_EDGE_JWT_KEY "
            "or SQUADOPS_EDGE_JWKS: without one, the edge claim headers would be trusted as sent"
        )


def _check_keys(settings: Settings) -> None:
    for name in SIGNING_KEYS:
        value = getattr(settings, name)
        if value and len(value.encode()) < MIN_KEY_BYTES:
            raise SettingsError(f"SQUADOPS_{name.upper()} must be at least {MIN_KEY_BYTES} bytes, got {len(value.encode())}")
    if settings.edge_jwt_max_lifetime_seconds <= 0:
        raise SettingsError("SQUADOPS_EDGE_JWT_MAX_LIFETIME_SECONDS must be positive")
    if settings.header_read_timeout_seconds <= 0:
        raise SettingsError("SQUADOPS_HEADER_READ_TIMEOUT_SECONDS must be positive")
    for origin in settings.allowed_origins:
        if not origin_of(origin) or urlsplit(origin).path not in ("", "/"):
            raise SettingsError(f"SQUADOPS_ALLOWED_ORIGINS entries are scheme://host[:port], got {origin!r}")


def _check_edge(settings: Settings) -> None:
    try:
        check_algorithms(settings.edge_jwt_algorithms, secret=bool(settings.edge_jwt_key), jwks=bool(settings.edge_jwks))
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    if settings.edge_jwks and settings.edge_jwks_cache_seconds <= 0:
        raise SettingsError("SQUADOPS_EDGE_JWKS_CACHE_SECONDS must be positive")


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Builds settings from ``SQUADOPS_*`` variables (``os.environ`` by default)."""
    environ = os.environ if environ is None else environ
    fields = {f.name: f for f in msgspec.structs.fields(Settings)}
    values: dict[str, object] = {}
    for name, field in fields.items():
        raw = secret_value(environ, name) if name in SECRET_SETTINGS else environ.get(f"SQUADOPS_{name.upper()}")
        if raw is None:
            continue
        default = field.default
        if name == "model_proxy_aliases":
            values[name] = _aliases(raw)
        elif name in ("api_keys", "edge_jwt_algorithms", "allowed_origins"):
            values[name] = tuple(k.strip() for k in raw.split(",") if k.strip())
        elif isinstance(default, bool):
            values[name] = _bool(name, raw)
        elif isinstance(default, int):
            values[name] = int(_number(name, raw, int))
        elif isinstance(default, float):
            values[name] = float(_number(name, raw, float))
        else:
            values[name] = raw
    settings = Settings(**values)
    if settings.log_format not in ("console", "json"):
        raise SettingsError("SQUADOPS_LOG_FORMAT must be 'console' or 'json'")
    if not 0 < settings.controller_timeout_seconds < settings.watch_interval_seconds:
        raise SettingsError(
            "SQUADOPS_CONTROLLER_TIMEOUT_SECONDS must be positive and below "
            "SQUADOPS_WATCH_INTERVAL_SECONDS (the monitor polling cadence)"
        )
    if settings.projector_stale_seconds <= settings.projector_heartbeat_seconds:
        raise SettingsError(
            "SQUADOPS_PROJECTOR_STALE_SECONDS must exceed SQUADOPS_PROJECTOR_HEARTBEAT_SECONDS "
            "(a runner beats several times before it counts as gone)"
        )
    for pool in ("event_store", "read_model"):
        low, high = getattr(settings, f"{pool}_pool_min"), getattr(settings, f"{pool}_pool_max")
        if not high >= 1 or low > high:
            raise SettingsError(
                f"SQUADOPS_{pool.upper()}_POOL_MAX must be at least 1 and at least "
                f"SQUADOPS_{pool.upper()}_POOL_MIN, got min {low} and max {high}"
            )
    if settings.execution_plane not in EXECUTION_PLANES:
        raise SettingsError(
            f"SQUADOPS_EXECUTION_PLANE must be one of {', '.join(EXECUTION_PLANES)}, "
            f"got {settings.execution_plane!r}"
        )
    _check_sandbox(settings)
    if settings.local_max_processes < 1:
        raise SettingsError("SQUADOPS_LOCAL_MAX_PROCESSES must be at least 1")
    if settings.local_provider_fallback not in ("", *LOCAL_CLI_PROVIDERS):
        raise SettingsError(
            f"SQUADOPS_LOCAL_PROVIDER_FALLBACK must be one of {', '.join(LOCAL_CLI_PROVIDERS)} (or empty), "
            f"got {settings.local_provider_fallback!r}"
        )
    if settings.local_agent_command:
        try:
            shlex.split(settings.local_agent_command)
        except ValueError as exc:
            raise SettingsError(f"SQUADOPS_LOCAL_AGENT_COMMAND cannot be shell-split: {exc}") from None
    _check_jobs(settings)
    for path in settings.source_local_roots.split(":"):
        if path and not path.startswith("/"):
            raise SettingsError(f"SQUADOPS_SOURCE_LOCAL_ROOTS holds absolute directories (':'-separated), got {path!r}")
    _check_model_proxy(settings)
    _check_edge(settings)
    _check_keys(settings)
    check_exposure(settings)
    secret_value(environ, "novu_secret_key")  # read per request (workers.builders): checked here once
    if settings.kube_oidc_client_id == settings.edge_oidc_client_id:
        raise SettingsError("SQUADOPS_KUBE_OIDC_CLIENT_ID must be the kube-access client, not the edge/web-IDE client")
    if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", settings.usage_metric_prefix):
        raise SettingsError("SQUADOPS_USAGE_METRIC_PREFIX must be a Prometheus metric name")
    if settings.database_url and not (
        settings.is_postgres or settings.database_url.startswith("sqlite:")
    ):
        raise SettingsError(
            "SQUADOPS_DATABASE_URL must start with postgresql:// or sqlite:///"
        )
    return settings


def _check_sandbox(settings: Settings) -> None:
    """``SQUADOPS_AGENT_SANDBOX``: ``bwrap`` (default) or ``none``, and ``none`` never silently
    in production."""
    if settings.agent_sandbox not in ("bwrap", "none"):
        raise SettingsError(f"SQUADOPS_AGENT_SANDBOX must be 'bwrap' or 'none', got {settings.agent_sandbox!r}")
    if settings.agent_sandbox == "none" and settings.env == "production" and not settings.agent_sandbox_unsafe:
        raise SettingsError(
            "SQUADOPS_AGENT_SANDBOX=none runs agents unconfined (they can read the service's secrets and data); "
            "it is refused under SQUADOPS_ENV=production unless SQUADOPS_AGENT_SANDBOX_UNSAFE=1 is also set"
        )
    for path in settings.agent_sandbox_read_only.split(":"):
        if path and not path.startswith("/"):
            raise SettingsError(f"SQUADOPS_AGENT_SANDBOX_READ_ONLY holds absolute paths (':'-separated), got {path!r}")


def _check_model_proxy(settings: Settings) -> None:
    """The model proxy's upstream roots, alias table and prices (see the README's model proxy section)."""
    for name in ("upstream_anthropic_url", "upstream_openai_url"):
        url = getattr(settings, name)
        if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
            raise SettingsError(f"SQUADOPS_{name.upper()} must be an http(s) URL (the API's root), got {url!r}")
    for name, parse in (("model_proxy_upstream_models", parse_upstream_models), ("model_prices", parse_prices)):
        raw = getattr(settings, name)
        if raw:
            try:
                parse(raw)
            except ValueError as exc:
                raise SettingsError(f"SQUADOPS_{name.upper()} {exc}") from None
    if settings.model_proxy_token_seconds <= 0:
        raise SettingsError("SQUADOPS_MODEL_PROXY_TOKEN_SECONDS must be positive")


def _check_jobs(settings: Settings) -> None:
    """The jobs' and the gate's settings (see the README's jobs section)."""
    host, sep, port = settings.power_device_addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingsError(f"SQUADOPS_POWER_DEVICE_ADDR must be host:port, got {settings.power_device_addr!r}")
    if settings.job_max_attempts < 1:
        raise SettingsError("SQUADOPS_JOB_MAX_ATTEMPTS must be at least 1")
    if settings.job_lease_seconds <= 0 or settings.job_poll_seconds <= 0:
        raise SettingsError("SQUADOPS_JOB_LEASE_SECONDS and SQUADOPS_JOB_POLL_SECONDS must be positive")
    if settings.job_retry_cap_seconds < settings.job_retry_base_seconds:
        raise SettingsError("SQUADOPS_JOB_RETRY_CAP_SECONDS must not be below SQUADOPS_JOB_RETRY_BASE_SECONDS")
    for entry in settings.api_keys:  # tenant:key, or a plain key of the default tenant
        tenant, sep, key = entry.partition(":")
        if sep and (not is_valid_id(tenant) or not key):
            raise SettingsError("SQUADOPS_API_KEYS entries are tenant:key (tenant [A-Za-z0-9_-]) or a plain key")
    if not is_valid_repo_slug(settings.gate_default_repo):
        raise SettingsError(
            f"SQUADOPS_GATE_DEFAULT_REPO must be owner/name, each [A-Za-z0-9_-], got {settings.gate_default_repo!r}"
        )
    if not settings.gate_app_identity.strip():
        raise SettingsError("SQUADOPS_GATE_APP_IDENTITY must name the gate's application identity")
