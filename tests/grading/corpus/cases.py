"""The message-check corpus: staff messages with what the system was shown and wrote.

Six clinics (`WORLDS`), each with its zone, practitioner, offered slots, a medication, a
copay and a phone number, give every case its sources (the brief, the fixture Patient and
Practitioner, the `$find` Bundle of Slots, the MedicationRequest, an eligibility answer)
and its writes. Correct cases state facts in many written forms, English and Spanish, and
must pass `grounded`, `claims` and (where `mention` is set) `mentions`; wrong cases carry
one mistake and name the fields it must fail (`fails`, the first one primary).

`correct_cases()` and `wrong_cases()` build the lists; the corpus test and
scripts/bench_message_checks.py read them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from app.grading.message.claims import Write
from app.kit.dates import SPANISH_MONTHS, SPANISH_WEEKDAYS

WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS_EN = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS_ES = SPANISH_WEEKDAYS
MONTHS_ES = SPANISH_MONTHS
HOUR_WORDS = (
    "twelve",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
)


@dataclass(frozen=True)
class World:
    key: str
    zone: str
    spanish: bool
    clinic: str
    phone: str
    patient: str
    given: str
    family: str
    title: str  # "Dr." / "Dra."
    slots: tuple[str, ...]  # UTC instants offered; the first is the one booked
    drug: str
    dose: int
    unit: str
    copay: int


WORLDS = (
    World(
        "ny",
        "America/New_York",
        False,
        "Riverside Family Clinic",
        "(555) 010-0100",
        "Ana",
        "Sarah",
        "Chen",
        "Dr.",
        ("2026-12-08T15:30:00Z", "2026-12-09T19:00:00Z", "2026-12-11T14:00:00Z"),
        "lisinopril",
        20,
        "mg",
        25,
    ),
    World(
        "chi",
        "America/Chicago",
        False,
        "Lakeside Health",
        "312-555-0147",
        "Tom",
        "Miguel",
        "Ortega",
        "Dr.",
        ("2026-12-14T16:15:00Z", "2026-12-15T21:00:00Z", "2026-12-17T18:00:00Z"),
        "metformin",
        500,
        "mg",
        40,
    ),
    World(
        "la",
        "America/Los_Angeles",
        False,
        "Harbor Pediatrics",
        "+1 213 555 0199",
        "Grace",
        "Priya",
        "Raman",
        "Dr.",
        ("2026-12-10T17:30:00Z", "2026-12-10T22:45:00Z", "2026-12-12T20:00:00Z"),
        "amoxicillin",
        5,
        "mL",
        15,
    ),
    World(
        "utc",
        "UTC",
        False,
        "North Point Surgery",
        "555-0123",
        "Liam",
        "Amara",
        "Okafor",
        "Dr.",
        ("2026-12-21T09:00:00Z", "2026-12-22T13:30:00Z", "2026-12-23T16:45:00Z"),
        "levothyroxine",
        75,
        "mcg",
        30,
    ),
    World(
        "mad",
        "Europe/Madrid",
        True,
        "Centro de Salud Retiro",
        "+34 912 345 678",
        "Carmen",
        "Lucía",
        "Fernández",
        "Dra.",
        ("2026-12-16T09:30:00Z", "2026-12-16T15:00:00Z", "2026-12-18T11:00:00Z"),
        "omeprazol",
        20,
        "mg",
        12,
    ),
    World(
        "mx",
        "America/Mexico_City",
        True,
        "Clínica San Ángel",
        "55 5555 0134",
        "José",
        "Javier",
        "Morales",
        "Dr.",
        ("2026-12-09T16:00:00Z", "2026-12-10T23:30:00Z", "2026-12-11T15:30:00Z"),
        "losartán",
        50,
        "mg",
        300,
    ),
)


@dataclass(frozen=True)
class Case:
    id: str
    message: str
    sources: list[Any]
    writes: list[Write]
    zones: tuple[str, ...]
    mention: str | None = None  # an instant some message must state
    fails: tuple[str, ...] = ()  # empty: correct; else the fields this case must fail
    note: str = field(default="", compare=False)


def local(world: World, instant: str) -> datetime:
    return datetime.fromisoformat(instant.replace("Z", "+00:00")).astimezone(ZoneInfo(world.zone))


def _ordinal(day: int) -> str:
    if 11 <= day % 100 <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _h12(t: datetime) -> int:
    return t.hour % 12 or 12


def _ampm(t: datetime, style: str) -> str:
    pm = t.hour >= 12
    return {
        "AM": "PM" if pm else "AM",
        "am": "pm" if pm else "am",
        "a.m.": "p.m." if pm else "a.m.",
    }[style]


# English date-time forms; each takes the local time (and may use the weekday it is given,
# so a wrong-weekday case can pass another one).
def _en_part_of_day(t: datetime) -> str:
    return "in the morning" if t.hour < 12 else "in the afternoon"


def _en_forms() -> list[Callable[[datetime, int], str]]:
    return [
        lambda t, w: (
            f"{WEEKDAYS_EN[w]}, {MONTHS_EN[t.month - 1]} {t.day} at "
            f"{_h12(t)}:{t.minute:02d} {_ampm(t, 'AM')}"
        ),
        lambda t, w: (
            f"{WEEKDAYS_EN[w][:3]} {MONTHS_EN[t.month - 1][:3]} {t.day}, "
            f"{_h12(t)}:{t.minute:02d}{_ampm(t, 'am')}"
        ),
        lambda t, w: f"{WEEKDAYS_EN[w]} {t.month}/{t.day} at {t.hour}:{t.minute:02d}",
        lambda t, w: f"{WEEKDAYS_EN[w]} {t:%Y-%m-%d %H:%M}",
        lambda t, w: f"{WEEKDAYS_EN[w][:3]}, {MONTHS_EN[t.month - 1][:3]} {t.day} at {t:%H:%M}",
        lambda t, w: (
            f"{WEEKDAYS_EN[w]}, {MONTHS_EN[t.month - 1][:3]}. {t.day}{_ordinal(t.day)}, "
            f"{t.year} at {_h12(t)}:{t.minute:02d} {_ampm(t, 'a.m.')}"
        ),
        lambda t, w: (
            f"{WEEKDAYS_EN[w]}, {MONTHS_EN[t.month - 1]} {t.day} at "
            f"{_h12(t)}:{t.minute:02d}{_ampm(t, 'am')}"
        ),
        lambda t, w: (
            f"{WEEKDAYS_EN[w]} the {t.day}{_ordinal(t.day)} at "
            f"{_h12(t)}:{t.minute:02d} {_ampm(t, 'AM')}"
        ),
        lambda t, w: f"{WEEKDAYS_EN[w]} {t.day} {MONTHS_EN[t.month - 1]} at {t:%H:%M}",
        lambda t, w: (
            f"{WEEKDAYS_EN[w]}, {t.month}/{t.day}, at {_h12(t)}:{t.minute:02d} {_ampm(t, 'AM')}"
        ),
        lambda t, w: (
            f"{WEEKDAYS_EN[w]}, {MONTHS_EN[t.month - 1]} {t.day}, "
            + (
                "at noon"
                if (t.hour, t.minute) == (12, 0)
                else f"at half past {HOUR_WORDS[t.hour % 12]} {_en_part_of_day(t)}"
                if t.minute == 30
                else f"at {_h12(t)}:{t.minute:02d} {_ampm(t, 'AM')}"
            )
        ),
        lambda t, w: (
            f"{WEEKDAYS_EN[w]} ({t.month:02d}/{t.day:02d}/{t.year}) at "
            f"{_h12(t)}:{t.minute:02d} {_ampm(t, 'AM')}"
        ),
    ]


def _es_part_of_day(t: datetime) -> str:
    return "de la mañana" if t.hour < 12 else "de la tarde" if t.hour < 20 else "de la noche"


def _es_forms() -> list[Callable[[datetime, int], str]]:
    return [
        lambda t, w: f"el {WEEKDAYS_ES[w]} {t.day} de {MONTHS_ES[t.month - 1]} a las {t:%H:%M}",
        lambda t, w: (
            f"el {WEEKDAYS_ES[w]}, {t.day} de {MONTHS_ES[t.month - 1]}, a las "
            f"{_h12(t)}:{t.minute:02d} {_es_part_of_day(t)}"
        ),
        lambda t, w: (
            f"el {WEEKDAYS_ES[w]} {t.day} a las {_h12(t)}:{t.minute:02d} {_es_part_of_day(t)}"
        ),
        lambda t, w: f"el {WEEKDAYS_ES[w]} {t.day}/{t.month} a las {t:%H:%M}",
        lambda t, w: f"el {WEEKDAYS_ES[w]} {t.day} de {MONTHS_ES[t.month - 1]}, {t:%H:%M} h",
        lambda t, w: (
            f"el {WEEKDAYS_ES[w]} {t.day} de {MONTHS_ES[t.month - 1]} de {t.year} a las {t:%H:%M}"
        ),
        lambda t, w: (
            f"el {WEEKDAYS_ES[w]} {t.day} de {MONTHS_ES[t.month - 1]} a las "
            f"{_h12(t)}:{t.minute:02d} {'a. m.' if t.hour < 12 else 'p. m.'}"
        ),
        lambda t, w: (
            f"el {WEEKDAYS_ES[w]} {t.day} de {MONTHS_ES[t.month - 1]} "
            + (
                "a mediodía"
                if (t.hour, t.minute) == (12, 0)
                else f"a las {_h12(t)} y media {_es_part_of_day(t)}"
                if t.minute == 30
                else f"a las {t:%H:%M}"
            )
        ),
    ]


EN_FORMS = _en_forms()
ES_FORMS = _es_forms()


def say(
    world: World,
    instant: str,
    form: int,
    *,
    weekday_shift: int = 0,
    hours: int = 0,
    minutes: int = 0,
    days: int = 0,
) -> str:
    t = local(world, instant) + timedelta(hours=hours, minutes=minutes, days=days)
    forms = ES_FORMS if world.spanish else EN_FORMS
    return forms[form % len(forms)](t, (t.weekday() + weekday_shift) % 7)


def _plus_minutes(instant: str, minutes: int) -> str:
    t = datetime.fromisoformat(instant.replace("Z", "+00:00")) + timedelta(minutes=minutes)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def sources(world: World) -> list[Any]:
    brief = (
        f"{world.patient} Rivera asks for a follow-up visit with {world.title} {world.given} "
        f"{world.family} at {world.clinic}. Clinic phone: {world.phone}. Opening hours "
        f"8:00 to 17:00, Monday to Friday."
    )
    bundle = {
        "resourceType": "Bundle",
        "type": "searchset",
        "entry": [
            {
                "resource": {
                    "resourceType": "Slot",
                    "id": f"s{i}",
                    "status": "free",
                    "start": s,
                    "end": _plus_minutes(s, 30),
                    "schedule": {"reference": "Schedule/sch1"},
                }
            }
            for i, s in enumerate(world.slots)
        ],
    }
    practitioner = {
        "resourceType": "Practitioner",
        "id": "p1",
        "name": [{"family": world.family, "given": [world.given], "prefix": [world.title]}],
    }
    patient = {
        "resourceType": "Patient",
        "id": "pt1",
        "name": [{"family": "Rivera", "given": [world.patient]}],
        "telecom": [{"system": "phone", "value": "555-0188"}],
    }
    medication = {
        "resourceType": "MedicationRequest",
        "id": "mr1",
        "status": "active",
        "medicationCodeableConcept": {"text": world.drug},
        "dosageInstruction": [
            {
                "text": "once daily",
                "doseAndRate": [
                    {
                        "doseQuantity": {
                            "value": world.dose,
                            "unit": world.unit,
                            "system": "http://unitsofmeasure.org",
                        }
                    }
                ],
            }
        ],
    }
    eligibility = {"eligible": True, "copay": {"value": world.copay, "currency": "USD"}}
    return [brief, patient, practitioner, bundle, medication, eligibility]


def booked(world: World, slot: int = 0) -> Write:
    start = world.slots[slot]
    return Write(
        "Appointment",
        201,
        {
            "resourceType": "Appointment",
            "id": "a1",
            "status": "booked",
            "start": start,
            "participant": [
                {"actor": {"reference": "Patient/pt1"}},
                {"actor": {"reference": "Practitioner/p1"}},
            ],
        },
    )


def cancelled(world: World) -> Write:
    return Write(
        "Appointment",
        200,
        {"resourceType": "Appointment", "id": "a0", "status": "cancelled", "start": world.slots[0]},
    )


def refill(world: World) -> Write:
    return Write(
        "MedicationRequest",
        201,
        {"resourceType": "MedicationRequest", "status": "active", "intent": "order"},
    )


def referral() -> Write:
    return Write(
        "ServiceRequest",
        201,
        {"resourceType": "ServiceRequest", "status": "active", "intent": "order"},
    )


def to_practitioner() -> Write:
    return Write(
        "Communication",
        201,
        {
            "resourceType": "Communication",
            "status": "completed",
            "recipient": [{"reference": "Practitioner/p1"}],
        },
    )


def to_patient() -> Write:
    return Write(
        "Communication",
        201,
        {
            "resourceType": "Communication",
            "status": "completed",
            "recipient": [{"reference": "Patient/pt1"}],
        },
    )


# --- message templates ------------------------------------------------------------------
# Each takes (world, dt, dt2, dr) and gives the text; dt is the booked or mentioned time,
# dt2 another offered one, dr "Dr. Chen".

Template = Callable[[World, str, str, str], str]

EN_BOOKED: list[Template] = [
    lambda w, d, d2, dr: (
        f"Hi {w.patient}, you're all set: I've booked you with {dr} on {d}. "
        f"Call {w.phone} if you need to change it."
    ),
    lambda w, d, d2, dr: f"Done! I have scheduled your follow-up for {d} with {dr}.",
    lambda w, d, d2, dr: f"Your appointment has been booked for {d}. See you then!",
    lambda w, d, d2, dr: (
        f"Great news — I went ahead and booked {d} with {dr}. Your copay will be ${w.copay}."
    ),
    lambda w, d, d2, dr: (
        f"We booked you in for {d} at {w.clinic}. If anything changes, call us at {w.phone}."
    ),
    lambda w, d, d2, dr: f"Confirmed: {d}, {dr}, {w.clinic}. Please bring your insurance card.",
    lambda w, d, d2, dr: f"I've reserved {d} for you with {dr}. Reply here if you have questions.",
    lambda w, d, d2, dr: f"You are now booked for {d}. The visit is with {dr}.",
]
ES_BOOKED: list[Template] = [
    lambda w, d, d2, dr: f"Hola {w.patient}, le he reservado una cita con {dr} {d}.",
    lambda w, d, d2, dr: (
        f"Su cita quedó agendada para {d}. Si necesita cambiarla, llame al {w.phone}."
    ),
    lambda w, d, d2, dr: f"Listo: agendé su consulta para {d} con {dr}.",
    lambda w, d, d2, dr: f"Le confirmo que reservé su cita para {d}. El copago es de ${w.copay}.",
    lambda w, d, d2, dr: f"Buenos días. Ya le reservamos la cita {d} con {dr}.",
    lambda w, d, d2, dr: f"Su cita ha sido reservada para {d} en {w.clinic}.",
    lambda w, d, d2, dr: f"Le he agendado con {dr} {d}; cualquier duda, llame al {w.phone}.",
    lambda w, d, d2, dr: f"Hola, {w.patient}: le programé la visita de seguimiento para {d}.",
]
EN_NO_CLAIM: list[Template] = [
    lambda w, d, d2, dr: f"I can book you on {d} or {d2}. Which works better?",
    lambda w, d, d2, dr: f"Would you like me to book {d} with {dr}?",
    lambda w, d, d2, dr: f"I have not booked anything yet: {d} is open if you want it.",
    lambda w, d, d2, dr: (
        f"{dr} has openings on {d} and {d2}. I'll book whichever you choose once you confirm."
    ),
    lambda w, d, d2, dr: (
        f"Reminder: you have an appointment with {dr} on {d}. Reply C to confirm or call {w.phone}."
    ),
    lambda w, d, d2, dr: (
        f"Once I've booked it I will send you a confirmation. The first opening is {d}."
    ),
]
ES_NO_CLAIM: list[Template] = [
    lambda w, d, d2, dr: f"¿Quiere que le reserve una cita {d}? También tenemos {d2}.",
    lambda w, d, d2, dr: f"Puedo agendarle {d} o {d2}. ¿Cuál prefiere?",
    lambda w, d, d2, dr: f"Todavía no le he reservado nada: {dr} tiene libre {d}.",
    lambda w, d, d2, dr: (
        f"Le recordamos su cita con {dr} {d}. Si no puede venir, llame al {w.phone}."
    ),
    lambda w, d, d2, dr: f"Una vez que me confirme, le reservaré {d}.",
]


def _dr(world: World, i: int) -> str:
    if world.spanish:
        article = "la" if world.title == "Dra." else "el"
        word = "doctora" if world.title == "Dra." else "doctor"
        return (f"{article} {world.title} {world.family}", f"{article} {word} {world.family}")[
            i % 2
        ]
    return (f"Dr. {world.family}", f"Dr. {world.given} {world.family}", f"Doctor {world.family}")[
        i % 3
    ]


def _other_facts(world: World, i: int) -> list[tuple[str, list[Write]]]:
    """Correct messages that are not bookings: doses, refills, referrals, notes, info."""
    dose = f"{world.dose} {world.unit}" if i % 2 else f"{world.dose}{world.unit}"
    if world.spanish:
        dr = _dr(world, i)
        return [
            (
                f"He renovado su receta de {world.drug} {dose}. Tome {dose} una vez al día.",
                [refill(world)],
            ),
            (
                f"Su medicamento es {world.drug} {world.dose} miligramos, una vez al día."
                if world.unit == "mg"
                else f"Tome {dose} una vez al día.",
                [],
            ),
            (f"Avisé a {dr} de sus síntomas. Si empeora, llame al 911.", [to_practitioner()]),
            (
                "Le envié la solicitud de derivación a cardiología; le llamarán pronto.",
                [referral()],
            ),
            (f"El teléfono de {world.clinic} es {world.phone}. Abrimos de 8:00 a 17:00.", []),
            (
                f"Cancelé su cita anterior, como pidió. Para una nueva, llame al {world.phone}.",
                [cancelled(world)],
            ),
            ("Gracias por su mensaje. Le responderemos lo antes posible.", []),
            (f"No he cancelado su cita: sigue en pie. El copago es de ${world.copay}.", []),
        ]
    dr = _dr(world, i)
    return [
        (
            f"I've renewed your {world.drug} {dose} prescription; keep taking {dose} once a day.",
            [refill(world)],
        ),
        (f"Your chart says {world.drug} {dose} once daily. Please keep taking it.", []),
        (
            f"I've let {dr} know about your symptoms. If it gets worse, call 911.",
            [to_practitioner()],
        ),
        ("I've sent a referral to cardiology; they will call you within a few days.", [referral()]),
        (f"Our phone number is {world.phone}. We're open 8:00 to 17:00, Monday to Friday.", []),
        (
            f"I have cancelled your appointment as you asked. Call {world.phone} to rebook.",
            [cancelled(world)],
        ),
        (f"Your copay for this visit is ${world.copay}.00.", []),
        ("Thanks for reaching out! We will get back to you shortly.", []),
        (
            f"I can't refill {world.drug} myself, so I've notified {dr}; "
            "you will hear back within a day.",
            [to_practitioner()],
        ),
        (
            f"Your appointment was cancelled by the clinic. I can book you again: "
            f"{dr} is available most weekdays.",
            [],
        ),
    ]


def correct_cases() -> list[Case]:
    cases: list[Case] = []
    for world in WORLDS:
        src = sources(world)
        zones = (world.zone,)
        booked_t = EN_BOOKED if not world.spanish else ES_BOOKED
        no_claim_t = EN_NO_CLAIM if not world.spanish else ES_NO_CLAIM
        forms = len(ES_FORMS if world.spanish else EN_FORMS)
        n = 0
        for slot in range(len(world.slots)):
            for j, template in enumerate(booked_t):
                form = (j + slot * 3) % forms
                d = say(world, world.slots[slot], form)
                d2 = say(world, world.slots[(slot + 1) % 3], form + 1)
                message = template(world, d, d2, _dr(world, j + slot))
                cases.append(
                    Case(
                        f"{world.key}-booked-{slot}-{j}",
                        message,
                        src,
                        [booked(world, slot)],
                        zones,
                        world.slots[slot],
                    )
                )
                n += 1
        for j, template in enumerate(no_claim_t):
            for slot in range(2):
                d = say(world, world.slots[slot], j + slot)
                d2 = say(world, world.slots[slot + 1], j + slot + 2)
                message = template(world, d, d2, _dr(world, j))
                cases.append(Case(f"{world.key}-offer-{j}-{slot}", message, src, [], zones))
        for j, (message, writes) in enumerate(_other_facts(world, 0) + _other_facts(world, 1)):
            cases.append(Case(f"{world.key}-other-{j}", message, src, writes, zones))
    return cases


def wrong_cases() -> list[Case]:
    cases: list[Case] = []
    for world in WORLDS:
        src = sources(world)
        zones = (world.zone,)
        booked_t = EN_BOOKED if not world.spanish else ES_BOOKED
        for j, template in enumerate(booked_t):
            slot = j % 3
            instant = world.slots[slot]
            dr = _dr(world, j)
            other = say(world, world.slots[(slot + 1) % 3], j + 1)
            wid = f"{world.key}-{j}"
            # An invented time: an hour later than any offered slot.
            invented = say(world, instant, j, hours=1, minutes=15)
            message = template(world, invented, other, dr)
            cases.append(
                Case(
                    f"{wid}-invented-time",
                    message,
                    src,
                    [booked(world, slot)],
                    zones,
                    instant,
                    ("grounded", "mentions"),
                )
            )
            # The right date and time with the wrong weekday.
            wrong_day = say(world, instant, j, weekday_shift=1)
            message = template(world, wrong_day, other, dr)
            cases.append(
                Case(
                    f"{wid}-wrong-weekday",
                    message,
                    src,
                    [booked(world, slot)],
                    zones,
                    instant,
                    ("grounded", "mentions"),
                )
            )
            # A claimed booking with no write at all.
            right = say(world, instant, j)
            message = template(world, right, other, dr)
            if template in (EN_BOOKED[5],):  # "Confirmed: …" claims nothing: state a claim
                message = f"I've booked it. {message}"
            if template in (EN_BOOKED[7],):
                message = message.replace("You are now booked", "You have now been booked")
            cases.append(Case(f"{wid}-no-write", message, src, [], zones, instant, ("claims",)))
            # A booking claimed, only a cancellation written.
            if j % 2 == 0:
                cases.append(
                    Case(
                        f"{wid}-wrong-write",
                        message,
                        src,
                        [cancelled(world)],
                        zones,
                        instant,
                        ("claims",),
                    )
                )
            # Booked slot A, the message names another offered slot.
            cases.append(
                Case(
                    f"{wid}-other-slot",
                    template(world, other, right, dr),
                    src,
                    [booked(world, slot)],
                    zones,
                    instant,
                    ("mentions",),
                )
            )
            # A date a week off (no slot that day).
            off = say(world, instant, j, days=7)
            message = template(world, off, other, dr)
            cases.append(
                Case(
                    f"{wid}-wrong-date",
                    message,
                    src,
                    [booked(world, slot)],
                    zones,
                    instant,
                    ("grounded", "mentions"),
                )
            )
        cases.extend(_wrong_facts(world, src, zones))
    return cases


def _wrong_facts(world: World, src: list[Any], zones: tuple[str, ...]) -> list[Case]:
    k = world.key
    bad_dose = f"{world.dose * 2} {world.unit}"
    digits = [c for c in world.phone]
    last = next(i for i in range(len(digits) - 1, -1, -1) if digits[i].isdigit())
    digits[last] = str((int(digits[last]) + 3) % 10)
    bad_phone = "".join(digits)
    if world.spanish:
        return [
            Case(
                f"{k}-dose",
                f"Tome {bad_dose} de {world.drug} una vez al día.",
                src,
                [],
                zones,
                fails=("grounded",),
            ),
            Case(
                f"{k}-dose-2",
                f"He renovado su receta: {world.drug} {bad_dose}.",
                src,
                [refill(world)],
                zones,
                fails=("grounded",),
            ),
            Case(
                f"{k}-phone",
                f"Si necesita algo, llame al {bad_phone}.",
                src,
                [],
                zones,
                fails=("grounded",),
            ),
            Case(
                f"{k}-money",
                f"El copago es de ${world.copay + 10}.",
                src,
                [],
                zones,
                fails=("grounded",),
            ),
            Case(
                f"{k}-name", "Le atenderá la Dra. Villanueva.", src, [], zones, fails=("grounded",)
            ),
            Case(
                f"{k}-refill-no-write",
                f"He renovado su receta de {world.drug}.",
                src,
                [],
                zones,
                fails=("claims",),
            ),
            Case(
                f"{k}-notify-patient-only",
                f"Avisé a la doctora {world.family} de sus síntomas.",
                src,
                [to_patient()],
                zones,
                fails=("claims",),
            ),
            Case(
                f"{k}-cancel-no-write",
                "Cancelé su cita del martes.",
                src,
                [],
                zones,
                fails=("claims",),
            ),
            Case(
                f"{k}-referral-no-write",
                "Le envié la derivación al cardiólogo.",
                src,
                [booked(world)],
                zones,
                fails=("claims",),
            ),
            Case(f"{k}-time", "Abrimos a las 7:15.", src, [], zones, fails=("grounded",)),
        ]
    return [
        Case(
            f"{k}-dose",
            f"Take {bad_dose} of {world.drug} once a day.",
            src,
            [],
            zones,
            fails=("grounded",),
        ),
        Case(
            f"{k}-dose-2",
            f"I've renewed your {world.drug} {bad_dose} prescription.",
            src,
            [refill(world)],
            zones,
            fails=("grounded",),
        ),
        Case(
            f"{k}-phone",
            f"If you need anything, call {bad_phone}.",
            src,
            [],
            zones,
            fails=("grounded",),
        ),
        Case(
            f"{k}-money", f"Your copay is ${world.copay + 10}.", src, [], zones, fails=("grounded",)
        ),
        Case(f"{k}-name", "Dr. Nakamura will see you.", src, [], zones, fails=("grounded",)),
        Case(
            f"{k}-refill-no-write",
            f"I've refilled your {world.drug}.",
            src,
            [],
            zones,
            fails=("claims",),
        ),
        Case(
            f"{k}-notify-patient-only",
            f"I've let Dr. {world.family} know.",
            src,
            [to_patient()],
            zones,
            fails=("claims",),
        ),
        Case(
            f"{k}-cancel-no-write",
            "I have cancelled your appointment.",
            src,
            [],
            zones,
            fails=("claims",),
        ),
        Case(
            f"{k}-referral-no-write",
            "I've sent a referral to dermatology.",
            src,
            [booked(world)],
            zones,
            fails=("claims",),
        ),
        Case(f"{k}-time", "We open at 7:15 tomorrow.", src, [], zones, fails=("grounded",)),
    ]


def _handwritten() -> tuple[list[Case], list[Case]]:
    """Phrasings the templates do not produce: ranges, several facts, hedges, near misses."""
    ny, mad = WORLDS[0], WORLDS[4]
    s_ny, s_mad = sources(ny), sources(mad)
    z_ny, z_mad = (ny.zone,), (mad.zone,)
    b_ny, b_mad = [booked(ny)], [booked(mad)]
    at_ny, at_mad = ny.slots[0], mad.slots[0]
    correct = [
        Case(
            "hw-range",
            "Your slot is Tuesday, December 8, 10:30–11:00 AM with Dr. Chen.",
            s_ny,
            b_ny,
            z_ny,
            at_ny,
        ),
        Case(
            "hw-possessive",
            "I've booked you into Dr. Chen's 10:30 AM slot on Tuesday, December 8.",
            s_ny,
            b_ny,
            z_ny,
            at_ny,
        ),
        Case(
            "hw-two-sentences",
            "I've booked your visit for Tuesday, December 8. It starts at "
            "10:30 AM, please arrive 15 minutes early.",
            s_ny,
            b_ny,
            z_ny,
            at_ny,
        ),
        Case("hw-utc", "Booked! Dec 8, 15:30 UTC (10:30 AM your time).", s_ny, b_ny, z_ny, at_ny),
        Case(
            "hw-iso", "Appointment booked: 2026-12-08T10:30 (clinic time).", s_ny, b_ny, z_ny, at_ny
        ),
        Case(
            "hw-emergency",
            "If the pain gets worse before Tuesday, call 911 or go to the nearest emergency room.",
            s_ny,
            [],
            z_ny,
        ),
        Case(
            "hw-half-tablet",
            "You can take 1/2 tablet if it upsets your stomach; ask Dr. Chen first.",
            s_ny,
            [],
            z_ny,
        ),
        Case(
            "hw-duration",
            "The visit takes about 30 minutes; please come 10 minutes early.",
            s_ny,
            [],
            z_ny,
        ),
        Case("hw-weekdays", "We're open Monday to Friday, so Wednesday works too.", s_ny, [], z_ny),
        Case(
            "hw-question-claim",
            "I have booked Tuesday at 10:30 — or would you rather have Wednesday?",
            s_ny,
            [],
            z_ny,
        ),
        Case(
            "hw-cancelled-by-clinic",
            "Your appointment has been cancelled by the clinic; "
            "would you like me to book another time?",
            s_ny,
            [],
            z_ny,
        ),
        Case(
            "hw-future",
            "I will book you for Tuesday, December 8 at 10:30 AM as soon as you reply yes.",
            s_ny,
            [],
            z_ny,
        ),
        Case(
            "hw-cant",
            f"I couldn't book Tuesday because the system was down; please call {ny.phone}.",
            s_ny,
            [],
            z_ny,
        ),
        Case(
            "hw-money-words",
            f"The copay is {ny.copay} dollars, payable at check-in.",
            s_ny,
            [],
            z_ny,
        ),
        Case("hw-grams", "That is 0.02 g, the same as your usual 20 mg dose.", s_ny, [], z_ny),
        Case(
            "hw-md",
            "Sarah Chen, MD, will see you on Tuesday, December 8 at 10:30 AM. I've booked it.",
            s_ny,
            b_ny,
            z_ny,
            at_ny,
        ),
        Case(
            "hw-noon-wording",
            "Your slot with Dr. Chen is booked, see you Tuesday, December 8 "
            "at 10:30 in the morning.",
            s_ny,
            b_ny,
            z_ny,
            at_ny,
        ),
        Case(
            "hw-es-no",
            "No le he cancelado nada; su cita sigue el miércoles 16 de diciembre a las 10:30.",
            s_mad,
            [],
            z_mad,
            at_mad,
        ),
        Case(
            "hw-es-offer",
            "Si le parece bien, puedo reservarle el miércoles 16 a las 10:30. ¿Le viene bien?",
            s_mad,
            [],
            z_mad,
        ),
        Case(
            "hw-es-mediodia",
            "Le recuerdo que el viernes 18 de diciembre a mediodía tiene libre la Dra. Fernández.",
            s_mad,
            [],
            z_mad,
        ),
        Case(
            "hw-es-dos-frases",
            "Le he reservado la cita del miércoles 16 de diciembre. Empieza a las 10:30.",
            s_mad,
            b_mad,
            z_mad,
            at_mad,
        ),
        Case(
            "hw-es-telefono",
            f"Para cualquier cambio, llame al {mad.phone} o, si es urgente, al 112.",
            s_mad,
            [],
            z_mad,
        ),
        Case("hw-es-dosis", "Tome 20 miligramos de omeprazol en ayunas.", s_mad, [], z_mad),
        Case("hw-es-euros", f"El copago es de {mad.copay} euros.", s_mad, [], z_mad),
        Case(
            "hw-es-quiere",
            "¿Quiere que le reserve la cita del miércoles 16 a las 10:30?",
            s_mad,
            [],
            z_mad,
        ),
    ]
    wrong = [
        Case(
            "hw-w-range-end",
            "Your slot is Tuesday, December 8, 10:30–11:30 AM.",
            s_ny,
            b_ny,
            z_ny,
            at_ny,
            ("grounded",),
        ),
        Case(
            "hw-w-two-sentences",
            "I've booked your visit for Tuesday, December 8. It starts at 11:30 AM.",
            s_ny,
            b_ny,
            z_ny,
            at_ny,
            ("mentions", "grounded"),
        ),
        Case(
            "hw-w-pm",
            "Booked: Tuesday, December 8 at 10:30 PM.",
            s_ny,
            b_ny,
            z_ny,
            at_ny,
            ("mentions", "grounded"),
        ),
        Case(
            "hw-w-passive-no-write",
            "Your appointment has been scheduled for Tuesday, December 8 at 10:30 AM.",
            s_ny,
            [],
            z_ny,
            at_ny,
            ("claims",),
        ),
        Case("hw-w-grams", "Take 2 g of lisinopril daily.", s_ny, [], z_ny, fails=("grounded",)),
        Case(
            "hw-w-weekday-only",
            "We can also see you Saturday morning.",
            s_ny,
            [],
            z_ny,
            fails=("grounded",),
        ),
        Case(
            "hw-w-es-tarde",
            "Le he reservado el miércoles 16 de diciembre a las 10:30 de la noche.",
            s_mad,
            b_mad,
            z_mad,
            at_mad,
            ("mentions", "grounded"),
        ),
        Case(
            "hw-w-es-no-write",
            "Le he reservado una cita para el miércoles 16 a las 10:30.",
            s_mad,
            [],
            z_mad,
            at_mad,
            ("claims",),
        ),
        Case(
            "hw-w-es-dr",
            "Le atenderá el Dr. Gómez el miércoles 16 de diciembre a las 10:30.",
            s_mad,
            b_mad,
            z_mad,
            at_mad,
            ("grounded",),
        ),
        Case(
            "hw-w-es-weekday",
            "Su cita es el jueves 16 de diciembre a las 10:30.",
            s_mad,
            b_mad,
            z_mad,
            at_mad,
            ("grounded", "mentions"),
        ),
    ]
    return correct, wrong


def all_correct() -> list[Case]:
    return correct_cases() + _handwritten()[0]


def all_wrong() -> list[Case]:
    return wrong_cases() + _handwritten()[1]
