"""The `understudy` command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from app.embedded import Endpoints, close_endpoints, resolve_endpoints
from app.kit.urls import FHIR_PREFIX
from app.logs import LEVELS, configure_logging
from app.settings import Settings
from understudy_client.cli import add_eval_commands

if TYPE_CHECKING:
    from app.worker import WorkerThread

log = logging.getLogger("understudy.cli")

# Allocations between first-generation collections (default 700).
GC_THRESHOLD = 50_000


def migrations_dir() -> Path:
    # Beside the package in a checkout (editable install), or in the working directory
    # of a container that installed the package normally.
    for candidate in (Path(__file__).resolve().parent.parent / "migrations", Path("migrations")):
        if (candidate / "env.py").exists():
            return candidate.resolve()
    raise FileNotFoundError("the migrations/ folder was not found")


def _endpoints(settings: Settings, *, quiet: bool = False) -> tuple[Settings, Endpoints]:
    endpoints = resolve_endpoints(settings)
    if not quiet:
        for note in endpoints.notes:
            print(f"understudy: {note}", flush=True)
    return (
        settings.clone(database_url=endpoints.database_url, redis_url=endpoints.redis_url),
        endpoints,
    )


def migrate(database_url: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["database_url"] = database_url
    config.attributes["skip_logging"] = True
    command.upgrade(config, "head")


async def _dev_key(settings: Settings) -> str:
    """The development tenant's key: kept in the data directory so restarts print the same
    key; created (with its tenant) when missing or no longer valid."""
    return await _tenant_key(settings, settings.dev_tenant, "dev-key")


async def _tenant_key(settings: Settings, tenant_name: str, file_name: str) -> str:
    """A key of the tenant, kept in the data directory under `file_name`; the tenant and
    the key are created when missing or no longer valid."""
    from app.db import Scopes, open_database
    from app.errors import Unauthorized
    from app.runs.fhir_writes import FHIR_WRITES
    from app.tenants import service as tenants

    assert settings.database_url is not None
    key_file = settings.data_dir / file_name
    db = await open_database(settings.database_url, pool_size=2)
    try:
        if key_file.exists():
            key = key_file.read_text().strip()
            try:
                await tenants.authenticate(db.pool, f"Bearer {key}")
                return key
            except Unauthorized:  # a revoked or foreign key: make a new one below
                pass
        names = {t.name for t in await tenants.list_tenants(db.pool)}
        if tenant_name in names:
            async with Scopes(db.pool).transaction() as tx:
                key = await tenants.add_key(tx, tenant_name)
        else:
            async with Scopes(db.pool).transaction() as tx:
                _, key = await tenants.create_tenant(
                    tx,
                    tenant_name,
                    write_statement=FHIR_WRITES,
                    trace_enabled=settings.trace_default,
                    slot_weeks=settings.slot_weeks,
                )
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        key_file.write_text(key + "\n")
        key_file.chmod(0o600)
        return key
    finally:
        await db.close()


async def _signin_token(settings: Settings, key: str) -> str:
    """A one-time console sign-in token for the key's tenant (10 minutes, one use)."""
    from app.db import Scopes, open_database
    from app.tenants import service as tenants

    assert settings.database_url is not None
    db = await open_database(settings.database_url, pool_size=2)
    try:
        async with Scopes(db.pool).transaction() as tx:
            return await tenants.create_signin_token(tx, key)
    finally:
        await db.close()


async def _serve(settings: Settings, with_worker: bool) -> None:
    import uvicorn

    from app.main import create_app
    from app.worker import WorkerThread

    class Server(uvicorn.Server):
        # We own SIGINT/SIGTERM so API and worker stop together and exit cleanly.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        proxy_headers=True,
        access_log=False,
        timeout_keep_alive=settings.keep_alive_seconds,
    )
    server = Server(config)
    stopping = asyncio.Event()
    # Objects alive after start-up (imported models, routes) never need collecting; a
    # higher first-generation threshold keeps collection pauses out of request latency.
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 20, 20)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    worker = WorkerThread(settings, loop_factory=loop_factory()) if with_worker else None
    await serve_beside(server, worker, stopping)


class Serving(Protocol):
    """What `serve_beside` needs of a uvicorn server."""

    should_exit: bool

    async def serve(self) -> None: ...


