"""Eval statistics: every test vector in docs/evals.md (each to its printed precision,
i.e. an absolute tolerance of half the last printed digit) plus the edge cases."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from understudy_client.statistics import (
    NO_DISCORDANT_EVIDENCE,
    Cell,
    CellKey,
    Comparison,
    Outcomes,
    cell_label,
    ci_gate,
    compare,
    eval_pass_at_k,
    eval_pass_hat_k,
    fisher_one_sided_worse,
    is_flaky,
    mde,
    newcombe,
    pass_at_k,
    pass_hat_k,
    stratified_exact_test,
    underpowered_note,
    wilson,
)


def tol(printed: str) -> float:
    """Half the last printed digit of `printed` ("0.0356" -> 0.00005)."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return 0.5 * 10.0**-decimals


def approx(printed: str) -> object:
    return pytest.approx(float(printed), abs=tol(printed))


def key(i: int, persona: str = "baseline") -> CellKey:
    return (f"scenario-{i}", persona)


def cells_from(counts: list[tuple[int, int]], persona: str = "baseline") -> dict[CellKey, Cell]:
    """(n, c) per cell."""
    return {key(i, persona): Cell(key(i, persona), n, c) for i, (n, c) in enumerate(counts)}


def paired(ca_cb: list[tuple[int, int]], n: int) -> tuple[dict[CellKey, Cell], dict[CellKey, Cell]]:
    """Baseline and current evals from (c_A, c_B) per cell, n runs per cell on both sides."""
    return (
        cells_from([(n, ca) for ca, _ in ca_cb]),
        cells_from([(n, cb) for _, cb in ca_cb]),
    )


# The ten-cell vector (3 repeats) and the McNemar vector (1 run per cell).
TEN_CELLS = [(3, 3), (3, 1), (2, 0), (3, 2), (1, 1), (3, 3), (0, 0), (3, 2), (2, 1), (3, 3)]
MCNEMAR = [(1, 1)] * 12 + [(1, 0)] * 6 + [(0, 1)] * 1 + [(0, 0)] * 3


def pairs_of(ca_cb: list[tuple[int, int]], n: int) -> list[tuple[Cell, Cell]]:
    a, b = paired(ca_cb, n)
    return [(a[k], b[k]) for k in a]


# --- Wilson ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("c", "n", "rate", "low", "high"),
    [
        (42, 50, "0.840", "0.715", "0.917"),
        (20, 20, "1.000", "0.839", "1.000"),
        (0, 10, "0.000", "0.000", "0.278"),
        (84, 100, "0.840", "0.756", "0.899"),
    ],
)
def test_wilson_vectors(c: int, n: int, rate: str, low: str, high: str) -> None:
    result = wilson(c, n)
    assert result is not None
    p, ci = result
    assert p == approx(rate)
    assert ci.low == approx(low)
    assert ci.high == approx(high)


@pytest.mark.parametrize(("c", "n"), [(0, 1), (1, 1), (0, 10), (10, 10), (3, 7)])
def test_wilson_interval_within_unit_range_and_contains_rate(c: int, n: int) -> None:
    result = wilson(c, n)
    assert result is not None
    p, ci = result
    assert 0.0 <= ci.low <= p <= ci.high <= 1.0


def test_wilson_no_runs_is_no_rate() -> None:
    assert wilson(0, 0) is None


@pytest.mark.parametrize(("c", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(c: int, n: int) -> None:
    with pytest.raises(ValueError):
        wilson(c, n)


# --- pass@k / pass^k -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "at_k", "hat_k"),
    [
        (5, 3, 2, "0.900", "0.300"),
        (5, 3, 3, "1.000", "0.100"),
        # edge cases: n - c < k -> pass@k = 1; c < k -> pass^k = 0
        (5, 4, 2, "1.000", "0.600"),
        (5, 1, 2, "0.400", "0.000"),
        (5, 0, 1, "0.000", "0.000"),
        (5, 5, 5, "1.000", "1.000"),
        (4, 2, 1, "0.500", "0.500"),  # k = 1: both are the plain rate
    ],
)
def test_pass_at_k_and_hat_k_single_cell(n: int, c: int, k: int, at_k: str, hat_k: str) -> None:
    assert pass_at_k(n, c, k) == approx(at_k)
    assert pass_hat_k(n, c, k) == approx(hat_k)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 2, 4), (0, 0, 1), (5, 3, 0), (5, 6, 2)])
def test_pass_at_k_rejects_k_over_n_and_bad_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_pass_at_k_large_cell_is_exact() -> None:
    # C(1000, 500) is far beyond float range; the ratio must still come out right.
    assert pass_hat_k(1000, 999, 500) == pytest.approx(0.5, abs=1e-12)
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5, abs=1e-12)


EVAL_CELLS = [(5, 5), (5, 3), (5, 0), (4, 4), (3, 2)]


@pytest.mark.parametrize(
    ("counts", "k", "at_k", "hat_k", "left_out"),
    [
        (EVAL_CELLS, 3, "0.800", "0.420", 0),
        # k = 5: (4,4) and (3,2) are left out and counted; mean of 1, 1, 0 and 1, 0, 0
        (EVAL_CELLS, 5, "0.667", "0.333", 2),
        # every cell at exactly k runs: pass^k is the share of all-pass cells
        ([(3, 3), (3, 2), (3, 3), (3, 0)], 3, "0.750", "0.500", 0),
    ],
)
def test_eval_pass_at_k_and_hat_k(
    counts: list[tuple[int, int]], k: int, at_k: str, hat_k: str, left_out: int
) -> None:
    cells = list(cells_from(counts).values())
    assert eval_pass_at_k(cells, k) == (approx(at_k), left_out)
    assert eval_pass_hat_k(cells, k) == (approx(hat_k), left_out)


@pytest.mark.parametrize(
    ("counts", "k", "left_out"),
    [([], 3, 0), ([(2, 2), (1, 0)], 3, 2), ([(0, 0)], 1, 1)],
)
def test_eval_pass_at_k_with_no_cell_of_k_runs_is_none(
    counts: list[tuple[int, int]], k: int, left_out: int
) -> None:
    cells = list(cells_from(counts).values())
    assert eval_pass_at_k(cells, k) == (None, left_out)
    assert eval_pass_hat_k(cells, k) == (None, left_out)


@pytest.mark.parametrize(
    ("n", "c", "flaky"), [(5, 0, False), (5, 5, False), (5, 1, True), (5, 4, True), (0, 0, False)]
)
def test_is_flaky(n: int, c: int, flaky: bool) -> None:
    assert is_flaky(Cell(key(0), n, c)) is flaky


def test_cell_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        Cell(key(0), 3, 4)


# --- Outcomes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcomes", "valid", "passes", "excluded", "incomplete"),
    [
        (Outcomes(passed=6, failed=2, timed_out=1, cancelled=1, errored=0), 9, 6, 1, False),
        # exactly 10% errored is not incomplete; more is
        (Outcomes(passed=8, failed=1, timed_out=0, cancelled=0, errored=1), 9, 8, 1, False),
        (Outcomes(passed=7, failed=1, timed_out=0, cancelled=0, errored=2), 8, 7, 2, True),
        (Outcomes(passed=0, failed=0, timed_out=0, cancelled=3, errored=0), 0, 0, 3, False),
        (Outcomes(passed=0, failed=0, timed_out=0, cancelled=0, errored=1), 0, 0, 1, True),
        (Outcomes(passed=0, failed=0, timed_out=0, cancelled=0, errored=0), 0, 0, 0, False),
    ],
)
def test_outcomes(
    outcomes: Outcomes, valid: int, passes: int, excluded: int, incomplete: bool
) -> None:
    assert outcomes.valid == valid
    assert outcomes.passes == passes
    assert outcomes.excluded == excluded
    assert outcomes.incomplete is incomplete
    assert outcomes.cell(key(0)) == Cell(key(0), valid, passes)


