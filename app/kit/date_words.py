"""The words a date, weekday, time of day or zone is written with, in English and Spanish:
months, weekdays, number and ordinal words, zone names and abbreviations (as IANA
zones). The tables the date reader (`app.kit.dates`) matches against."""

from __future__ import annotations

MONTHS: dict[str, int] = {
    "january": 1,
    "jan": 1,
    "february": 2,
    "feb": 2,
    "march": 3,
    "mar": 3,
    "april": 4,
    "apr": 4,
    "may": 5,
    "june": 6,
    "jun": 6,
    "july": 7,
    "jul": 7,
    "august": 8,
    "aug": 8,
    "september": 9,
    "sept": 9,
    "sep": 9,
    "october": 10,
    "oct": 10,
    "november": 11,
    "nov": 11,
    "december": 12,
    "dec": 12,
    "enero": 1,
    "ene": 1,
    "febrero": 2,
    "marzo": 3,
    "abril": 4,
    "abr": 4,
    "mayo": 5,
    "junio": 6,
    "julio": 7,
    "agosto": 8,
    "ago": 8,
    "septiembre": 9,
    "setiembre": 9,
    "set": 9,
    "octubre": 10,
    "noviembre": 11,
    "diciembre": 12,
    "dic": 12,
}
# The Spanish names as written (with their accents), Monday and January first: for texts
# this project writes (the scenario check's paraphrases), not for reading.
SPANISH_WEEKDAYS = ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo")
SPANISH_MONTHS = (
    "enero",
    "febrero",
    "marzo",
    "abril",
    "mayo",
    "junio",
    "julio",
    "agosto",
    "septiembre",
    "octubre",
    "noviembre",
    "diciembre",
)
WEEKDAYS: dict[str, int] = {
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
    "lunes": 0,
    "martes": 1,
    "miercoles": 2,
    "jueves": 3,
    "viernes": 4,
    "sabado": 5,
    "domingo": 6,
}
# Abbreviations that are also words ("sat", "wed", "sun", "mar") count only before a date.
WEEKDAY_ABBREVIATIONS: dict[str, int] = {
    "mon": 0,
    "tue": 1,
    "tues": 1,
    "wed": 2,
    "thu": 3,
    "thur": 3,
    "thurs": 3,
    "fri": 4,
    "sat": 5,
    "sun": 6,
    "lun": 0,
    "mar": 1,
    "mie": 2,
    "mier": 2,
    "jue": 3,
    "vie": 4,
    "sab": 5,
    "dom": 6,
}
NUMBER_WORDS: dict[str, int] = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "una": 1,
    "uno": 1,
    "dos": 2,
    "tres": 3,
    "cuatro": 4,
    "cinco": 5,
    "seis": 6,
    "siete": 7,
    "ocho": 8,
    "nueve": 9,
    "diez": 10,
    "once": 11,
    "doce": 12,
}
# Days written as ordinal words: "the fourth of December", "December first", "primero de".
_UNITS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
ORDINAL_DAYS: dict[str, int] = {
    **{word: n for n, word in enumerate(_UNITS, start=1)},
    **{
        word: n
        for n, word in enumerate(
            (
                "tenth",
                "eleventh",
                "twelfth",
                "thirteenth",
                "fourteenth",
                "fifteenth",
                "sixteenth",
                "seventeenth",
                "eighteenth",
                "nineteenth",
                "twentieth",
            ),
            start=10,
        )
    },
    **{f"twenty-{word}": 20 + n for n, word in enumerate(_UNITS, start=1)},
    "thirtieth": 30,
    "thirty-first": 31,
    "primero": 1,
}
ORDINAL_LOOKUP = {word.replace("-", ""): n for word, n in ORDINAL_DAYS.items()}

# Time zones a text may state beside a time (`Stated.zone`), as IANA names. A standard or a
# daylight abbreviation (EST, EDT) names its region's zone: an instant is read in that
# zone's real offset on the day, as the writer meant the clock on the wall.
NEW_YORK = "America/New_York"
CHICAGO = "America/Chicago"
DENVER = "America/Denver"
PHOENIX = "America/Phoenix"  # Arizona keeps standard time all year
LOS_ANGELES = "America/Los_Angeles"
ANCHORAGE = "America/Anchorage"
HONOLULU = "Pacific/Honolulu"
ZONE_NAMES: dict[str, str] = {
    "eastern": NEW_YORK,
    "central": CHICAGO,
    "mountain": DENVER,
    "pacific": LOS_ANGELES,
    "arizona": PHOENIX,
    "alaska": ANCHORAGE,
    "hawaii": HONOLULU,
}
# Upper case in the text only ("10:00 CT", not "10:00 ct"): the letters are words too.
ZONE_ABBREVIATIONS: dict[str, str] = {
    "et": NEW_YORK,
    "est": NEW_YORK,
    "edt": NEW_YORK,
    "ct": CHICAGO,
    "cst": CHICAGO,
    "cdt": CHICAGO,
    "mt": DENVER,
    "mst": DENVER,
    "mdt": DENVER,
    "pt": LOS_ANGELES,
    "pst": LOS_ANGELES,
    "pdt": LOS_ANGELES,
    "akst": ANCHORAGE,
    "akdt": ANCHORAGE,
    "hst": HONOLULU,
}
# After "hora"/"horario": "hora del Este", "hora central", "horario del Pacífico".
SPANISH_ZONES: dict[str, str] = {
    "del este": NEW_YORK,
    "del centro": CHICAGO,
    "central": CHICAGO,
    "de la montana": DENVER,
    "de las montanas": DENVER,
    "del pacifico": LOS_ANGELES,
    "de arizona": PHOENIX,
    "de alaska": ANCHORAGE,
    "de hawai": HONOLULU,
    "de hawaii": HONOLULU,
    "utc": "UTC",
    "gmt": "UTC",
}
