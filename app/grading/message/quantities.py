"""Doses and other quantities with units, amounts of money and phone numbers in text.

- `find_quantities(text) -> list[Quantity]`: a number with a unit: "20 mg", "20mg", "20
  milligrams", "20 miligramos", "1.5 mL", "1,5 ml", "2 tablets", "10 units", "38 °C".
  Units are read into one spelling (`Quantity.unit`) and, where they have one, a base unit
  of their dimension (`Quantity.base`: mass in mg, volume in mL), so "0.5 g" equals
  "500 mg". Durations ("30 minutes", "2 weeks") are not quantities here: they are manners
  of speaking, not facts a patient acts on.
- `find_money(text) -> list[Money]`: "$25", "$25.00", "25 dollars", "US$ 1,250.50",
  "25 dólares", "€25", "25 euros".
- `find_phones(text) -> list[Phone]`: "555-0100", "(555) 010-0100", "555.010.0100",
  "+1 555 010 0100", "1-800-555-0100", "+34 912 345 678", "55 5555 0134"; "911"/"9-1-1"
  (and 112, 988 after "call"/"llame"/"marque") are emergency numbers (`Phone.emergency`),
  always grounded.
- `same_phone(a, b)`: two digit strings are one number (equal, or one ends with the other
  and the shorter has at least `MIN_PHONE_DIGITS` digits: country and area codes may be left
  out).
- `parse_number(text) -> Decimal | None`: "1,250.50", "1.5", "1,5" (a decimal comma),
  "1,000" (a thousands comma).
- `unit_of(text) -> tuple[str, str | None, Decimal] | None`: a unit word or UCUM code ("mg",
  "{tablet}", "[iU]", "mm[Hg]") as (unit, dimension, factor to the dimension's base).

Every result has its original span (`start`, `end`) and the text as written (`text`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from app.kit.phrases import Folded, fold

# A local number without its area code has 7 digits; fewer could be anything.
MIN_PHONE_DIGITS = 7

# unit spelling -> (unit, dimension, factor to the dimension's base unit)
_UNIT_TABLE: dict[str, tuple[str, str | None, Decimal]] = {}


def _units(unit: str, dimension: str | None, factor: str, *spellings: str) -> None:
    for spelling in (unit, *spellings):
        _UNIT_TABLE[spelling.lower()] = (unit, dimension, Decimal(factor))


_units("mg", "mass", "1", "milligram", "milligrams", "miligramo", "miligramos", "mgs")
_units(
    "mcg", "mass", "0.001", "µg", "μg", "ug", "microgram", "micrograms", "microgramo", "microgramos"
)
_units("g", "mass", "1000", "gram", "grams", "gramo", "gramos", "gr")
_units("kg", "mass", "1000000", "kilogram", "kilograms", "kilogramo", "kilogramos", "kilos")
_units(
    "mL",
    "volume",
    "1",
    "ml",
    "milliliter",
    "milliliters",
    "millilitre",
    "millilitres",
    "mililitro",
    "mililitros",
    "cc",
)
_units("L", "volume", "1000", "l", "liter", "liters", "litre", "litres", "litro", "litros")
_units(
    "unit",
    "unit",
    "1",
    "units",
    "u",
    "iu",
    "ui",
    "[iu]",
    "unidad",
    "unidades",
    "international units",
    "unidades internacionales",
)
_units(
    "tablet",
    "tablet",
    "1",
    "tablets",
    "tab",
    "tabs",
    "tableta",
    "tabletas",
    "comprimido",
    "comprimidos",
    "pastilla",
    "pastillas",
    "pill",
    "pills",
    "pildora",
    "pildoras",
    "píldora",
    "píldoras",
    "{tablet}",
    "{tbl}",
)
_units(
    "capsule",
    "capsule",
    "1",
    "capsules",
    "cap",
    "caps",
    "capsula",
    "capsulas",
    "cápsula",
    "cápsulas",
    "{capsule}",
)
_units(
    "puff",
    "puff",
    "1",
    "puffs",
    "inhalation",
    "inhalations",
    "inhalacion",
    "inhalaciones",
    "inhalación",
    "{puff}",
)
_units("drop", "drop", "1", "drops", "gota", "gotas", "{drop}", "[drp]")
_units("%", "percent", "1", "percent", "por ciento")
_units("mg/dL", "mg/dL", "1", "mg/dl")
_units("mmol/L", "mmol/L", "1", "mmol/l")
_units("mmHg", "mmHg", "1", "mmhg", "mm hg", "mm[hg]")
_units("bpm", "bpm", "1", "/min", "beats per minute", "latidos por minuto")
_units("lb", "weight-lb", "1", "lbs", "pound", "pounds", "libra", "libras")
_units("°C", "celsius", "1", "ºc", "°c", "degrees celsius", "grados")
_units("°F", "fahrenheit", "1", "ºf", "°f", "degrees fahrenheit")
_units("cm", "length", "1", "centimeter", "centimeters", "centimetro", "centimetros")

# Word-like spellings need a word end after them; symbols do not.
_UNIT_ALTERNATION = "|".join(
    re.escape(fold(s).text)
    for s in sorted(_UNIT_TABLE, key=len, reverse=True)
    if s not in ("l", "u", "gr", "cap", "tab") and not s.startswith(("{", "["))
)
_NUMBER = r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)"
_QUANTITY_RE = re.compile(
    rf"(?<![\w$€£.,:/-]){_NUMBER}(?:\s?-?\s?)(?P<unit>{_UNIT_ALTERNATION}|l|u)(?![a-z0-9])"
)
_MONEY_BEFORE_RE = re.compile(
    r"(?<![\w])(?P<cur>us\$|\$|€|£|usd|eur)\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?"
    r"|\d+(?:[.,]\d{1,2})?)(?![\d])"
)
_MONEY_AFTER_RE = re.compile(
    r"(?<![\w$€£.,])(?P<num>\d{1,3}(?:[,.]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?)\s?"
    r"(?P<cur>dollars?|dolares|usd|euros?|eur|€|pesos)(?![a-z])"
)
_PHONE_RE = re.compile(
    r"(?<![\w+.,/:-])(?:"
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){1,4}"
    r"|(?:1[\s.-])?\(\d{3}\)[\s.-]?\d{3}[\s.-]\d{4}"
    r"|(?:1[\s.-])?\d{3}[\s.-]\d{3}[\s.-]\d{4}"
    r"|\d{2}[\s.-]\d{4}[\s.-]\d{4}"  # 55 5555 0134
    r"|\d{3}\s\d{3}\s\d{3}(?!\s?\d)"  # 912 345 678
    r"|\d{10}"
    r"|\d{3}[.-]\d{4}"
    r")(?![\w-]|[.,]\d)"
)
_EMERGENCY_RE = re.compile(
    r"(?<![\w$.,/-])(?:9-1-1|911|(?<=call )(?:112|988)|(?<=dial )(?:112|988)"
    r"|(?<=llame al )(?:112|911)|(?<=marque el )(?:112|911)|(?<=llama al )(?:112|911))"
    r"(?![\w]|[.,/-]\d)"
)


@dataclass(frozen=True, slots=True)
class Quantity:
    value: Decimal
    unit: str
    dimension: str | None
    base: Decimal  # value in the dimension's base unit
    start: int = 0
    end: int = 0
    text: str = ""

    def same(self, other: Quantity) -> bool:
        if self.dimension is not None and self.dimension == other.dimension:
            return self.base == other.base
        return self.unit == other.unit and self.value == other.value


@dataclass(frozen=True, slots=True)
class Money:
    value: Decimal
    currency: str | None  # "USD", "EUR", or None where "$" could be either dollar or peso
    start: int = 0
    end: int = 0
    text: str = ""


@dataclass(frozen=True, slots=True)
class Phone:
    digits: str
    emergency: bool
    start: int = 0
    end: int = 0
    text: str = ""


def parse_number(text: str) -> Decimal | None:
    raw = text.strip()
    if "," in raw and "." in raw:
        if raw.rfind(",") > raw.rfind("."):
            raw = raw.replace(".", "").replace(",", ".")
        else:
            raw = raw.replace(",", "")
    elif "," in raw:
        raw = (
            raw.replace(",", "")
            if re.fullmatch(r"\d{1,3}(,\d{3})+", raw)
            else raw.replace(",", ".")
        )
    try:
        return Decimal(raw).normalize()
    except InvalidOperation:
        return None


@lru_cache(maxsize=1024)
def unit_of(text: str) -> tuple[str, str | None, Decimal] | None:
    key = text.strip().lower()
    found = _UNIT_TABLE.get(key) or _UNIT_TABLE.get(fold(key).text)
    if found is None and key.startswith("{") and key.endswith("}"):
        found = _UNIT_TABLE.get(key[1:-1])
    return found


def _span(folded: Folded, original: str, start: int, end: int) -> tuple[int, int, str]:
    a, b = folded.span(start, end)
    return a, b, original[a:b]


def quantity(value: Decimal, unit_text: str) -> Quantity | None:
    """A quantity from a value and a unit spelling or code; None for an unknown unit."""
    unit = unit_of(unit_text)
    if unit is None:
        return None
    name, dimension, factor = unit
    return Quantity(value.normalize(), name, dimension, (value * factor).normalize())


def find_quantities(text: str, folded: Folded | None = None) -> list[Quantity]:
    f = folded if folded is not None else fold(text)
    found: list[Quantity] = []
    for m in _QUANTITY_RE.finditer(f.text):
        value = parse_number(m["num"])
        q = quantity(value, m["unit"]) if value is not None else None
        if q is None:
            continue
        start, end, written = _span(f, text, m.start(), m.end())
        found.append(Quantity(q.value, q.unit, q.dimension, q.base, start, end, written))
    return found


_CURRENCIES = {
    "$": None,
    "us$": "USD",
    "usd": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "dolares": "USD",
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "£": "GBP",
    "pesos": None,
}


def find_money(text: str, folded: Folded | None = None) -> list[Money]:
    f = folded if folded is not None else fold(text)
    found: list[Money] = []
    taken: list[tuple[int, int]] = []
    for regex in (_MONEY_BEFORE_RE, _MONEY_AFTER_RE):
        for m in regex.finditer(f.text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            value = parse_number(m["num"])
            if value is None:
                continue
            taken.append((m.start(), m.end()))
            start, end, written = _span(f, text, m.start(), m.end())
            found.append(Money(value, _CURRENCIES.get(m["cur"]), start, end, written))
    found.sort(key=lambda x: x.start)
    return found


def find_phones(text: str, folded: Folded | None = None) -> list[Phone]:
    f = folded if folded is not None else fold(text)
    found: list[Phone] = []
    for m in _EMERGENCY_RE.finditer(f.text):
        start, end, written = _span(f, text, m.start(), m.end())
        found.append(Phone(re.sub(r"\D", "", m.group()), True, start, end, written))
    for m in _PHONE_RE.finditer(f.text):
        digits = re.sub(r"\D", "", m.group())
        if len(digits) < MIN_PHONE_DIGITS:
            continue
        start, end, written = _span(f, text, m.start(), m.end())
        found.append(Phone(digits, False, start, end, written))
    found.sort(key=lambda x: x.start)
    return found


def same_phone(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= MIN_PHONE_DIGITS and long.endswith(short)