def test_outcomes_timeout_is_a_failure_not_excluded() -> None:
    cell = Outcomes(passed=1, failed=0, timed_out=3, cancelled=0, errored=0).cell(key(0))
    assert (cell.n, cell.c) == (4, 1)


# --- per-cell labels and Fisher evidence ----------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "label"),
    [
        ((3, 3), (3, 2), "regressed"),  # stopped passing every repeat
        ((6, 3), (6, 2), "regressed"),  # 0.5 -> 0.333: fell by exactly a third
        ((5, 4), (5, 3), "same"),  # 0.8 -> 0.6: fell by less than a third
        ((3, 2), (3, 0), "regressed"),
        ((3, 2), (3, 3), "improved"),  # now passes every repeat
        ((6, 2), (6, 3), "improved"),  # mirror: a <= 2/3 b
        ((5, 3), (5, 4), "same"),
        ((3, 0), (3, 1), "improved"),
        ((3, 0), (3, 0), "same"),  # 0 <= 2/3 * 0 but nothing fell
        ((3, 3), (3, 3), "same"),
        ((3, 3), (5, 5), "same"),
        ((4, 3), (2, 1), "regressed"),
        ((0, 0), (3, 1), "same"),  # no baseline rate
        ((3, 3), (0, 0), "same"),  # no current rate
    ],
)
def test_cell_label(a: tuple[int, int], b: tuple[int, int], label: str) -> None:
    assert cell_label(Cell(key(0), *a), Cell(key(0), *b)) == label


@pytest.mark.parametrize(
    ("a", "b", "p"),
    [
        ((3, 3), (3, 1), "0.2000"),  # P(X <= 1), t = 4: C(3,1)C(3,3)/C(6,4) = 3/15
        ((3, 2), (3, 0), "0.2000"),
        ((3, 3), (3, 2), "0.5000"),
        ((3, 1), (3, 1), "0.8000"),
        ((3, 3), (3, 3), "1.0000"),  # uninformative
        ((3, 0), (3, 0), "1.0000"),
        ((0, 0), (3, 1), "1.0000"),
        ((10, 10), (10, 0), "0.00000541"),  # 1 / C(20, 10)
    ],
)
def test_fisher_one_sided_worse(a: tuple[int, int], b: tuple[int, int], p: str) -> None:
    assert fisher_one_sided_worse(Cell(key(0), *a), Cell(key(0), *b)) == approx(p)


# --- the stratified exact test --------------------------------------------------------


@pytest.mark.parametrize(
    ("ca_cb", "n", "t", "expected", "p_two", "p_regress", "p_regress_plain"),
    [
        (TEN_CELLS, 3, 16, "19.5", "0.0356", "0.0100", "0.0178"),
        (MCNEMAR, 1, 13, None, "0.125", "0.0352", None),
    ],
)
def test_stratified_exact_test_vectors(
    ca_cb: list[tuple[int, int]],
    n: int,
    t: int,
    expected: str | None,
    p_two: str,
    p_regress: str,
    p_regress_plain: str | None,
) -> None:
    result = stratified_exact_test(pairs_of(ca_cb, n))
    assert result.t == t
    if expected is not None:
        assert result.expected == approx(expected)
    assert result.p_two == approx(p_two)
    assert result.p_regress == approx(p_regress)
    if p_regress_plain is not None:
        assert result.p_regress_plain == approx(p_regress_plain)
    assert result.reason is None


def test_mcnemar_case_matches_the_exact_binomial_on_discordant_pairs() -> None:
    # 7 discordant pairs, 1 fail -> pass: Binomial(7, 1/2).
    result = stratified_exact_test(pairs_of(MCNEMAR, 1))
    assert result.informative_cells == 7
    assert result.p_two == pytest.approx(2 * 8 / 128, abs=1e-15)
    assert result.p_regress == pytest.approx((1 + 7 / 2) / 128, abs=1e-15)
    assert result.p_improve == pytest.approx((1 + 7 + 21 + 35 + 35 + 21 + 7 / 2) / 128)