# How long a stopping API waits for the worker's thread: its running jobs' grace (5 s,
# app/worker.py STOP_GRACE_SECONDS), then closing its pools and clients (Redis commands
# time out after 2 s). A thread still running then is left to the process exit.
WORKER_STOP_SECONDS = 15.0


async def serve_beside(
    server: Serving, worker: WorkerThread | None, stopping: asyncio.Event
) -> None:
    """Serve the API on this loop and run `worker` (started here) on its own thread until
    `stopping` is set or either ends; then both stop together, and the worker's thread is
    waited for. An error that ended either is raised. The worker outlives a Redis or
    PostgreSQL outage (`supervise` stops it, waits and starts it again), so it ends only
    when asked to or on a real error, and the API with it. `serve` and the tests' server
    (tests/conftest.py) both run this."""
    if worker is not None:
        worker.start()
    api = asyncio.create_task(server.serve(), name="api")
    asked = asyncio.create_task(stopping.wait(), name="stop")
    ended = asyncio.create_task(worker.wait(), name="worker") if worker else None
    watched: set[asyncio.Task[Any]] = {api, asked} | ({ended} if ended else set())
    done: set[asyncio.Task[Any]] = set()
    try:
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        if ended is not None and ended in done and ended.exception() is not None:
            log.critical("worker_failed: the API stops with it")
        for task in done:
            task.result()
    finally:
        server.should_exit = True
        asked.cancel()
        if worker is not None:
            worker.stop()
        await asyncio.gather(api, asked, return_exceptions=True)
        if ended is not None:
            await asyncio.wait({ended}, timeout=WORKER_STOP_SECONDS)
            if not ended.done():
                log.error("worker_thread_stuck: left to the process exit")
            elif ended not in done and (failure := ended.exception()) is not None:
                log.error("worker_stop_failed", exc_info=failure)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's loop when it is installed (it is, with uvicorn[standard] on Linux): it
    roughly doubles what one process serves compared with the default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(main)


def cmd_serve(args: argparse.Namespace) -> int:
    settings = Settings()
    overrides: dict[str, object] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port:
        overrides["port"] = args.port
    if args.log_level:
        overrides["log_level"] = args.log_level
    settings = settings.clone(**overrides)
    configure_logging(settings.log_level)
    settings, endpoints = _endpoints(settings)
    try:
        assert settings.database_url is not None
        migrate(settings.database_url)
        print("understudy: migrations applied", flush=True)
        host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
        base = settings.public_url or f"http://{host}:{settings.port}"
        print(f"understudy: console   {base}/", flush=True)
        if args.dev:
            key = asyncio.run(_dev_key(settings))
            token = asyncio.run(_signin_token(settings, key))
            print(f"understudy: development tenant '{settings.dev_tenant}'", flush=True)
            print(f"understudy: API key: {key}", flush=True)
            print(
                f"understudy: sign in   {base}/login/link/{token} (one use, 10 minutes)",
                flush=True,
            )
        print(f"understudy: FHIR base {base}{FHIR_PREFIX}", flush=True)
        print(f"understudy: API docs  {base}/docs", flush=True)
        if not args.no_worker:
            print("understudy: worker running in this process", flush=True)
        run_loop(_serve(settings, with_worker=not args.no_worker))
    except KeyboardInterrupt:
        pass
    finally:
        close_endpoints(endpoints)
    return 0


async def _work(settings: Settings) -> None:
    from app.worker import supervise

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    await supervise(settings, stopping)


def cmd_worker(args: argparse.Namespace) -> int:
    settings = Settings()
    if args.log_level:
        settings = settings.clone(log_level=args.log_level)
    configure_logging(settings.log_level)
    settings, endpoints = _endpoints(settings)
    try:
        run_loop(_work(settings))
    finally:
        close_endpoints(endpoints)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    settings, endpoints = _endpoints(Settings())
    try:
        assert settings.database_url is not None
        migrate(settings.database_url)
        print("understudy: migrations applied")
    finally:
        close_endpoints(endpoints)
    return 0


