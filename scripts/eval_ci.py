#!/usr/bin/env python3
"""Gate CI on an Understudy eval: start it, wait, compare with a baseline, exit 0/1/2.

Usage (UNDERSTUDY_URL and UNDERSTUDY_API_KEY in the environment):

    scripts/eval_ci.py --label "main $SHA" --baseline label:main --min-pass-rate 0.8 \\
        [--mode workflow|agent] [--agent-cmd CMD] [--scenarios a,b | --category C] \\
        [--repeats 3] [--personas baseline|all|a,b] [--alpha 0.05] [--require-baseline] \\
        [--revision REV] [--summary-file eval.md] [--junit-file eval.xml] [--timeout 3600]

The eval's revision (the version under test) is --revision, else $GITHUB_SHA, else
`git rev-parse --short HEAD` when run in a git checkout; `--revision ''` sends none.

Exit 0 pass, 1 fail (significant regression, pass rate under --min-pass-rate, eval
incomplete), 2 could not be judged (service unreachable, no baseline with
--require-baseline). The same as `understudy-eval ci` and `understudy eval ci`; the logic is
clients/python/understudy_client/ci.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Runnable from a checkout without installing the project first.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python"))

try:
    from understudy_client.ci import main
except ImportError as exc:  # exit 2 (not judged), never 1 (which reads as a regression)
    print(
        f"eval_ci.py: {exc}; install the client first (pip install ./clients/python)",
        file=sys.stderr,
    )
    raise SystemExit(2) from None

if __name__ == "__main__":
    raise SystemExit(main())