def test_ten_cell_all_pass_and_all_fail_cells_fall_out() -> None:
    full = stratified_exact_test(pairs_of(TEN_CELLS, 3))
    informative_only = [p for p in TEN_CELLS if p not in {(3, 3), (0, 0)}]
    reduced = stratified_exact_test(pairs_of(informative_only, 3))
    assert full.informative_cells == reduced.informative_cells == 6
    for field in ("p_two", "p_regress", "p_improve", "p_regress_plain"):
        assert getattr(full, field) == getattr(reduced, field)
    assert full.p_regress + full.p_improve == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("ca_cb", "n"),
    [
        ([], 3),
        ([(3, 3), (0, 0), (3, 3)], 3),
        ([(1, 1)] * 5 + [(0, 0)] * 5, 1),
    ],
)
def test_no_informative_cell_gives_p_one_with_the_reason(
    ca_cb: list[tuple[int, int]], n: int
) -> None:
    result = stratified_exact_test(pairs_of(ca_cb, n))
    assert result.informative_cells == 0
    assert (result.p_two, result.p_regress, result.p_improve) == (1.0, 1.0, 1.0)
    assert result.reason == NO_DISCORDANT_EVIDENCE


def test_cell_with_no_runs_on_one_side_is_not_informative() -> None:
    result = stratified_exact_test([(Cell(key(0), 0, 0), Cell(key(0), 3, 1))])
    assert result.informative_cells == 0
    assert result.reason == NO_DISCORDANT_EVIDENCE


def test_single_cell_plain_one_sided_equals_fisher() -> None:
    a, b = Cell(key(0), 7, 6), Cell(key(0), 9, 3)
    result = stratified_exact_test([(a, b)])
    assert result.p_regress_plain == pytest.approx(fisher_one_sided_worse(a, b), abs=1e-15)


def test_large_cells_are_exact() -> None:
    # Weights like C(1000, 500)^2 overflow floats; the symmetric case has exact answers.
    big, small = Cell(key(0), 1000, 500), Cell(key(1), 200, 100)
    result = stratified_exact_test([(big, big), (small, small)])
    assert result.t == 600
    assert result.expected == 600.0
    assert result.p_two == 1.0
    assert result.p_regress == pytest.approx(0.5, abs=1e-15)
    assert result.p_improve == pytest.approx(0.5, abs=1e-15)
    # and a clear large regression is vanishingly unlikely, but still a positive number
    worse = stratified_exact_test([(Cell(key(0), 1000, 900), Cell(key(0), 1000, 700))])
    assert 0.0 < worse.p_regress < 1e-20
    assert worse.p_improve == pytest.approx(1.0)


# --- Newcombe and MDE -----------------------------------------------------------------


def test_newcombe_vector() -> None:
    delta, ci = newcombe(23, 30, 16, 30)
    assert delta == approx("-0.233")
    assert ci.low == approx("-0.440")
    assert ci.high == approx("0.007")


@pytest.mark.parametrize(("a_c", "a_n", "b_c", "b_n"), [(10, 20, 10, 20), (0, 5, 5, 5)])
def test_newcombe_contains_delta(a_c: int, a_n: int, b_c: int, b_n: int) -> None:
    delta, ci = newcombe(a_c, a_n, b_c, b_n)
    assert -1.0 <= ci.low <= delta <= ci.high <= 1.0


@pytest.mark.parametrize(("a_n", "b_n"), [(0, 10), (10, 0)])
def test_newcombe_and_mde_need_runs_on_both_sides(a_n: int, b_n: int) -> None:
    with pytest.raises(ValueError):
        newcombe(0, a_n, 0, b_n)
    with pytest.raises(ValueError):
        mde(a_n, b_n, 0.5)