def cmd_tenants_create(args: argparse.Namespace) -> int:
    from app.db import Scopes, open_database
    from app.runs.fhir_writes import FHIR_WRITES
    from app.tenants import service as tenants
    from app.tenants.errors import TenantNameTaken

    settings, endpoints = _endpoints(Settings(), quiet=True)

    async def run() -> int:
        assert settings.database_url is not None
        db = await open_database(settings.database_url, pool_size=2)
        try:
            async with Scopes(db.pool).transaction() as tx:
                tenant, key = await tenants.create_tenant(
                    tx,
                    args.name,
                    write_statement=FHIR_WRITES,
                    trace_enabled=settings.trace_default,
                    slot_weeks=settings.slot_weeks,
                )
        except TenantNameTaken as exc:
            print(f"understudy: {exc.message}", file=sys.stderr)
            return 1
        finally:
            await db.close()
        print(f"tenant: {tenant.name} ({tenant.id})")
        print(f"key:    {key}")
        print("The key is shown once; store it now.")
        return 0

    try:
        return asyncio.run(run())
    finally:
        close_endpoints(endpoints)


def cmd_tenants_list(args: argparse.Namespace) -> int:
    from app.db import open_database
    from app.tenants import service as tenants

    settings, endpoints = _endpoints(Settings(), quiet=True)

    async def run() -> None:
        assert settings.database_url is not None
        db = await open_database(settings.database_url, pool_size=2)
        try:
            rows = await tenants.list_tenants(db.pool)
        finally:
            await db.close()
        print(f"{'name':<24} {'id':<36} {'created (UTC)':<20} {'keys':>4} {'resources':>9}")
        for t in rows:
            print(
                f"{t.name:<24} {t.id!s:<36} {t.created_at:%Y-%m-%d %H:%M:%S} "
                f"{t.keys:>4} {t.resources:>9}"
            )

    try:
        asyncio.run(run())
    finally:
        close_endpoints(endpoints)
    return 0


def cmd_tenants_trace(args: argparse.Namespace) -> int:
    from app.db import Scopes, open_database
    from app.tenants import service as tenants
    from app.tenants.errors import TenantNotFound

    settings, endpoints = _endpoints(Settings(), quiet=True)

    async def run() -> int:
        assert settings.database_url is not None
        db = await open_database(settings.database_url, pool_size=2)
        try:
            # One statement: no BEGIN/COMMIT around it.
            async with Scopes(db.pool).transaction(autocommit=True) as tx:
                await tenants.set_trace_by_name(tx, args.name, args.state == "on")
        except TenantNotFound as exc:
            print(f"understudy: {exc.message}", file=sys.stderr)
            return 1
        finally:
            await db.close()
        when = "always" if args.state == "on" else "only while one of its runs is live"
        print(f"tenant {args.name}: request trace recorded {when}")
        return 0

    try:
        return asyncio.run(run())
    finally:
        close_endpoints(endpoints)


CHECK_TENANT = "scenario-check"


def cmd_scenarios_check(args: argparse.Namespace) -> int:
    from app.orchestration import check

    logging.getLogger("httpx").setLevel(logging.WARNING)  # the check shows its own progress
    logging.getLogger("mcp").setLevel(logging.WARNING)
    settings, endpoints = _endpoints(Settings(), quiet=args.json)
    try:
        assert settings.database_url is not None
        migrate(settings.database_url)
        key = asyncio.run(_tenant_key(settings, CHECK_TENANT, "check-key"))
        # No worker and no queue: the check grades its own runs as it goes.
        checking = settings.clone(redis_url=None)
        paths = [Path(p) for p in args.paths]
        if not paths:
            from app.scenarios import service as scenarios_service

            paths = sorted(scenarios_service.builtin_dir().glob("*.json"))
        processes = max(1, min(args.processes or _default_processes(), len(paths)))
        reports: list[check.ScenarioReport] = []
        began = time.monotonic()
        progress = _Progress(len(paths), quiet=args.json)
        if processes == 1:
            run_loop(_check_scenarios(checking, key, paths, args.parallel, progress, reports))
        else:
            reports = _check_in_processes(checking, key, paths, args.parallel, processes, progress)
        order = {str(path): n for n, path in enumerate(paths)}
        reports.sort(key=lambda r: order.get(r.source, len(order)))
        took = time.monotonic() - began
    finally:
        close_endpoints(endpoints)
    if args.json:
        print(json.dumps([r.as_json() for r in reports], indent=2))
    else:
        print(check.render(reports))
        print(f"\nchecked {len(reports)} scenario(s) in {took:.1f} s")
    return 0 if reports and all(r.ok for r in reports) else 1


