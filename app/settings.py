"""Settings, read once from `UNDERSTUDY_*` environment variables and passed in."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LogLevel = Literal["critical", "error", "warning", "info", "debug"]
MAX_WEBHOOK_RETRIES = 20
DAY_SECONDS = 86_400


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="UNDERSTUDY_", extra="ignore")

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL (postgresql://user@host:port/db). Unset: a local server on "
        "127.0.0.1:LOCAL_POSTGRES_PORT if one answers, else an embedded server.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL (redis://host:port/db). Unset: a local server on "
        "127.0.0.1:LOCAL_REDIS_PORT if one answers, else an embedded server.",
    )
    local_postgres_port: int = Field(
        default=5432,
        ge=1,
        le=65535,
        description="Port probed for a local PostgreSQL when no URL is set.",
    )
    local_redis_port: int = Field(
        default=6379,
        ge=1,
        le=65535,
        description="Port probed for a local Redis when no URL is set.",
    )
    local_database: str = Field(
        default="understudy", description="Database created and used on a probed local server."
    )
    data_dir: Path = Field(
        default=Path(".understudy"), description="Where embedded servers keep their data."
    )
    host: str = Field(default="127.0.0.1", description="Address `serve` binds.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port `serve` binds.")
    smtp_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Port of the runs' SMTP server, which captures the mail a run's system "
        "sends (AUTH with the run id and auth token, no TLS; nothing is delivered); 0: any "
        "free port. Unset: no SMTP server (API processes on one machine would fight for it).",
    )
    smtp_host: str = Field(
        default="127.0.0.1", description="Address the runs' SMTP server binds (SMTP_PORT set)."
    )
    public_url: str | None = Field(
        default=None,
        description="Base URL clients use (for absolute links); default: taken from each request.",
    )
    keep_alive_seconds: int = Field(
        default=75,
        ge=1,
        le=3600,
        description="How long `serve` keeps an idle client connection open. Keep it above "
        "the idle time after which a load balancer in front reuses or drops its connections "
        "(HAProxy, nginx, cloud balancers: 5–60 s), or the balancer may send a request on a "
        "connection the API is closing and the client sees the connection reset.",
    )
    db_pool_size: int = Field(
        default=10, ge=2, le=200, description="PostgreSQL connections per process."
    )
    max_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest request body accepted.",
    )
    trace_default: bool = Field(
        default=False,
        description="Whether new tenants record every request; otherwise only while one of "
        "their runs is live.",
    )
    slot_weeks: int = Field(
        default=8, ge=1, le=52, description="Weeks of free canonical Slots kept ahead of today."
    )
    secret_key: str | None = Field(
        default=None,
        min_length=16,
        description="Signs console session cookies and CSRF tokens (keep it secret; every API "
        "process must share it). Unset: generated once and kept in DATA_DIR/console-secret.",
    )
    dev_tenant: str = Field(
        default="dev", description="Name of the development tenant `serve --dev` prints a key for."
    )
    log_level: LogLevel = Field(
        default="info",
        description="Log level of API and worker: info shows start-up lines, warnings, errors "
        "and one line per failed or slow (> 1 s) job; debug adds a line per job.",
    )
    daily_write_quota: int = Field(
        default=20_000,
        ge=0,
        description="FHIR writes per tenant per UTC day (setup writes of built-in scenarios "
        "are free).",
    )
    max_live_runs: int = Field(default=20, ge=1, le=10_000, description="Live runs per tenant.")
    webhook_retry_seconds: list[float] = Field(
        default=[1, 5, 30, 120, 600],
        description="Waits before each retry of a failed webhook delivery (JSON list); "
        "attempts = retries + 1.",
    )
    webhook_timeout_seconds: float = Field(
        default=10, gt=0, le=120, description="Per delivery attempt."
    )
    webhook_allow_private: bool = Field(
        default=True,
        description="Allow webhook URLs on loopback and private addresses (local development).",
    )
    llm_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible API base (…/v1) for the simulated patient and judges; "
        "unset: the scripted patient stand-in, and rubrics are not judged.",
    )
    llm_api_key: str | None = Field(default=None, description="Bearer key for the LLM API.")
    llm_model: str | None = Field(default=None, description="Model name sent to the LLM API.")
    llm_timeout_seconds: float = Field(default=20, gt=0, le=600, description="Per model call.")
    llm_max_retries: int = Field(default=2, ge=0, le=10, description="Retries on 429/5xx.")
    llm_calls_per_hour: int = Field(
        default=300, ge=0, description="Model calls per tenant per hour (patient and judges)."
    )
    queue_name: str = Field(
        default="understudy:queue", description="The Redis queue API and worker share."
    )
    grade_interval_seconds: int = Field(
        default=15, ge=1, le=60, description="How often the worker grades every live run with news."
    )
    settle_seconds: float = Field(
        default=5.0,
        ge=0,
        le=120,
        description="A run whose required checks all hold passes once the system under test "
        "has been quiet (no call, no write) this long, so extra work right after the job is "
        "still graded; finish ends it at once.",
    )

    mcp_allowed_hosts: list[str] = Field(
        default=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
        description="Host headers the MCP endpoint accepts (JSON list; 'name:*' allows any "
        'port; ["*"] turns the DNS-rebinding check off). PUBLIC_URL\'s host is always allowed.',
    )
    mcp_allowed_origins: list[str] = Field(
        default=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        description="Origin headers the MCP endpoint accepts from browsers (JSON list); "
        "requests without an Origin are always accepted.",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("webhook_retry_seconds")
    @classmethod
    def _retries(cls, value: list[float]) -> list[float]:
        if len(value) > MAX_WEBHOOK_RETRIES or any(not 0 < v <= DAY_SECONDS for v in value):
            raise ValueError(
                f"at most {MAX_WEBHOOK_RETRIES} waits, each more than 0 and at most a day"
            )
        return value

    def clone(self, **changes: object) -> Settings:
        """A copy with `changes` applied, validated like the environment's values."""
        return type(self).model_validate({**self.model_dump(), **changes})