@pytest.mark.parametrize(
    ("a_n", "b_n", "pooled", "effect"),
    [
        (50, 50, 0.5, "0.2801585"),  # 2.801585 * sqrt(0.25 * 0.04)
        (30, 30, 39 / 60, "0.345"),  # the ten-cell vector
        (20, 20, 1.0, "0.000"),
    ],
)
def test_mde(a_n: int, b_n: int, pooled: float, effect: str) -> None:
    assert mde(a_n, b_n, pooled) == approx(effect)


# --- compare --------------------------------------------------------------------------


def ten_cell_comparison(alpha: float = 0.05) -> Comparison:
    a, b = paired(TEN_CELLS, 3)
    return compare(a, b, alpha=alpha)


def test_compare_ten_cell_vector() -> None:
    result = ten_cell_comparison()
    assert (result.a_c, result.a_n, result.b_c, result.b_n) == (23, 30, 16, 30)
    assert result.overall.expected == approx("19.5")
    assert result.overall.t == 16
    assert result.overall.p_two == approx("0.0356")
    assert result.overall.p_regress == approx("0.0100")
    assert result.exceeds_noise is True
    assert result.significant_regression is True
    assert result.underpowered is False
    assert result.alpha == 0.05
    assert result.delta == approx("-0.233")
    assert result.delta_interval is not None
    assert result.delta_interval.low == approx("-0.440")
    assert result.delta_interval.high == approx("0.007")
    assert result.mde == approx("0.345")
    labels = [v["label"] for v in result.cells]
    assert labels == [
        "same",
        "regressed",
        "regressed",
        "regressed",
        "same",
        "same",
        "same",
        "regressed",
        "regressed",
        "same",
    ]
    assert result.cells[1]["fisher_p"] == approx("0.2000")
    assert all(v["comparable"] is True for v in result.cells)


def test_compare_alpha_is_configurable() -> None:
    strict = ten_cell_comparison(alpha=0.01)
    assert strict.alpha == 0.01
    assert strict.exceeds_noise is False  # p_two 0.0356
    assert strict.significant_regression is True  # mid-p 0.00995


def test_compare_mcnemar_vector() -> None:
    a, b = paired(MCNEMAR, 1)
    result = compare(a, b)
    assert result.overall.p_two == approx("0.125")
    assert result.overall.p_regress == approx("0.0352")
    assert result.exceeds_noise is False
    assert result.significant_regression is True
    assert result.underpowered is False  # 7 informative cells, 22 runs a side


@pytest.mark.parametrize(
    ("ca_cb", "n", "underpowered"),
    [
        (TEN_CELLS, 3, False),
        ([(3, 1), (2, 1)] + [(3, 3)] * 8, 3, True),  # 2 informative cells
        ([(3, 1), (2, 1), (1, 2)] + [(3, 3)] * 3, 3, True),  # 18 valid runs a side
        ([(3, 1), (2, 1), (1, 2)] + [(3, 3)] * 4, 3, False),  # 3 cells, 21 runs a side
        ([(3, 3)] * 10, 3, True),  # no informative cell at all
    ],
)
def test_compare_underpowered(ca_cb: list[tuple[int, int]], n: int, underpowered: bool) -> None:
    a, b = paired(ca_cb, n)
    assert compare(a, b).underpowered is underpowered


def test_compare_new_and_removed_cells() -> None:
    a, b = paired(TEN_CELLS, 3)
    a[("old-scenario", "baseline")] = Cell(("old-scenario", "baseline"), 3, 0)
    b[("new-scenario", "terse")] = Cell(("new-scenario", "terse"), 3, 0)
    result = compare(a, b)
    by_key = {v["key"]: v for v in result.cells}
    removed = by_key[("old-scenario", "baseline")]
    new = by_key[("new-scenario", "terse")]
    assert (removed["label"], removed["b"], removed["fisher_p"], removed["comparable"]) == (
        "removed",
        None,
        None,
        None,
    )
    assert (new["label"], new["a"], new["fisher_p"], new["comparable"]) == (
        "new",
        None,
        None,
        None,
    )
    # unmatched cells stay out of the overall test
    baseline = ten_cell_comparison()
    assert result.overall == baseline.overall
    assert (result.a_n, result.b_n) == (30, 30)


