"""`understudy-eval run` (or `understudy eval run`): drive an agent-mode eval with a command
of your own.

The service starts an eval's runs as live slots free (at most 20 live per tenant); the
harness polls the eval, and for every run it sees started hands the run's brief to the
command on stdin, with the run's FHIR base and the key in its environment. When the
command exits the harness finishes the run (grade now and end), whatever the command's
exit status: a command that crashed leaves a run that fails on its own merits. At most
`--parallel` commands run at once; a command still running well after its run's
deadline is stopped (the run has timed out by then anyway).

The client side of the testing API used here (`EvalApi`) is shared with the CI gate
(`understudy_client/ci.py`). This module talks to the service over HTTP only: it imports
nothing of the server, only the response models of `understudy_client.contract`, into
which it parses every answer (one that does not fit is an error, exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from understudy_client.contract.evals import Comparison as ComparisonView
from understudy_client.contract.evals import EvalList, EvalListItem, EvalRun, EvalView
from understudy_client.contract.runs import FinalRunView, RunView

DEFAULT_URL = "http://127.0.0.1:8000"
POLL_SECONDS = 0.5  # how often the eval is read: agents start promptly, the API barely notices
HTTP_TIMEOUT_SECONDS = 60.0  # a finish grades synchronously; leave it room
DEADLINE_GRACE_SECONDS = 10.0  # a command is stopped this long after its run's deadline
KILL_GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL of a command's process group
READ_CHUNK = 65536
BAR_WIDTH = 20
VALID = ("passed", "failed", "timed_out")  # outcomes that count towards the pass rate
EVAL_ENDED = ("completed", "cancelled")
EXIT_OK, EXIT_FAILED, EXIT_NOT_JUDGED, EXIT_INTERRUPTED = 0, 1, 2, 130
MAX_REVISION = 100  # the API's limit on `revision`
GIT_SECONDS = 5.0  # `git rev-parse` answers at once; a hung git must not hold up the eval


class HarnessError(Exception):
    """The job could not be done (service unreachable, request refused): exit 2."""


class Unreachable(HarnessError):
    pass


class ApiError(HarnessError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class UnexpectedAnswer(HarnessError):
    """The service answered 2xx with a body that is not what the API says it sends."""


T = TypeVar("T")
_EVAL: TypeAdapter[EvalView] = TypeAdapter(EvalView)
_EVALS: TypeAdapter[EvalList] = TypeAdapter(EvalList)
_COMPARISON: TypeAdapter[ComparisonView] = TypeAdapter(ComparisonView)
_RUN: TypeAdapter[RunView] = TypeAdapter(RunView)
_FINAL_RUN: TypeAdapter[FinalRunView] = TypeAdapter(FinalRunView)


@dataclass(frozen=True)
class Connection:
    url: str
    key: str


def connection_from_env(environ: Mapping[str, str] | None = None) -> Connection:
    """`UNDERSTUDY_URL` (default http://127.0.0.1:8000) and `UNDERSTUDY_API_KEY`."""
    env = os.environ if environ is None else environ
    key = env.get("UNDERSTUDY_API_KEY", "").strip()
    if not key:
        raise HarnessError("set UNDERSTUDY_API_KEY to the tenant's API key")
    url = (env.get("UNDERSTUDY_URL") or DEFAULT_URL).strip().rstrip("/")
    return Connection(url, key)


def _problem(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if not isinstance(body, dict):
        return str(body)[:500]
    message = str(body.get("detail") or body.get("title") or body)
    errors = body.get("errors") or []
    if errors:
        message += ": " + "; ".join(f"{e.get('path')}: {e.get('message')}" for e in errors)
    return message


class EvalApi:
    """The testing-API calls of the harness and the CI gate. Transport failures raise
    `Unreachable`, 4xx/5xx answers `ApiError` with the service's message."""

    def __init__(self, connection: Connection) -> None:
        self.url = connection.url
        self._client = httpx.AsyncClient(
            base_url=f"{connection.url}/api/testing",
            headers={"Authorization": f"Bearer {connection.key}"},
            timeout=HTTP_TIMEOUT_SECONDS,
        )

    async def __aenter__(self) -> EvalApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def _call(
        self,
        method: str,
        path: str,
        into: TypeAdapter[T],
        *,
        json: Any = None,
        params: Mapping[str, str | float] | None = None,
    ) -> T:
        try:
            response = await self._client.request(method, path, json=json, params=params)
        except httpx.TransportError as exc:
            raise Unreachable(
                f"cannot reach Understudy at {self.url}: {exc or type(exc).__name__}"
            ) from exc
        if response.status_code >= 400:
            raise ApiError(
                response.status_code,
                f"{method} {path} answered {response.status_code}: {_problem(response)}",
            )
        try:
            return into.validate_json(response.content)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            raise UnexpectedAnswer(
                f"{method} {path} answered a body this client does not understand: {problems}"
            ) from None

    async def create_eval(self, body: Mapping[str, Any]) -> EvalView:
        return await self._call("POST", "/evals", _EVAL, json=dict(body))

    async def get_eval(self, eval_id: str) -> EvalView:
        return await self._call("GET", f"/evals/{eval_id}", _EVAL)

    async def list_evals(self, label_prefix: str, limit: int = 50) -> list[EvalListItem]:
        params: dict[str, str | float] = {"labelPrefix": label_prefix, "limit": limit}
        return (await self._call("GET", "/evals", _EVALS, params=params)).evals

    async def compare(self, eval_id: str, baseline_id: str, alpha: float) -> ComparisonView:
        params: dict[str, str | float] = {"baseline": baseline_id, "alpha": alpha}
        return await self._call("GET", f"/evals/{eval_id}/compare", _COMPARISON, params=params)

    async def cancel_eval(self, eval_id: str) -> EvalView:
        return await self._call("POST", f"/evals/{eval_id}/cancel", _EVAL)

    async def get_run(self, run_id: str) -> RunView:
        return await self._call("GET", f"/runs/{run_id}", _RUN)

    async def finish_run(self, run_id: str) -> FinalRunView:
        return await self._call("POST", f"/runs/{run_id}/finish", _FINAL_RUN)


# --- progress -----------------------------------------------------------------------------


class Progress:
    """One status line on stderr: redrawn in place (`\\r`) on a terminal; elsewhere (CI
    logs) written as a new line whenever it changes. `line()` prints above it."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.tty = self.stream.isatty()
        self._status = ""
        self._drawn = False

    def show(self, view: EvalView) -> None:
        status = progress_text(view)
        if status == self._status:
            return
        self._status = status
        if self.tty:
            self.stream.write("\r\033[K" + status)
            self._drawn = True
        else:
            self.stream.write(status + "\n")
        self.stream.flush()

    def line(self, text: str) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\033[K" + text + "\n" + self._status)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


def progress_text(view: EvalView) -> str:
    """`eval_… [#####.....] 5/20 runs done · 4/5 passed (80%) · 4 live · 11 queued`"""
    counts, total = view.counts, view.total
    live, queued = counts.get("live", 0), counts.get("queued", 0)
    done = total - live - queued
    passes = counts.get("passed", 0)
    valid = sum(counts.get(s, 0) for s in VALID)
    filled = round(BAR_WIDTH * done / total) if total else 0
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    rate = f"{passes}/{valid} passed ({passes / valid:.0%})" if valid else "no verdicts yet"
    text = f"{view.id} [{bar}] {done}/{total} runs done · {rate}"
    if live:
        text += f" · {live} live"
    if queued:
        text += f" · {queued} queued"
    return text


# --- the agent command --------------------------------------------------------------------


@dataclass(frozen=True)
class AgentCommand:
    """A shell command run once per started run, and how many may run at once."""

    command: str
    parallel: int = 4


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the command's process group (the shell and what it started), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, None)):
        if process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), timeout=wait)


async def run_command(
    command: str,
    stdin_text: str,
    env: Mapping[str, str],
    *,
    prefix: str,
    budget: float,
    progress: Progress,
) -> int:
    """Run `command` through the shell with `stdin_text` on stdin; its stdout and stderr go
    to `progress` line by line, prefixed. Stopped after `budget` seconds. The exit status
    (negative: killed by that signal)."""
    process = await asyncio.create_subprocess_shell(
        command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        start_new_session=True,  # its own process group, so a stop reaches its children
    )
    assert process.stdin and process.stdout and process.stderr

    async def feed(writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            writer.write(stdin_text.encode())
            await writer.drain()
        writer.close()

    async def relay(reader: asyncio.StreamReader) -> None:
        pending = b""
        try:
            while chunk := await reader.read(READ_CHUNK):
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    progress.line(f"[{prefix}] {raw.decode(errors='replace').rstrip()}")
        finally:  # a last line without a newline, also when the command is stopped
            if pending:
                progress.line(f"[{prefix}] {pending.decode(errors='replace').rstrip()}")

    work = asyncio.gather(
        feed(process.stdin), relay(process.stdout), relay(process.stderr), process.wait()
    )
    # When cancelled, the gather ends with a CancelledError that nobody reads: read it,
    # or asyncio logs "exception was never retrieved".
    work.add_done_callback(lambda f: None if f.cancelled() else f.exception())
    try:
        await asyncio.wait_for(work, timeout=max(budget, 0.0))
    except TimeoutError:
        progress.line(f"[{prefix}] still running past the run's deadline: stopping it")
        await _stop(process)
    except BaseException:
        await _stop(process)
        raise
    returncode = await process.wait()
    return returncode


async def _drive_run(
    api: EvalApi,
    connection: Connection,
    eval_id: str,
    item: EvalRun,
    run_id: str,
    agent: AgentCommand,
    limit: asyncio.Semaphore,
    progress: Progress,
) -> None:
    async with limit:
        try:
            run = await api.get_run(run_id)
        except HarnessError as exc:
            progress.line(f"[{run_id}] not started: {exc}")
            return
        if run.status != "live":  # it ended (timed out, cancelled) while waiting its turn
            return
        budget = (run.deadline - datetime.now(UTC)).total_seconds() + DEADLINE_GRACE_SECONDS
        env = {
            **os.environ,
            "UNDERSTUDY_URL": connection.url,
            "UNDERSTUDY_API_KEY": connection.key,
            "UNDERSTUDY_RUN_ID": run_id,
            "UNDERSTUDY_FHIR_BASE": run.fhir_base,
            "UNDERSTUDY_EVAL_ID": eval_id,
            "UNDERSTUDY_SCENARIO_ID": item.scenario_id,
            "UNDERSTUDY_PERSONA": item.persona,
            "UNDERSTUDY_DEADLINE": run.deadline.isoformat(),
        }
        code = await run_command(
            agent.command,
            run.brief or "",
            env,
            prefix=run_id,
            budget=budget,
            progress=progress,
        )
        if code != 0:
            progress.line(f"[{run_id}] command exited with status {code}; finishing the run")
        try:
            await api.finish_run(run_id)
        except HarnessError as exc:
            progress.line(f"[{run_id}] could not finish the run: {exc}")


async def drive_eval(
    api: EvalApi,
    connection: Connection,
    eval_id: str,
    *,
    agent: AgentCommand | None,
    progress: Progress,
) -> EvalView:
    """Poll the eval until it is completed or cancelled and return its final view. With
    `agent`, every run seen live is handed to the command (at most `agent.parallel` at
    once) and finished when the command exits; the eval counts as done once those
    commands have exited too. Without, just wait (workflow mode: the team's automation
    does the work). Bound it with `asyncio.timeout` when it must not wait forever; when
    the wait is cancelled, so is the eval (its runs would otherwise stay live)."""
    limit = asyncio.Semaphore(agent.parallel if agent else 1)
    tasks: dict[str, asyncio.Task[None]] = {}
    try:
        while True:
            view = await api.get_eval(eval_id)
            progress.show(view)
            for task in tasks.values():
                if task.done():
                    task.result()  # a bug in a run's driver surfaces here, not in a log
            if agent is not None:
                for item in view.runs:
                    run_id = item.run_id
                    if run_id and item.status == "live" and run_id not in tasks:
                        tasks[run_id] = asyncio.create_task(
                            _drive_run(
                                api, connection, eval_id, item, run_id, agent, limit, progress
                            )
                        )
            if view.status == "cancelled" or (
                view.status == "completed" and all(t.done() for t in tasks.values())
            ):
                return view
            await asyncio.sleep(POLL_SECONDS)
    except asyncio.CancelledError:  # Ctrl-C, SIGTERM or a timeout: leave no run live
        with contextlib.suppress(HarnessError):
            await api.cancel_eval(eval_id)
        raise
    finally:
        pending = [t for t in tasks.values() if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        progress.close()


# --- reporting ----------------------------------------------------------------------------


def format_number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _of_revision(view: EvalView) -> str:
    return "" if view.revision is None else f" of revision {view.revision}"


def summary_lines(view: EvalView) -> list[str]:
    """The eval's result as plain text: pass rate, pass^k / pass@k, flaky cells,
    personas, exclusions and the most-failed checks."""
    lines = [f"eval {view.id} '{view.label}'{_of_revision(view)}: {view.status}"]
    summary = view.summary
    if summary is None:
        return lines
    lines.append(f"pass rate: {summary.pass_rate.text}")
    k = summary.k
    hat, at = format_number(summary.pass_hat_k), format_number(summary.pass_at_k)
    kline = f"pass^{k}: {hat} · pass@{k}: {at}"
    if summary.cells_left_out:
        kline += f" ({summary.cells_left_out} cells with fewer than {k} valid runs left out)"
    lines.append(kline)
    for cell in summary.flaky_cells:
        lines.append(
            f"flaky: {cell.scenario_id} × {cell.persona} ({cell.passes}/{cell.runs} passed)"
        )
    if len(summary.personas) > 1:
        for persona, rate in summary.personas.items():
            lines.append(f"persona {persona}: {rate.text}")
    excluded = summary.excluded.model_dump()
    if any(excluded.values()):
        lines.append(
            "left out of the rates: "
            + ", ".join(f"{count} {name}" for name, count in excluded.items() if count)
        )
    if summary.incomplete:
        lines.append("incomplete: more than 10% of the runs errored")
    if summary.most_failed_checks:
        lines.append("most-failed checks:")
        lines.extend(
            f"  {c.count}× {c.scenario_id} {c.expectation_id}: {c.label}"
            for c in summary.most_failed_checks
        )
    return lines


def eval_exit_code(view: EvalView) -> int:
    """0 when the eval completed; 1 when it was cancelled or is incomplete."""
    if view.status != "completed" or (view.summary is not None and view.summary.incomplete):
        return EXIT_FAILED
    return EXIT_OK


# --- the command --------------------------------------------------------------------------


def parse_personas(text: str) -> str | list[str]:
    """`baseline`, `all`, or a comma-separated list of persona names."""
    text = text.strip()
    if text in ("baseline", "all"):
        return text
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("personas: 'baseline', 'all' or names separated by ,")
    return names


def parse_ids(text: str) -> list[str]:
    ids = [s.strip() for s in text.split(",") if s.strip()]
    if not ids:
        raise argparse.ArgumentTypeError("give scenario ids separated by commas")
    return ids


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def revision_text(text: str) -> str:
    """`--revision`: 1 to 100 characters, or '' to send none."""
    text = text.strip()
    if len(text) > MAX_REVISION:
        raise argparse.ArgumentTypeError(f"at most {MAX_REVISION} characters, not {len(text)}")
    return text


def git_revision(cwd: str | os.PathLike[str] | None = None) -> str | None:
    """`git rev-parse --short HEAD` in `cwd` (default: the working directory); None when
    that is not a git checkout with a commit, or git is not installed."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and sha else None


def resolve_revision(
    explicit: str | None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> str | None:
    """The revision an eval is started for: `--revision` when given ('' for none), else
    `GITHUB_SHA`, else the short sha of HEAD when run in a git checkout, else none."""
    if explicit is not None:
        return explicit.strip()[:MAX_REVISION] or None
    env = os.environ if environ is None else environ
    sha = env.get("GITHUB_SHA", "").strip()
    if sha:
        return sha[:MAX_REVISION]
    return git_revision(cwd)


def eval_request(
    *,
    mode: str,
    label: str,
    scenarios: Sequence[str] | None,
    category: str | None,
    repeats: int,
    personas: str | list[str],
    timeout_seconds: int | None,
    revision: str | None = None,
) -> dict[str, Any]:
    """The body of `POST /api/testing/evals`."""
    body: dict[str, Any] = {"mode": mode, "label": label, "repeats": repeats}
    body["personas"] = personas
    if scenarios:
        body["scenarios"] = list(scenarios)
    elif category:
        body["scenarios"] = {"category": category}
    if timeout_seconds is not None:
        body["timeoutSeconds"] = timeout_seconds
    if revision:
        body["revision"] = revision
    return body


def add_scope_arguments(parser: argparse.ArgumentParser) -> None:
    """What the eval covers; shared by `eval run` and `eval ci`."""
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--scenarios", type=parse_ids, help="scenario ids, comma-separated (default: all)"
    )
    scope.add_argument("--category", help="every scenario of this category")
    parser.add_argument(
        "--personas",
        type=parse_personas,
        default="baseline",
        help="baseline (default), all, or persona names comma-separated",
    )


def add_revision_argument(parser: argparse.ArgumentParser) -> None:
    """What the eval is of; shared by `eval run` and `eval ci`."""
    parser.add_argument(
        "--revision",
        type=revision_text,
        help="the version of the system under test (default: $GITHUB_SHA, else `git "
        "rev-parse --short HEAD` in a git checkout, else none; '' for none)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--label", required=True, help="the eval's label, e.g. 'triage-agent v3'")
    parser.add_argument(
        "--agent-cmd",
        required=True,
        help="shell command run once per run: the brief on stdin; UNDERSTUDY_RUN_ID, "
        "UNDERSTUDY_FHIR_BASE, UNDERSTUDY_API_KEY, UNDERSTUDY_URL in its environment",
    )
    add_scope_arguments(parser)
    add_revision_argument(parser)
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        help="runs per scenario × persona, 1-5 (default 1)",
    )
    parser.add_argument("--timeout", type=positive_int, help="per-run deadline in seconds")
    parser.add_argument(
        "--parallel", type=positive_int, default=4, help="commands at once (default 4)"
    )


async def run_agent_eval(
    connection: Connection, args: argparse.Namespace, *, out: TextIO, progress: Progress
) -> int:
    body = eval_request(
        mode="agent",
        label=args.label,
        scenarios=args.scenarios,
        category=args.category,
        repeats=args.repeats,
        personas=args.personas,
        timeout_seconds=args.timeout,
        revision=resolve_revision(args.revision),
    )
    async with EvalApi(connection) as api:
        created = await api.create_eval(body)
        eval_id = created.id
        progress.line(
            f"eval {eval_id} '{args.label}'{_of_revision(created)}: {created.total} runs, "
            f"up to {args.parallel} agents at a time"
        )
        view = await drive_eval(
            api,
            connection,
            eval_id,
            agent=AgentCommand(args.agent_cmd, args.parallel),
            progress=progress,
        )
    for line in summary_lines(view):
        print(line, file=out)
    return eval_exit_code(view)


async def until_terminated(main: Coroutine[Any, Any, int]) -> int:
    """Run `main`, cancelling it on SIGTERM as asyncio.run does on Ctrl-C (CI runners
    stop a job with either), so it can cancel its eval and stop its commands."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await main
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def run(args: argparse.Namespace) -> int:
    """`understudy eval run`: 0 when the eval completed, 1 when it was cancelled or is
    incomplete, 2 when it could not be run (unreachable, refused), 130 on Ctrl-C."""
    try:
        connection = connection_from_env()
        return asyncio.run(
            until_terminated(
                run_agent_eval(connection, args, out=sys.stdout, progress=Progress(sys.stderr))
            )
        )
    except HarnessError as exc:
        print(f"understudy eval run: {exc}", file=sys.stderr)
        return EXIT_NOT_JUDGED
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("understudy eval run: interrupted; the eval was cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED
