"""Eval statistics (docs: docs/evals.md). Pure functions, standard library only.

Everything that is a probability over counts is computed exactly: binomial
coefficients with `math.comb`, hypergeometric weights as exact integers, ratios with
`fractions.Fraction`, and only the final value is turned into a float. So a large cell
neither overflows nor loses precision, and the two-sided test's "f(x) <= f(T)" is an
exact comparison (no tolerance fudge).

Terms:

- a *cell* is one scenario x persona; `n` its valid runs (passed + failed + timed out),
  `c` its passes. Cancelled and errored runs are left out of rates (see `Outcomes`).
- in a comparison, A is the baseline eval and B the current one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypedDict

Z95 = 1.959964
Z_POWER80 = 0.841621  # one-sided z for 80% power, used by the MDE
DEFAULT_ALPHA = 0.05
MIN_INFORMATIVE_CELLS = 3  # fewer -> underpowered
MIN_VALID_RUNS_PER_SIDE = 20  # fewer on either side -> underpowered
INCOMPLETE_ERRORED_SHARE = Fraction(1, 10)  # more errored runs than this -> incomplete
NO_DISCORDANT_EVIDENCE = "no discordant evidence"
MDE_SENTENCE = "changes smaller than the MDE cannot be told from noise here"

CellKey = tuple[str, str]  # (scenario id, persona)
Label = Literal["regressed", "improved", "same", "new", "removed"]


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def _check_counts(c: int, n: int) -> None:
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")


def wilson(c: int, n: int, z: float = Z95) -> tuple[float, Interval] | None:
    """Pass rate c/n with its Wilson score interval; None when n == 0 (no rate, never 0%).

    The interval is clamped to [0, 1] (rounding can put an end a hair outside)."""
    _check_counts(c, n)
    if n == 0:
        return None
    p = c / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # At c == 0 (c == n) the low (high) end is exactly 0 (1); floats can miss it by an ulp.
    low = 0.0 if c == 0 else max(0.0, centre - half)
    high = 1.0 if c == n else min(1.0, centre + half)
    return p, Interval(low, high)


def _check_k(n: int, c: int, k: int) -> None:
    _check_counts(c, n)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if k > n:
        raise ValueError(f"k={k} exceeds the cell's {n} valid runs; leave the cell out")


def _pass_at_k_exact(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))  # comb(m, k) == 0 when m < k


def _pass_hat_k_exact(n: int, c: int, k: int) -> Fraction:
    return Fraction(math.comb(c, k), math.comb(n, k))  # 0 when c < k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k)/C(n, k): chance at least one of k draws passes.
    Requires 1 <= k <= n (ValueError otherwise)."""
    _check_k(n, c, k)
    return float(_pass_at_k_exact(n, c, k))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k = C(c, k)/C(n, k): chance all of k draws pass. Requires 1 <= k <= n."""
    _check_k(n, c, k)
    return float(_pass_hat_k_exact(n, c, k))


@dataclass(frozen=True)
class Cell:
    """One scenario x persona: `n` valid runs, `c` passes."""

    key: CellKey
    n: int
    c: int

    def __post_init__(self) -> None:
        _check_counts(self.c, self.n)


def _eval_mean(
    cells: Sequence[Cell], k: int, one: Callable[[int, int, int], Fraction]
) -> tuple[float | None, int]:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    kept = [cell for cell in cells if cell.n >= k]
    left_out = len(cells) - len(kept)
    if not kept:
        return None, left_out
    total = sum((one(cell.n, cell.c, k) for cell in kept), Fraction(0))
    return float(total / len(kept)), left_out


def eval_pass_at_k(cells: Sequence[Cell], k: int) -> tuple[float | None, int]:
    """Mean pass@k over cells with n >= k, and how many cells were left out (n < k).
    None when no cell has k valid runs."""
    return _eval_mean(cells, k, _pass_at_k_exact)


def eval_pass_hat_k(cells: Sequence[Cell], k: int) -> tuple[float | None, int]:
    """Mean pass^k over cells with n >= k, and how many cells were left out (n < k).
    With every cell at exactly k runs this is the share of cells where every repeat
    passed."""
    return _eval_mean(cells, k, _pass_hat_k_exact)


def is_flaky(cell: Cell) -> bool:
    """Some but not all valid runs passed: 0 < c < n."""
    return 0 < cell.c < cell.n


@dataclass(frozen=True)
class Outcomes:
    """Run outcome counts (for a cell or a whole eval). Timeouts are failures;
    cancelled and errored runs are excluded from rates and reported separately."""

    passed: int
    failed: int
    timed_out: int
    cancelled: int
    errored: int

    def __post_init__(self) -> None:
        if min(self.passed, self.failed, self.timed_out, self.cancelled, self.errored) < 0:
            raise ValueError("outcome counts must not be negative")

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.timed_out + self.cancelled + self.errored

    @property
    def valid(self) -> int:
        """Runs that count towards rates: passed + failed + timed out."""
        return self.passed + self.failed + self.timed_out

    @property
    def passes(self) -> int:
        return self.passed

    @property
    def excluded(self) -> int:
        """Cancelled + errored: left out of rates."""
        return self.cancelled + self.errored

    @property
    def incomplete(self) -> bool:
        """More than 10% of all runs errored."""
        return self.errored > INCOMPLETE_ERRORED_SHARE * self.total

    def cell(self, key: CellKey) -> Cell:
        return Cell(key=key, n=self.valid, c=self.passes)


def _le_two_thirds(x: Cell, y: Cell) -> bool:
    """rate(x) <= (2/3) rate(y), exactly (both n > 0)."""
    return 3 * x.c * y.n <= 2 * y.c * x.n


def cell_label(a: Cell, b: Cell) -> Label:
    """Label a matched cell, baseline `a` against current `b`.

    `regressed`: the rate fell by a third or more of its baseline value (b <= 2/3 a with
    a > 0), or the baseline passed every repeat and the current does not; `improved` the
    mirror image; `same` otherwise. A side with no valid runs has no rate: `same`."""
    if a.n == 0 or b.n == 0:
        return "same"
    a_all, b_all = a.c == a.n, b.c == b.n
    if (a.c > 0 and _le_two_thirds(b, a)) or (a_all and not b_all):
        return "regressed"
    if (b.c > 0 and _le_two_thirds(a, b)) or (b_all and not a_all):
        return "improved"
    return "same"


def _hypergeometric_weights(a: Cell, b: Cell) -> tuple[int, list[int]]:
    """Null distribution of the current passes X given the cell's total passes t, as
    exact integer weights: weights[i] = C(n_B, lo+i) C(n_A, t-lo-i), summing to
    C(n_A+n_B, t). Returns (lo, weights); lo is the smallest attainable X."""
    t = a.c + b.c
    lo = max(0, t - a.n)
    hi = min(b.n, t)
    return lo, [math.comb(b.n, x) * math.comb(a.n, t - x) for x in range(lo, hi + 1)]


def is_informative(a: Cell, b: Cell) -> bool:
    """The cell's null distribution has more than one point (not all-pass or all-fail on
    both sides, and runs on both sides)."""
    t = a.c + b.c
    return a.n > 0 and b.n > 0 and 0 < t < a.n + b.n


def fisher_one_sided_worse(a: Cell, b: Cell) -> float:
    """One-sided Fisher exact p for "current (b) is worse": P(X <= c_B) under the
    hypergeometric null with the cell's total passes fixed. 1.0 for an uninformative
    cell."""
    lo, weights = _hypergeometric_weights(a, b)
    return float(Fraction(sum(weights[: b.c - lo + 1]), sum(weights)))


@dataclass(frozen=True)
class StratifiedTest:
    """Exact conditional (stratified permutation / exact CMH) test over matched cells.

    `t` is T = sum of current passes, `expected` its null mean E[T]. `p_regress` and
    `p_improve` are one-sided mid-p values; `p_regress_plain` the plain exact one-sided
    P(X <= T). With no informative cell every p is 1 and `reason` says why."""

    t: int
    expected: float
    p_two: float
    p_regress: float
    p_improve: float
    informative_cells: int
    reason: str | None
    p_regress_plain: float


def _convolve(left: list[int], right: list[int]) -> list[int]:
    out = [0] * (len(left) + len(right) - 1)
    for i, u in enumerate(left):
        if u:
            for j, v in enumerate(right):
                out[i + j] += u * v
    return out


def stratified_exact_test(pairs: Iterable[tuple[Cell, Cell]]) -> StratifiedTest:
    """Pairs are (baseline A, current B) per matched cell. The null distribution of T is
    the convolution of the per-cell hypergeometric distributions (exact integer DP):

        p_two     = sum f(x) over x with f(x) <= f(T)
        p_regress = sum_{x<T} f(x) + f(T)/2
        p_improve = sum_{x>T} f(x) + f(T)/2

    Uninformative cells shift T by a constant and fall out on their own."""
    t_observed = 0
    offset = 0  # smallest attainable T
    expected = Fraction(0)
    distribution = [1]
    informative = 0
    for a, b in pairs:
        t_observed += b.c
        if a.n + b.n > 0:
            expected += Fraction((a.c + b.c) * b.n, a.n + b.n)
        lo, weights = _hypergeometric_weights(a, b)
        offset += lo
        if len(weights) > 1:
            informative += 1
            distribution = _convolve(distribution, weights)
    if informative == 0:
        return StratifiedTest(
            t=t_observed,
            expected=float(expected),
            p_two=1.0,
            p_regress=1.0,
            p_improve=1.0,
            informative_cells=0,
            reason=NO_DISCORDANT_EVIDENCE,
            p_regress_plain=1.0,
        )
    total = sum(distribution)
    i = t_observed - offset
    at = distribution[i]
    below = sum(distribution[:i])
    above = total - below - at
    two = sum(w for w in distribution if w <= at)
    return StratifiedTest(
        t=t_observed,
        expected=float(expected),
        p_two=float(Fraction(two, total)),
        p_regress=float(Fraction(2 * below + at, 2 * total)),
        p_improve=float(Fraction(2 * above + at, 2 * total)),
        informative_cells=informative,
        reason=None,
        p_regress_plain=float(Fraction(below + at, total)),
    )


def newcombe(a_c: int, a_n: int, b_c: int, b_n: int, z: float = Z95) -> tuple[float, Interval]:
    """Δ = p_B - p_A with Newcombe's hybrid score interval built from the two Wilson
    intervals. Both sides need valid runs (ValueError otherwise)."""
    wa, wb = wilson(a_c, a_n, z), wilson(b_c, b_n, z)
    if wa is None or wb is None:
        raise ValueError("newcombe needs valid runs on both sides")
    (p_a, ci_a), (p_b, ci_b) = wa, wb
    delta = p_b - p_a
    lower = delta - math.sqrt((p_b - ci_b.low) ** 2 + (ci_a.high - p_a) ** 2)
    upper = delta + math.sqrt((ci_b.high - p_b) ** 2 + (p_a - ci_a.low) ** 2)
    return delta, Interval(lower, upper)


def mde(a_n: int, b_n: int, pooled_p: float) -> float:
    """Minimum detectable effect at alpha 0.05 two-sided and 80% power:
    (1.959964 + 0.841621) * sqrt(p(1-p)(1/N_A + 1/N_B)). Changes smaller than it cannot
    be told from noise. Both sides need valid runs (ValueError otherwise)."""
    if a_n <= 0 or b_n <= 0:
        raise ValueError("mde needs valid runs on both sides")
    if not 0.0 <= pooled_p <= 1.0:
        raise ValueError(f"pooled_p must be in [0, 1], got {pooled_p}")
    return (Z95 + Z_POWER80) * math.sqrt(pooled_p * (1 - pooled_p) * (1 / a_n + 1 / b_n))


class CellVerdict(TypedDict):
    """One cell of a comparison. `a`/`b` are None for new/removed cells; `fisher_p` (the
    one-sided Fisher p for "current is worse") is None unless the cell is matched;
    `comparable` is False when the scenario hash differs between the evals (the cell is
    then left out of the overall test and of the gate's regression warnings) and None
    for new/removed cells (nothing to compare)."""

    key: CellKey
    label: Label
    a: Cell | None
    b: Cell | None
    fisher_p: float | None
    comparable: bool | None


@dataclass(frozen=True)
class Comparison:
    """Baseline (A) vs current (B). The overall test, Δ and MDE use the matched,
    comparable cells only; `a_c/a_n` and `b_c/b_n` are those cells' totals. `delta`,
    `delta_interval` and `mde` are None when a side has no valid runs there."""

    cells: list[CellVerdict]
    overall: StratifiedTest
    a_c: int
    a_n: int
    b_c: int
    b_n: int
    delta: float | None
    delta_interval: Interval | None
    mde: float | None
    underpowered: bool
    exceeds_noise: bool
    significant_regression: bool
    alpha: float

    @property
    def regressed_cells(self) -> list[CellVerdict]:
        """Matched, comparable cells labelled `regressed` (pointers, not the decision)."""
        return [v for v in self.cells if v["label"] == "regressed" and v["comparable"]]

    @property
    def not_comparable_cells(self) -> list[CellVerdict]:
        return [v for v in self.cells if v["comparable"] is False]


def _comparable(
    key: CellKey,
    hashes_a: Mapping[CellKey, str] | None,
    hashes_b: Mapping[CellKey, str] | None,
) -> bool:
    """Unknown hashes (either side) are taken as unchanged."""
    if hashes_a is None or hashes_b is None:
        return True
    ha, hb = hashes_a.get(key), hashes_b.get(key)
    return ha is None or hb is None or ha == hb


def compare(
    baseline: Mapping[CellKey, Cell],
    current: Mapping[CellKey, Cell],
    *,
    alpha: float = DEFAULT_ALPHA,
    hashes_a: Mapping[CellKey, str] | None = None,
    hashes_b: Mapping[CellKey, str] | None = None,
) -> Comparison:
    """Label every cell and run the overall test over matched, comparable cells.
    Cells are listed in key order."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    verdicts: list[CellVerdict] = []
    pairs: list[tuple[Cell, Cell]] = []
    for key in sorted(set(baseline) | set(current)):
        a, b = baseline.get(key), current.get(key)
        if a is None or b is None:
            label: Label = "new" if a is None else "removed"
            verdicts.append(
                CellVerdict(key=key, label=label, a=a, b=b, fisher_p=None, comparable=None)
            )
            continue
        comparable = _comparable(key, hashes_a, hashes_b)
        verdicts.append(
            CellVerdict(
                key=key,
                label=cell_label(a, b),
                a=a,
                b=b,
                fisher_p=fisher_one_sided_worse(a, b),
                comparable=comparable,
            )
        )
        if comparable:
            pairs.append((a, b))
    overall = stratified_exact_test(pairs)
    a_c = sum(a.c for a, _ in pairs)
    a_n = sum(a.n for a, _ in pairs)
    b_c = sum(b.c for _, b in pairs)
    b_n = sum(b.n for _, b in pairs)
    delta: float | None = None
    interval: Interval | None = None
    effect: float | None = None
    if a_n > 0 and b_n > 0:
        delta, interval = newcombe(a_c, a_n, b_c, b_n)
        pooled = (a_c + b_c) / (a_n + b_n)
        # With every run passing (or failing) on both sides the formula gives 0, which
        # would claim any change is detectable: there is no MDE to report then.
        effect = mde(a_n, b_n, pooled) if 0 < pooled < 1 else None
    underpowered = (
        overall.informative_cells < MIN_INFORMATIVE_CELLS
        or a_n < MIN_VALID_RUNS_PER_SIDE
        or b_n < MIN_VALID_RUNS_PER_SIDE
    )
    return Comparison(
        cells=verdicts,
        overall=overall,
        a_c=a_c,
        a_n=a_n,
        b_c=b_c,
        b_n=b_n,
        delta=delta,
        delta_interval=interval,
        mde=effect,
        underpowered=underpowered,
        exceeds_noise=overall.p_two < alpha,
        significant_regression=overall.p_regress < alpha,
        alpha=alpha,
    )


@dataclass(frozen=True)
class GateResult:
    """`exit_code` 0 pass, 1 fail, 2 could not be judged. `reasons` always names the
    rule(s) that decided; `warnings` carry per-cell evidence and caveats."""

    exit_code: int
    reasons: list[str]
    warnings: list[str]


def _cell_name(key: CellKey) -> str:
    return f"{key[0]} × {key[1]}"


def _counts(cell: Cell | None) -> str:
    return "-" if cell is None else f"{cell.c}/{cell.n}"


def underpowered_note(
    informative_cells: int, baseline_runs: int, current_runs: int, *, significant: bool
) -> str:
    """What is short (only what applies) and what it means for the verdict beside it: an
    exact test keeps its false-alarm rate at any size, so few runs weaken a "no
    regression", never a "significant regression"."""
    short = []
    if informative_cells < MIN_INFORMATIVE_CELLS:
        short.append(
            f"{informative_cells} informative cell{'s' * (informative_cells != 1)} "
            f"(cells whose results differ; {MIN_INFORMATIVE_CELLS} wanted)"
        )
    for side, runs in (("baseline", baseline_runs), ("current", current_runs)):
        if runs < MIN_VALID_RUNS_PER_SIDE:
            short.append(f"{runs} valid {side} runs ({MIN_VALID_RUNS_PER_SIDE} wanted)")
    meaning = (
        "the significant regression stands (the exact test holds α at any size); only "
        "a smaller drop could have gone unseen"
        if significant
        else 'so "no significant regression" is weak evidence: a real drop could go '
        "unseen at these counts"
    )
    return f"underpowered comparison: {', '.join(short)}; {meaning}"


def _overall_evidence(comparison: Comparison) -> str:
    o = comparison.overall
    text = (
        f"T = {o.t} current passes vs E[T] = {o.expected:.1f}, "
        f"p_regress = {o.p_regress:.4f} (mid-p), p_two = {o.p_two:.4f}, "
        f"α = {comparison.alpha:g}, {o.informative_cells} informative cells"
    )
    if comparison.delta is not None and comparison.delta_interval is not None:
        ci = comparison.delta_interval
        text += f"; Δ = {comparison.delta:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]"
    return text


def ci_gate(
    *,
    comparison: Comparison | None,
    pass_rate: float | None,
    min_pass_rate: float | None,
    incomplete: bool,
    require_baseline: bool,
) -> GateResult:
    """The CI gate (docs/evals.md "CI gate").

    Exit 2 (could not be judged): no baseline while `require_baseline`, or no pass rate
    (no valid runs) while `min_pass_rate` is set. Otherwise exit 1 when the overall test
    says significant regression, the pass rate is under `min_pass_rate`, or the eval is
    incomplete; else 0. Per-cell `regressed` labels are warnings with their evidence,
    never a failure on their own. Every rule that fired is in `reasons`."""
    unjudgeable: list[str] = []
    failures: list[str] = []
    notes: list[str] = []
    warnings: list[str] = []

    if comparison is None:
        if require_baseline:
            unjudgeable.append("no baseline found and --require-baseline is set")
        else:
            notes.append("no baseline found (first run): gating on the pass rate alone")
    else:
        if comparison.significant_regression:
            failures.append(f"significant regression: {_overall_evidence(comparison)}")
        else:
            notes.append(f"no significant regression: {_overall_evidence(comparison)}")
        if comparison.overall.reason is not None:
            warnings.append(f"overall test: {comparison.overall.reason}")
        if comparison.underpowered:
            warnings.append(
                underpowered_note(
                    comparison.overall.informative_cells,
                    comparison.a_n,
                    comparison.b_n,
                    significant=comparison.significant_regression,
                )
            )
        if comparison.mde is not None:
            warnings.append(f"MDE = {comparison.mde:.3f}: {MDE_SENTENCE}")
        for verdict in comparison.regressed_cells:
            fisher = verdict["fisher_p"]
            evidence = "" if fisher is None else f", one-sided Fisher p = {fisher:.4f}"
            warnings.append(
                f"cell {_cell_name(verdict['key'])} regressed: "
                f"{_counts(verdict['a'])} → {_counts(verdict['b'])}{evidence}"
            )
        for verdict in comparison.not_comparable_cells:
            warnings.append(
                f"cell {_cell_name(verdict['key'])} not comparable: scenario changed "
                f"between the evals ({_counts(verdict['a'])} → {_counts(verdict['b'])}); "
                "left out of the overall test"
            )

    if min_pass_rate is not None:
        if pass_rate is None:
            unjudgeable.append(
                f"no pass rate (no valid runs) while --min-pass-rate {min_pass_rate:.3f} is set"
            )
        elif pass_rate < min_pass_rate:
            failures.append(
                f"pass rate {pass_rate:.3f} is under --min-pass-rate {min_pass_rate:.3f}"
            )
        else:
            notes.append(f"pass rate {pass_rate:.3f} meets --min-pass-rate {min_pass_rate:.3f}")
    elif comparison is None:
        notes.append("no --min-pass-rate set: nothing to gate on")

    if incomplete:
        failures.append("eval incomplete: more than 10% of its runs errored")

    if (unjudgeable or failures) and comparison is None and not require_baseline:
        warnings.insert(0, notes[0])  # still say that there was no baseline
    if unjudgeable:
        return GateResult(exit_code=2, reasons=unjudgeable + failures, warnings=warnings)
    if failures:
        return GateResult(exit_code=1, reasons=failures, warnings=warnings)
    return GateResult(exit_code=0, reasons=["passed: " + "; ".join(notes)], warnings=warnings)
