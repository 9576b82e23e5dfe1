"""The regular expressions of the date reader (`app.kit.dates`): each written form of a
date, weekday, time of day and zone, built from the words of `app.kit.date_words`, and
the gaps that join or break a statement."""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.kit.date_words import (
    MONTHS,
    NUMBER_WORDS,
    ORDINAL_DAYS,
    SPANISH_ZONES,
    WEEKDAY_ABBREVIATIONS,
    WEEKDAYS,
    ZONE_ABBREVIATIONS,
    ZONE_NAMES,
)


def _alternation(words: Iterable[str]) -> str:
    return "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))


_MONTH = rf"(?P<month>{_alternation(MONTHS)})\.?"
_MONTH2 = rf"(?:{_alternation(MONTHS)})"
_ORD = r"(?:st|nd|rd|th|º|°|o|ro)?"
_YEAR = r"(?P<year>\d{4})"
_HOUR_WORD = _alternation(NUMBER_WORDS)
_B = r"(?<![\w$])"  # no letter, digit or currency sign right before
_E = r"(?![\w])"

ISO_RE = re.compile(
    rf"{_B}(?P<y>\d{{4}})-(?P<m>\d{{1,2}})-(?P<d>\d{{1,2}})"
    r"(?:[t ](?P<h>\d{1,2}):(?P<mi>\d{2})(?::\d{2}(?:\.\d+)?)?(?P<tz>z|[+-]\d{2}:?\d{2})?)?(?!\d)"
)
MONTH_DAY_RE = re.compile(
    rf"{_B}{_MONTH}\s+(?:the\s+)?(?P<day>\d{{1,2}}){_ORD}(?!\d|:\d)(?!\s*(?:am|pm|a\.|p\.))"
    rf"(?:,?\s+(?:de(?:l)?\s+)?{_YEAR}(?!\d))?"
)
DAY_MONTH_RE = re.compile(
    rf"{_B}(?P<day>\d{{1,2}}){_ORD}\s*(?:of\s+|de\s+)?{_MONTH}{_E}"
    rf"(?:,?\s+(?:de(?:l)?\s+)?{_YEAR}(?!\d))?"
)
NUMERIC_YEAR_RE = re.compile(
    rf"{_B}(?P<a>\d{{1,2}})(?P<sep>[/.-])(?P<b>\d{{1,2}})(?P=sep)(?P<y>\d{{4}}|\d{{2}})(?![\d/.-]\d)"
)
NUMERIC_RE = re.compile(r"(?<![\w$/.,])(?P<a>\d{1,2})/(?P<b>\d{1,2})(?![\d/]|[.,]\d)")
WEEKDAY_RE = re.compile(rf"{_B}(?P<weekday>{_alternation(WEEKDAYS)}){_E}")
WEEKDAY_ABBR_RE = re.compile(
    rf"{_B}(?P<weekday>{_alternation(WEEKDAY_ABBREVIATIONS)})\.?(?=,?\s*(?:\d|{_MONTH2}{_E}))"
)
# "Tuesday the 8th", "martes 8", "Tue 8": a day with no month, right after a weekday.
WEEKDAY_DAY_RE = re.compile(
    rf"{_B}(?P<weekday>{_alternation({**WEEKDAYS, **WEEKDAY_ABBREVIATIONS})})\.?,?\s+"
    rf"(?:the\s+|el\s+|dia\s+)?(?P<day>\d{{1,2}}){_ORD}(?![\d:./-]|\s*(?:am|pm|a\.|p\.|h\b|hrs?\b))"
)
ORDINAL_DAY_RE = re.compile(r"(?<![\w$])the\s+(?P<day>\d{1,2})(?:st|nd|rd|th)(?!\w)")
_DAY_WORD = "|".join(w.replace("-", "[- ]?") for w in sorted(ORDINAL_DAYS, key=len, reverse=True))
# "the fourth of December", "primero de diciembre"; "December fourth" with a month's full
# name only, and never "may" ("you may second it"). Python's engine scans slowly for an
# alternation of words, so these are tried only where `str.find` sees one of
# `ORDINAL_STEMS` (`_ordinal_dates`).
ORDINAL_STEMS = (
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "teenth",
    "tieth",
    "primero",
)
WORD_DAY_MONTH_RE = re.compile(
    rf"(?P<dayword>{_DAY_WORD})\s+(?:of|de)\s+{_MONTH}{_E}"
    rf"(?:,?\s+(?:de(?:l)?\s+)?{_YEAR}(?!\d))?"
)
_FULL_MONTHS = [m for m, n in MONTHS.items() if len(m) > 3 and m not in ("may", "mayo")]
MONTH_WORD_DAY_RE = re.compile(
    rf"(?P<month>{_alternation(_FULL_MONTHS)})\s+(?:the\s+)?(?P<dayword>{_DAY_WORD}){_E}"
    rf"(?:,?\s+{_YEAR}(?!\d))?"
)