class _Progress:
    """`[k/n] id: ok` on stderr as each scenario's check ends, counted across the check's
    processes (a shared counter, inherited by the forked children)."""

    def __init__(self, total: int, *, quiet: bool) -> None:
        import multiprocessing

        self.total = total
        self.quiet = quiet
        self.done = multiprocessing.get_context("fork").Value("i", 0)

    def ended(self, scenario_id: str, ok: bool) -> None:
        with self.done.get_lock():
            self.done.value += 1
            count = self.done.value
        if not self.quiet:
            state = "ok" if ok else "FAILED"
            print(f"  [{count}/{self.total}] {scenario_id}: {state}", file=sys.stderr)


def _default_processes() -> int:
    """One check process per core, at most 4: the check is CPU-bound in Python (grading,
    replays, adversaries), so one process used one core of a 2-core machine."""
    return max(1, min(os.cpu_count() or 1, 4))


def _check_in_processes(
    settings: Settings,
    key: str,
    paths: list[Path],
    parallel: int,
    processes: int,
    progress: _Progress,
) -> list[Any]:
    """The paths split into `processes` shares of about equal size (by file size, largest
    first), each checked by a forked process of its own (its own app, pool and event
    loop, against the same database and check tenant); the reports share by share."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    shares: list[list[Path]] = [[] for _ in range(processes)]
    weights = [0] * processes
    for size, path in sorted(((_size(p), p) for p in paths), key=lambda sp: -sp[0]):
        lightest = weights.index(min(weights))
        shares[lightest].append(path)
        weights[lightest] += size
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        processes, mp_context=context, initializer=_check_child, initargs=(progress,)
    ) as pool:
        futures = [
            pool.submit(_check_share, settings, key, share, parallel) for share in shares if share
        ]
        return [report for future in futures for report in future.result()]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


_CHILD_PROGRESS: list[_Progress] = []


def _check_child(progress: _Progress) -> None:
    _CHILD_PROGRESS[:] = [progress]


def _check_share(settings: Settings, key: str, paths: list[Path], parallel: int) -> list[Any]:
    """In a check process: its share of the scenarios, checked as one process checks all."""
    out: list[Any] = []
    run_loop(_check_scenarios(settings, key, paths, parallel, _CHILD_PROGRESS[0], out))
    return out


async def _check_scenarios(
    settings: Settings,
    key: str,
    paths: list[Path],
    parallel: int,
    progress: _Progress,
    out: list[Any],
) -> None:
    from app.main import create_app
    from app.orchestration import check
    from app.scenarios import service as scenarios_service
    from app.tenants.service import authenticate

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        pool = app.state.db.pool
        tenant = await authenticate(pool, f"Bearer {key}")
        target = check.Target(
            app,
            app.state.scopes,
            tenant.id,
            f"Bearer {key}",
            "http://check.local",
            app.state.run_limits,
        )
        loaded: list[tuple[Path, scenarios_service.LoadedScenario]] = []
        for path in paths:
            found = await _load_for_check(
                app.state.scopes, tenant.id, path, *_read_scenario_file(path)
            )
            if isinstance(found, check.ScenarioReport):
                found.source = str(path)
                progress.ended(found.scenario_id, found.ok)
                out.append(found)
            else:
                loaded.append((path, found))
        gate = asyncio.Semaphore(max(1, parallel))

        async def one(path: Path, item: scenarios_service.LoadedScenario) -> check.ScenarioReport:
            async with gate:
                report = await check.check_scenario(target, item)
            report.source = str(path)
            progress.ended(report.scenario_id, report.ok)
            return report

        out.extend(await asyncio.gather(*(one(path, item) for path, item in loaded)))


def _read_scenario_file(path: Path) -> tuple[Any, str | None, bool]:
    """The parsed file (or the error reading it) and whether it lives in scenarios/."""
    from app.scenarios import service as scenarios_service

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"cannot read {path}: {exc}", False
    return document, None, path.resolve().parent == scenarios_service.builtin_dir()


async def _load_for_check(
    scopes: Any, tenant_id: Any, path: Path, document: Any, error: str | None, in_library: bool
) -> Any:
    """The scenario at `path`: the built-in one when the file is in scenarios/, else
    imported into the check tenant as a custom scenario; a report when it cannot be."""
    from app.orchestration import check
    from app.scenarios import service as scenarios_service
    from app.scenarios.validation import validate_scenario

    if error is not None:
        return check.ScenarioReport(str(path), problems=[error])
    scenario, problems, warnings = validate_scenario(document)
    name = str(document.get("id", path)) if isinstance(document, dict) else str(path)
    if problems or scenario is None:
        return check.ScenarioReport(
            name,
            problems=[f"{p.path}: {p.message}" for p in problems],
            warnings=[f"{p.path}: {p.message}" for p in warnings],
        )
    builtin = scenarios_service.builtin_scenarios().get(scenario.id)
    if builtin is not None:
        if in_library:
            return builtin
        return check.ScenarioReport(
            scenario.id, problems=[f"id '{scenario.id}' is a built-in scenario's: rename it"]
        )
    async with scopes.transaction() as tx:
        imported = await scenarios_service.import_scenario(tx, tenant_id, document, dry_run=False)
    return imported.loaded


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="understudy",
        description="FHIR R4 sandbox with a testing API. Settings come from UNDERSTUDY_* "
        "environment variables (see the README).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve",
        help="apply migrations, start the API (and the worker)",
        description="Apply migrations and start the API, with the worker in the same "
        "process unless --no-worker.",
        epilog="Several processes: start N of `understudy serve --no-worker --port P` and M "
        "of `understudy worker` on the same UNDERSTUDY_DATABASE_URL, UNDERSTUDY_REDIS_URL "
        "and UNDERSTUDY_SECRET_KEY, behind any load balancer (no stickiness needed); a "
        "Procfile and what each part needs to grow are in docs/scaling.md. Neither "
        "process exits when PostgreSQL or Redis goes away: they wait and carry on.",
    )
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default 8000)")
    serve.add_argument("--no-worker", action="store_true", help="do not run the worker in-process")
    serve.add_argument(
        "--log-level",
        choices=LEVELS,
        help="default info (UNDERSTUDY_LOG_LEVEL): start-up lines, warnings, errors, failed "
        "and slow jobs; debug adds a line per job",
    )
    serve.add_argument(
        "--dev", action="store_true", help="ensure a development tenant; print its key"
    )
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help="run the background worker")
    worker.add_argument(
        "--log-level", choices=LEVELS, help="default info (UNDERSTUDY_LOG_LEVEL); debug: per job"
    )
    worker.set_defaults(func=cmd_worker)

    mig = sub.add_parser("migrate", help="apply database migrations")
    mig.set_defaults(func=cmd_migrate)

    tenants = sub.add_parser("tenants", help="manage tenants")
    tsub = tenants.add_subparsers(dest="tenants_command", required=True)
    create = tsub.add_parser("create", help="create a tenant and print its key (once)")
    create.add_argument("name")
    create.set_defaults(func=cmd_tenants_create)
    lst = tsub.add_parser("list", help="list tenants")
    lst.set_defaults(func=cmd_tenants_list)
    trace = tsub.add_parser(
        "trace", help="record every request of a tenant (on), or only while a run is live (off)"
    )
    trace.add_argument("name")
    trace.add_argument("state", choices=["on", "off"])
    trace.set_defaults(func=cmd_tenants_trace)

    scenarios = sub.add_parser("scenarios", help="work with scenarios")
    ssub = scenarios.add_subparsers(dest="scenarios_command", required=True)
    sc_check = ssub.add_parser(
        "check",
        help="check scenarios are fair tests: valid, oracle passes, nothing fails, "
        "near misses fail (exit 1 on any failure)",
    )
    sc_check.add_argument(
        "paths", nargs="*", help="scenario files (default: every built-in scenario)"
    )
    sc_check.add_argument("--json", action="store_true", help="print the reports as JSON")
    sc_check.add_argument(
        "--parallel", type=int, default=4, help="scenarios checked at once per process (default 4)"
    )
    sc_check.add_argument(
        "--processes",
        type=int,
        default=0,
        help="check processes, each with a share of the scenarios (default: one per core, "
        "at most 4; 1 checks them all in this one)",
    )
    sc_check.set_defaults(func=cmd_scenarios_check)

    evals = sub.add_parser(
        "eval", help="run evals against a server (UNDERSTUDY_URL, UNDERSTUDY_API_KEY)"
    )
    # The commands of the standalone client (`understudy-eval`), whose logic lives there.
    add_eval_commands(evals.add_subparsers(dest="eval_command", required=True))
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TZ", "UTC")
    configure_logging("info")
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except ValidationError as exc:
        # A setting out of its bounds: name the variable, no traceback.
        for error in exc.errors():
            name = "UNDERSTUDY_" + "_".join(str(p) for p in error["loc"]).upper()
            print(f"understudy: {name}: {error['msg']}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    raise SystemExit(main())
