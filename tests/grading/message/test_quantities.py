"""Doses and quantities with units, money and phone numbers."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.grading.message.quantities import (
    find_money,
    find_phones,
    find_quantities,
    parse_number,
    same_phone,
    unit_of,
)


@pytest.mark.parametrize(
    ("text", "value", "unit", "base"),
    [
        ("20 mg", "20", "mg", "20"),
        ("20mg", "20", "mg", "20"),
        ("20 milligrams", "20", "mg", "20"),
        ("20 miligramos", "20", "mg", "20"),
        ("20 MG", "20", "mg", "20"),
        ("0.5 g", "0.5", "g", "500"),
        ("500 mcg", "500", "mcg", "0.5"),
        ("1.5 mL", "1.5", "mL", "1.5"),
        ("1,5 ml", "1.5", "mL", "1.5"),
        ("2 tablets", "2", "tablet", "2"),
        ("1 comprimido", "1", "tablet", "1"),
        ("10 units", "10", "unit", "10"),
        ("10 unidades", "10", "unit", "10"),
        ("2 puffs", "2", "puff", "2"),
        ("1,000 mg", "1000", "mg", "1000"),
        ("120 mg/dL", "120", "mg/dL", "120"),
        ("5 ml", "5", "mL", "5"),
    ],
)
def test_quantities(text: str, value: str, unit: str, base: str) -> None:
    [q] = find_quantities(f"Take {text} daily")
    assert (q.value, q.unit, q.base) == (Decimal(value), unit, Decimal(base))
    assert q.text == text


@pytest.mark.parametrize(
    "text", ["in 30 minutes", "in 2 weeks", "at 10 am", "room 12", "$25", "Call 555-0100"]
)
def test_not_quantities(text: str) -> None:
    assert find_quantities(text) == []


def test_same_quantity_across_units() -> None:
    [a] = find_quantities("0.5 g")
    [b] = find_quantities("500 mg")
    [c] = find_quantities("500 mL")
    assert a.same(b)
    assert not b.same(c)


@pytest.mark.parametrize(
    ("text", "value", "currency"),
    [
        ("$25", "25", None),
        ("$25.00", "25", None),
        ("25 dollars", "25", "USD"),
        ("US$ 1,250.50", "1250.5", "USD"),
        ("25 dólares", "25", "USD"),
        ("€25", "25", "EUR"),
        ("25,50 euros", "25.5", "EUR"),
        ("$1,200", "1200", None),
    ],
)
def test_money(text: str, value: str, currency: str | None) -> None:
    [m] = find_money(f"Your copay is {text}.")
    assert (m.value, m.currency, m.text) == (Decimal(value), currency, text)


@pytest.mark.parametrize(
    ("text", "digits", "emergency"),
    [
        ("555-0100", "5550100", False),
        ("(555) 010-0100", "5550100100", False),
        ("555.010.0100", "5550100100", False),
        ("555-010-0100", "5550100100", False),
        ("+1 555 010 0100", "15550100100", False),
        ("1-800-555-0100", "18005550100", False),
        ("+34 912 345 678", "34912345678", False),
        ("911", "911", True),
        ("9-1-1", "911", True),
    ],
)
def test_phones(text: str, digits: str, emergency: bool) -> None:
    [p] = find_phones(f"Please call {text} today.")
    assert (p.digits, p.emergency, p.text) == (digits, emergency, text)


@pytest.mark.parametrize(
    "text", ["2026-12-08", "10:30", "$25.00", "20 mg", "12/8", "room 1203", "order 12345"]
)
def test_not_phones(text: str) -> None:
    assert find_phones(text) == []


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("5550100100", "15550100100", True),
        ("5550100", "5550100100", False),  # 555-0100 is not (555) 010-0100
        ("5550100", "5555550100", True),
        ("5550100100", "5550100199", False),
        ("911", "1911", False),
    ],
)
def test_same_phone(a: str, b: str, same: bool) -> None:
    assert same_phone(a, b) is same


def test_parse_number() -> None:
    assert parse_number("1,250.50") == Decimal("1250.5")
    assert parse_number("1.250,50") == Decimal("1250.5")
    assert parse_number("1,5") == Decimal("1.5")
    assert parse_number("1,000") == Decimal("1000")
    assert parse_number("x") is None


def test_unit_codes() -> None:
    assert unit_of("{tablet}") is not None
    assert unit_of("[iU]") is not None
    assert unit_of("mm[Hg]") is not None
    assert unit_of("furlong") is None