_MERIDIEM = r"(?P<mer>am|pm|a\.\s?m\.?|p\.\s?m\.?|a\s?m\b|p\s?m\b)"
_QUALIFIER = (
    r"(?:\s*(?P<qual>de la manana|de la tarde|de la noche|del mediodia|de la madrugada"
    r"|in the morning|in the afternoon|in the evening|at night|en punto|o'?clock))?"
)
CLOCK_RE = re.compile(
    rf"(?<![\w$:.,])(?P<h>\d{{1,2}})(?::|h(?=\d))(?P<mi>\d{{2}})(?::\d{{2}})?(?![\d])"
    rf"(?:\s*(?:{_MERIDIEM}|hrs?\b|h\b))?{_QUALIFIER}"
)
# "9.30am", "9.30 h"; after "a las", "a las 9.30" alone (the regex starts with its literal,
# which Python's engine finds fast; the word boundary before it is checked by hand).
DOT_CLOCK_RE = re.compile(
    rf"(?<![\w$:.,])(?P<h>\d{{1,2}})\.(?P<mi>\d{{2}})\s*(?:{_MERIDIEM}|hrs?\b|h\b)"
)
LAS_DOT_CLOCK_RE = re.compile(
    rf"las?\s+(?P<h>\d{{1,2}})\.(?P<mi>\d{{2}})(?![\d.,]\d|\s*(?:%|mg|ml|\$|us|eur|dol|peso))"
    rf"(?:\s*(?:{_MERIDIEM}|hrs?\b|h\b))?{_QUALIFIER}"
)
HOUR_MERIDIEM_RE = re.compile(rf"(?<![\w$:.,])(?P<h>\d{{1,2}})\s*{_MERIDIEM}(?![a-z]){_QUALIFIER}")
SPOKEN_RE = re.compile(
    rf"(?<!\w)(?:(?P<lead>half past|quarter past|quarter to)\s+(?P<h1>\d{{1,2}}|{_HOUR_WORD})"
    rf"|(?:a\s+las?|las|at)\s+(?P<h2>\d{{1,2}}|{_HOUR_WORD})"
    r"(?:\s+(?P<tail>y media|y cuarto|menos cuarto|y (?P<mins>\d{1,2})"
    r"|thirty|fifteen|forty-five))?)"
    rf"(?!\w|:|\.\d|\s*(?:%|mg|ml|dollars?|dolares|pesos|euros|minutes|minutos|people|personas|units))"
    rf"(?:\s*{_MERIDIEM})?{_QUALIFIER}"
)
NOON_RE = re.compile(r"(?<!\w)(?:12\s+)?(?P<word>noon|midday|mediodia|midnight|medianoche)(?!\w)")

# A time zone, as folded text. `name` and `abbr` alone are "bare": after a time they count
# only before the end of a clause or words like "on", "and" ("10 AM Central Park" and
# "2 PM Eastern Avenue" state no zone), and `abbr` only in upper case.
_ZONE = (
    rf"(?P<name>{_alternation(ZONE_NAMES)})"
    r"(?P<name_time>\s+(?:standard\s+|daylight\s+|prevailing\s+)?time(?:\s+zone)?)?(?!\w)"
    rf"|(?P<abbr>{_alternation(ZONE_ABBREVIATIONS)})(?:/(?:{_alternation(ZONE_ABBREVIATIONS)}))?(?!\w)"
    r"|(?P<utc>utc|gmt)(?:\s?(?P<off>[+-]\d{1,2}(?::?\d{2})?))?(?![\w:])"
    rf"|(?:hora|horario)\s+(?:estandar\s+|de verano\s+)?(?P<es>{_alternation(SPANISH_ZONES)})(?!\w)"
    r"|(?P<universal>tiempo universal(?:\s+coordinado)?)(?!\w)"
)
ZONE_RE = re.compile(_ZONE)
ZONE_LEAD_RE = re.compile(r"\s*(?:,\s*)?")
ZONE_PAREN_RE = re.compile(rf"\(\s*(?:{_ZONE})\s*\)")
# A parenthesised zone right before a time: "(UTC) 10:00", "(hora del Este): 10:00".
ZONE_BEFORE_RE = re.compile(
    rf"(?P<paren>\(\s*(?:{_ZONE})\s*\))\s*:?\s*(?:(?:on|el|the|at|a las)\s+)?$"
)
ZONE_FOLLOW_RE = re.compile(
    r"\s*(?:$|[.,;:!?)\]/\"'*(-]|(?:on|tomorrow|today|tonight|this|next|and|or|then|if|is"
    r"|works|please|to|until|through|thru|sharp|y|o|el)(?!\w))"
)

# What may follow an English "at N" for N to be an hour ("see you at 10.", "at 3 on Friday").
AT_HOUR_FOLLOW_RE = re.compile(
    r"\s*(?:$|[.,;!?)]|-|(?:on|tomorrow|today|tonight|this|next|sharp|and|or|to|with|for|if"
    r"|then|in the|works|is|would|please)(?!\w))"
)
GAP_BREAK_RE = re.compile(r"[.!?;\n]|(?<!\w)(?:or|and|but|instead|not|o|u|y|pero|no|ni)(?!\w)")
BARE_CUE_RE = re.compile(
    r"(?:^|\W)(?:on|el|for|para|del|dia|by|until|hasta|since|through|thru|dated?|dates"
    r"|fechas?)\W*$"
)
# Between two dates of one list or range: "on 11/27 and 11/28", "del 27/11 al 28/11".
DATE_LIST_RE = re.compile(
    r"\s*(?:(?:,|-|&|and|or|to|through|thru|till|until|y|o|al|a|hasta)\s*){1,2}"
)
