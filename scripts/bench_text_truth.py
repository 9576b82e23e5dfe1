"""Text truth on its corpus: precision and recall per fact kind, and the cost per text.

    .venv/bin/python scripts/bench_text_truth.py [--repeat N]

A "positive" is a wrong text (it must fail `text-truth`): recall is the share of wrong
texts that fail, precision the share of failing texts that are wrong. The goal (issue
"Text truth"): every correct text passes (precision 100%), at least 97% of wrong ones
fail, per kind. The cost is the median time to grade one case's texts, caches cleared
(the ConText pipeline built once first), and the ConText call alone per text.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.grading.truth import context as ctx
from app.grading.truth import reader
from tests.grading.truth.cases import cases
from tests.grading.truth.world import truth


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    all_cases = cases()
    truth(all_cases[0].writes())  # build the pipelines once
    by_kind: dict[str, list[tuple[bool, bool]]] = {}
    times: list[float] = []
    for _ in range(args.repeat):
        for case in all_cases:
            reader._read_cache.clear()
            ctx._contexts_cached.cache_clear()
            start = time.perf_counter()
            result = truth(case.writes(), case.advice)
            times.append(time.perf_counter() - start)
            by_kind.setdefault(case.kind, []).append((not case.correct, result.passed is False))
    print(f"{'kind':<12} {'cases':>5} {'wrong':>5} {'precision':>9} {'recall':>7}")
    worst = True
    for kind, rows in sorted(by_kind.items()):
        rows = rows[: len(rows) // args.repeat]
        wrong = sum(1 for w, _ in rows if w)
        flagged = sum(1 for _, f in rows if f)
        hit = sum(1 for w, f in rows if w and f)
        precision = hit / flagged if flagged else 1.0
        recall = hit / wrong if wrong else 1.0
        worst = worst and precision == 1.0 and recall >= 0.97
        print(f"{kind:<12} {len(rows):>5} {wrong:>5} {precision:>9.1%} {recall:>7.1%}")
    text = "Your dose is lisinopril 20 mg once a day (not 10 mg). If it gets worse, call us."
    spans = [(24, 29), (46, 51)]
    ctx_times = []
    for _ in range(200):
        ctx._contexts_cached.cache_clear()
        start = time.perf_counter()
        ctx.contexts(text, spans)
        ctx_times.append(time.perf_counter() - start)
    print(
        f"grade one case (uncached): median {statistics.median(times) * 1000:.2f} ms, "
        f"p95 {sorted(times)[int(len(times) * 0.95)] * 1000:.2f} ms; "
        f"ConText per text: median {statistics.median(ctx_times) * 1000:.2f} ms"
    )
    print("goal met" if worst else "goal NOT met")
    return 0 if worst else 1


if __name__ == "__main__":
    raise SystemExit(main())