def test_compare_excludes_non_comparable_cells() -> None:
    a, b = paired(TEN_CELLS, 3)
    changed = ("changed", "baseline")
    a[changed] = Cell(changed, 3, 3)
    b[changed] = Cell(changed, 3, 0)
    hashes_a = {k: "h1" for k in a}
    hashes_b = {k: "h1" for k in b} | {changed: "h2"}
    result = compare(a, b, hashes_a=hashes_a, hashes_b=hashes_b)
    verdict = next(v for v in result.cells if v["key"] == changed)
    assert verdict["comparable"] is False
    assert result.not_comparable_cells == [verdict]
    assert verdict not in result.regressed_cells
    assert result.overall == ten_cell_comparison().overall
    assert (result.a_c, result.a_n, result.b_c, result.b_n) == (23, 30, 16, 30)
    # without hashes the same cell counts (and makes the regression stronger)
    counted = compare(a, b)
    assert counted.overall.t == 16
    assert counted.overall.p_regress < result.overall.p_regress


def test_compare_missing_hash_is_taken_as_unchanged() -> None:
    a, b = paired(TEN_CELLS, 3)
    result = compare(a, b, hashes_a={key(0): "h1"}, hashes_b={key(1): "h2"})
    assert all(v["comparable"] is True for v in result.cells)


def test_compare_with_nothing_matched() -> None:
    result = compare(cells_from([(3, 2)], "a"), cells_from([(3, 1)], "b"))
    assert [v["label"] for v in result.cells] == ["removed", "new"]  # key order
    assert result.overall.reason == NO_DISCORDANT_EVIDENCE
    assert result.overall.p_two == 1.0
    assert (result.delta, result.delta_interval, result.mde) == (None, None, None)
    assert result.underpowered is True
    assert result.exceeds_noise is False
    assert result.significant_regression is False


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1])
def test_compare_rejects_bad_alpha(alpha: float) -> None:
    with pytest.raises(ValueError):
        ten_cell_comparison(alpha=alpha)


# --- CI gate --------------------------------------------------------------------------


def no_change() -> Comparison:
    a, b = paired([(3, 2), (2, 2), (1, 1), (3, 3)] * 3, 3)
    return compare(a, b)


@pytest.mark.parametrize(
    ("case", "comparison", "pass_rate", "min_rate", "incomplete", "require", "code", "reason"),
    [
        ("clean", no_change, 0.75, 0.7, False, False, 0, "no significant regression"),
        ("regression", ten_cell_comparison, 0.53, None, False, False, 1, "significant regression"),
        ("under min", no_change, 0.6, 0.7, False, False, 1, "under --min-pass-rate"),
        ("incomplete", no_change, 0.75, None, True, False, 1, "incomplete"),
        ("no baseline, required", None, 0.9, 0.7, False, True, 2, "--require-baseline"),
        ("first run passes", None, 0.9, 0.7, False, False, 0, "pass rate alone"),
        ("first run under min", None, 0.5, 0.7, False, False, 1, "under --min-pass-rate"),
        ("first run, no min", None, 0.5, None, False, False, 0, "pass rate alone"),
        ("no valid runs", no_change, None, 0.7, False, False, 2, "no pass rate"),
    ],
)
def test_ci_gate_rules(
    case: str,
    comparison: Callable[[], Comparison] | None,
    pass_rate: float | None,
    min_rate: float | None,
    incomplete: bool,
    require: bool,
    code: int,
    reason: str,
) -> None:
    built = None if comparison is None else comparison()
    result = ci_gate(
        comparison=built,
        pass_rate=pass_rate,
        min_pass_rate=min_rate,
        incomplete=incomplete,
        require_baseline=require,
    )
    assert result.exit_code == code, case
    assert result.reasons, "the gate always says which rule fired"
    assert any(reason in r for r in result.reasons), result.reasons


