"""`understudy-eval`: run evals against an Understudy server and gate CI on them.

    understudy-eval run --agent-cmd CMD [scope]        drive an agent-mode eval
    understudy-eval ci --label L [--baseline label:main] [--min-pass-rate 0.8] ...
    understudy-eval compare CURRENT BASELINE            gate two evals that already ran

UNDERSTUDY_URL (default http://127.0.0.1:8000) and UNDERSTUDY_API_KEY say where and as
whom. Exit 0 pass, 1 fail, 2 could not be judged, 130 interrupted. The server's
`understudy eval …` commands are these same commands.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from understudy_client import ci, harness


def _quiet_http_log() -> None:
    # httpx logs every request at INFO; the eval commands show their own progress.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _run(args: argparse.Namespace) -> int:
    _quiet_http_log()
    return harness.run(args)


def _ci(args: argparse.Namespace) -> int:
    _quiet_http_log()
    return ci.run(args)


def _compare(args: argparse.Namespace) -> int:
    _quiet_http_log()
    return ci.compare(args)


def add_eval_commands(commands: Any) -> None:
    """The `run`, `ci` and `compare` subcommands, on `commands` (the result of an
    ArgumentParser's add_subparsers)."""
    eval_run = commands.add_parser(
        "run", help="run an agent-mode eval, handing each run's brief to --agent-cmd"
    )
    harness.add_arguments(eval_run)
    eval_run.set_defaults(func=_run)
    eval_ci = commands.add_parser(
        "ci", help="run an eval, compare with a baseline, exit 0/1/2 (the CI gate)"
    )
    ci.add_arguments(eval_ci)
    eval_ci.set_defaults(func=_ci)
    eval_compare = commands.add_parser(
        "compare", help="compare two evals that already ran, exit 0/1/2 by the gate's rules"
    )
    ci.add_compare_arguments(eval_compare)
    eval_compare.set_defaults(func=_compare)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="understudy-eval",
        description="Run Understudy evals and gate CI on them (UNDERSTUDY_URL, "
        "UNDERSTUDY_API_KEY). Exit 0 pass, 1 fail, 2 could not be judged.",
    )
    add_eval_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TZ", "UTC")
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