def test_ci_gate_reports_every_failing_rule() -> None:
    result = ci_gate(
        comparison=ten_cell_comparison(),
        pass_rate=0.53,
        min_pass_rate=0.8,
        incomplete=True,
        require_baseline=True,
    )
    assert result.exit_code == 1
    assert len(result.reasons) == 3
    assert "p_regress = 0.0100" in result.reasons[0]
    assert "Δ = -0.233 [-0.440, +0.007]" in result.reasons[0]


def test_ci_gate_warns_every_regressed_cell_with_its_evidence() -> None:
    result = ci_gate(
        comparison=ten_cell_comparison(),
        pass_rate=None,
        min_pass_rate=None,
        incomplete=False,
        require_baseline=False,
    )
    regressed = [w for w in result.warnings if " regressed: " in w]
    assert len(regressed) == 5
    assert "cell scenario-1 × baseline regressed: 3/3 → 1/3, one-sided Fisher p = 0.2000" in (
        regressed
    )
    assert any("MDE = 0.345" in w for w in result.warnings)


def test_ci_gate_regressed_labels_alone_do_not_fail() -> None:
    # Cell labels say regressed, the overall test does not: warn, exit 0.
    a, b = paired([(3, 2)] * 4 + [(2, 3)] * 4 + [(3, 3)] * 4, 3)
    comparison = compare(a, b)
    assert comparison.regressed_cells
    assert not comparison.significant_regression
    result = ci_gate(
        comparison=comparison,
        pass_rate=0.9,
        min_pass_rate=0.8,
        incomplete=False,
        require_baseline=True,
    )
    assert result.exit_code == 0
    assert len([w for w in result.warnings if " regressed: " in w]) == 4


def test_ci_gate_warns_underpowered_no_evidence_and_changed_cells() -> None:
    a, b = paired([(3, 3)] * 2, 3)
    a[("changed", "p")] = Cell(("changed", "p"), 3, 3)
    b[("changed", "p")] = Cell(("changed", "p"), 3, 0)
    comparison = compare(a, b, hashes_a={("changed", "p"): "x"}, hashes_b={("changed", "p"): "y"})
    result = ci_gate(
        comparison=comparison,
        pass_rate=0.9,
        min_pass_rate=None,
        incomplete=False,
        require_baseline=False,
    )
    assert result.exit_code == 0
    assert any("underpowered" in w for w in result.warnings)
    assert any(NO_DISCORDANT_EVIDENCE in w for w in result.warnings)
    assert any("changed × p not comparable" in w for w in result.warnings)
    assert not [w for w in result.warnings if " regressed: " in w]


def test_ci_gate_first_run_failure_still_says_there_was_no_baseline() -> None:
    result = ci_gate(
        comparison=None,
        pass_rate=0.5,
        min_pass_rate=0.7,
        incomplete=False,
        require_baseline=False,
    )
    assert result.exit_code == 1
    assert any("no baseline" in w for w in result.warnings)


def test_wilson_matches_the_formula_at_a_glance() -> None:
    # a sanity anchor independent of the printed vectors: 1/2 has a symmetric interval
    result = wilson(5, 10)
    assert result is not None
    p, ci = result
    assert math.isclose(p - ci.low, ci.high - p, abs_tol=1e-12)


def test_underpowered_says_what_is_short_and_what_it_means_for_the_verdict() -> None:
    regressed = underpowered_note(2, 40, 12, significant=True)
    assert "2 informative cells" in regressed and "12 valid current runs" in regressed
    assert "baseline" not in regressed  # 40 baseline runs are enough: not named
    assert "the significant regression stands" in regressed
    calm = underpowered_note(5, 8, 30, significant=False)
    assert "informative" not in calm and "8 valid baseline runs (20 wanted)" in calm
    assert '"no significant regression" is weak evidence' in calm
