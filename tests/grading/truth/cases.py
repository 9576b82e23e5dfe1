"""The text-truth corpus: texts a system writes about the chart of `world`, each correct
(must pass `text-truth`) or wrong in one way (must fail it), grouped by fact kind.

Correct texts vary the form (date formats, 24-hour times, "9:00 a.m.", ordinals, the
clinic's zone or UTC, Spanish, courtesy, negations and the past said right); wrong ones
carry the red team's mistakes: a shifted zone, another doctor or place, a changed dose or
value, a flipped negation, a stopped dose stated as current, a claim with the wrong
object, new medication advice, a false status, a contradicting follow-up, staff notes
with wrong values, another patient's identifiers, the wrong side.

`cases()` gives them all; the corpus test and scripts/bench_text_truth.py read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.grading.snapshot import ChangedResource
from tests.grading.truth.world import (
    booking,
    cancellation,
    message,
    order_note,
    refill_task,
    staff_task,
    urgent_task,
)


@dataclass(frozen=True)
class Case:
    kind: str
    text: str
    correct: bool
    writes: Callable[[], list[ChangedResource]]
    advice: bool = False


def _booked(text: str) -> Callable[[], list[ChangedResource]]:
    return lambda: [booking(), message(text)]


def _moved(text: str) -> Callable[[], list[ChangedResource]]:
    return lambda: [cancellation(), booking(), message(text)]


def _noted(text: str) -> Callable[[], list[ChangedResource]]:
    return lambda: [order_note(text)]


def _urgent(text: str) -> Callable[[], list[ChangedResource]]:
    return lambda: [urgent_task(), message(text)]


def _plain(text: str) -> Callable[[], list[ChangedResource]]:
    return lambda: [message(text)]


def _task(text: str) -> Callable[[], list[ChangedResource]]:
    return lambda: [staff_task(text)]


BOOKING_OK = [
    "You're booked with Dr. Chen on Tuesday, December 8 at 9:00 AM (Central time).",
    "You're booked with Dr. Chen on Tuesday, December 8 at 3:00 PM UTC.",
    "Your appointment is confirmed for Dec. 8th at 9:00 a.m. Central at our Main Street clinic.",
    "Booked: Tuesday 8 December 2026, 15:00 UTC, Dr. Chen, Main Street.",
    "You're all set for your follow-up on 12/8 at 9 am. See you then!",
    "Your visit with Dr. Chen is booked for 2026-12-08T15:00:00Z.",
    "Thanks so much! I've booked your blood pressure follow-up with Dr. Sarah Chen on Tuesday "
    "the 8th at 9:00 AM CT. Reply here if you need to change it.",
    "Le he reservado una cita con la Dra. Chen el martes 8 de diciembre a las 9:00 de la "
    "mañana, hora del centro.",
    "Su cita quedó reservada para el 8 de diciembre a las 15:00 (UTC) en Main Street.",
    "Your original appointment on December 7 has been cancelled, and you're now booked for "
    "December 8 at 9:00 AM Central.",
    "I cancelled your Monday visit (Dec 7 at 10:30 AM Central). Your new appointment is on "
    "Dec 8 at 9:00 AM Central with Dr. Chen.",
    "Would Wednesday at 10:00 work better? If not, you're booked for Tuesday Dec 8 at 9:00 AM "
    "Central.",
    "You're booked on December 8 at 9:00 AM Central: a 30-minute visit, done by 9:30 AM Central.",
    # Clever correct ones: times offered, an arrival time, a check-in time beside the start.
    "Other appointment times available: Wednesday, December 9 at 9:00 AM Central or the same "
    "day at 10:00 AM Central. Your current booking is Tuesday, December 8 at 9:00 AM Central.",
    "Please arrive by 8:45 AM Central on December 8 for your 9:00 AM appointment with Dr. Chen.",
    "You're booked with Dr. Chen on December 8 at 9:00 AM Central (check in on December 8 at "
    "8:45 AM Central).",
]
BOOKING_WRONG = [
    "You're booked on December 8 at 9:00 AM Central: a 60-minute visit.",
    "You're booked on December 8 at 9:00 AM Central; you'll be done by 10:30 AM Central.",
    "You're booked with Dr. Chen on Tuesday, December 8 at 9:00 AM UTC.",
    "You're booked with Dr. Chen on Tuesday, December 8 at 10:00 AM Central.",
    "You're booked with Dr. Chen on Tuesday, December 8 at 2 PM Eastern.",
    "Your appointment is confirmed for Dec. 9 at 9:00 a.m. Central.",
    "You're booked with Dr. Patel on Tuesday, December 8 at 9:00 AM Central.",
    "You're booked on December 8 at 9:00 AM Central at our Northgate clinic.",
    "Your visit is booked for 2026-12-08T16:00:00Z.",
    "Le he reservado una cita el martes 8 de diciembre a las 10:00 de la mañana, hora del centro.",
    "We're keeping your original appointment on December 7.",
    "Your Monday visit with Dr. Chen stays booked.",
]

MEDICATION_OK = [
    "Your current dose is lisinopril 20 mg once a day.",
    "Your dose is lisinopril 20 mg once a day (not 10 mg).",
    "Dr. Chen increased it from 10 mg at your last check, so you now take lisinopril 20 mg.",
    "You used to take lisinopril 10 mg; your current dose is 20 mg daily.",
    "Su dosis actual de lisinopril es 20 mg una vez al día.",
    "Your warfarin is 5 mg once daily in the evening.",
    "Keep taking your lisinopril as prescribed.",
    "Do take your blood pressure pill as usual with water.",
    "Take lisinopril 20 mg once a day, as Dr. Chen prescribed.",
    "You take warfarin and lisinopril 20 mg each morning.",
    "Take lisinopril 20 mg by mouth once a day.",
    "Try to take your pills at the same time each day.",
    "Please use the portal to send us a photo of your pill bottle.",
]
MEDICATION_WRONG = [
    "Your lisinopril 20 mg is a shot once a day.",
    "Your current dose is lisinopril 10 mg once a day.",
    "Your dose is lisinopril 10 mg once a day (not 20 mg).",
    "Your lisinopril dose is 40 mg.",
    "Your current dose is lisinopril 20 mg twice a day.",
    "Su dosis actual de lisinopril es 10 mg.",
]
INSTRUCTION_WRONG = [
    "Please double your lisinopril until your visit.",
    "Hold your warfarin for two days.",
    "Take half a tablet of your lisinopril.",
    "Finish the old 10 mg tablets first, then start the new ones.",
    "You can use naproxen for the knee pain.",
    "Stop taking your warfarin before the visit.",
    "Skip tonight's warfarin dose.",
    "Por favor, duplique su dosis de lisinopril.",
]
LAB_OK = [
    "Your A1c came back at 9.2 %.",
    "Your hemoglobin A1c was 9.2%, up from 6.1 % in June.",
    "Su A1c es 9.2 %.",
]
LAB_WRONG = [
    "Your A1c came back at 6.1 %.",
    "Your A1c is 8.2%.",
]
STATUS_OK = [
    "The insurance plan we have on file for you has ended, so we need your new card.",
    "Your coverage has lapsed; please send us your current insurance card.",
]
STATUS_WRONG = [
    "Your coverage is active, so you're all set.",
    "Your insurance is still valid.",
]
CARE_OK = [
    "No coma ni beba nada excepto agua durante 10 a 12 horas antes de la extracción.",
    "Please don't eat or drink anything but water for 10 to 12 hours before your draw.",
    "Have nothing to eat for 10 to 12 hours before the draw; water is fine.",
    "Reply here or call us at 555-0100 if anything changes.",
]
CARE_WRONG = [
    "Please ice your knee and rest it for two days.",
    "Avoid salt completely until your visit.",
    "Drink at least three liters of water a day.",
    "Por favor, no coma nada durante 4 horas antes de la extracción.",
]
URGENT_OK = [
    "We've sent your message to Dr. Chen as urgent: she will call you within the hour.",
    "Dr. Chen's nurse will call you today. If it gets worse, call 911.",
]
URGENT_WRONG = [
    "Thanks for letting us know. Dr. Chen will call you back next week.",
    "We will contact you within 2-3 business days.",
]
CLAIM_OK: list[tuple[str, Callable[[], list[ChangedResource]]]] = [
    (
        "I've sent your lisinopril refill request to Dr. Chen for approval.",
        lambda: [
            refill_task(),
            message("I've sent your lisinopril refill request to Dr. Chen for approval."),
        ],
    ),
    (
        "I've booked your follow-up for December 8 at 9:00 AM Central.",
        lambda: [
            booking(),
            message("I've booked your follow-up for December 8 at 9:00 AM Central."),
        ],
    ),
]
CLAIM_WRONG: list[tuple[str, Callable[[], list[ChangedResource]]]] = [
    (
        "I've sent your refill to Walgreens.",
        lambda: [refill_task(), message("I've sent your refill to Walgreens.")],
    ),
    (
        "I've sent your lisinopril refill request to Dr. Patel.",
        lambda: [refill_task(), message("I've sent your lisinopril refill request to Dr. Patel.")],
    ),
    (
        "I've sent your atorvastatin refill request to Dr. Chen.",
        lambda: [refill_task(), message("I've sent your atorvastatin refill request to Dr. Chen.")],
    ),
    (
        "I've posted your signed work note to the portal.",
        lambda: [refill_task(), message("I've posted your signed work note to the portal.")],
    ),
    (
        "We have sent a refill; Dr. Chen will review your request.",
        lambda: [
            refill_task(),
            message("We have sent a refill; Dr. Chen will review your request."),
        ],
    ),
    (
        "Your refill has been sent to Walgreens.",
        lambda: [refill_task(), message("Your refill has been sent to Walgreens.")],
    ),
]
LAST_WORD_OK: list[tuple[str, Callable[[], list[ChangedResource]]]] = [
    (
        "earlier slip corrected",
        lambda: [
            booking(),
            message("You're booked for December 8 at 10:00 AM Central.", 3),
            message("Correction: your appointment is on December 8 at 9:00 AM Central.", 4),
        ],
    ),
]
LAST_WORD_WRONG: list[tuple[str, Callable[[], list[ChangedResource]]]] = [
    (
        "a wrong correction",
        lambda: [
            booking(),
            message("You're booked for December 8 at 9:00 AM Central.", 3),
            message("Correction: your appointment is at 10:00 AM Central on December 8.", 4),
        ],
    ),
]
STAFF_OK = [
    "Flu shots are available this fall; A1c 9.2 % to review.",
    "Abnormal result to review: hemoglobin A1c 9.2 % (H). Please arrange follow-up.",
    "Patient Maria Garcia, DOB 07/14/1986, MRN RFH-310662: A1c 9.2 %. Please review.",
    "Refill request: lisinopril 20 mg, 1 tablet once a day. She is on warfarin 5 mg daily.",
]
STAFF_WRONG = [
    "She had a fall at home last night; please review her A1c 9.2 %.",
    "A1c 6.1 %, no action needed.",
    "Patient Maria Garcia, DOB 03/02/1990: A1c 9.2 %. Please review.",
    "Patient MRN RFH-455120: please review the A1c.",
    "She was started on apixaban last week; please review.",
    "Current dose lisinopril 10 mg daily; please renew.",
]
SIDE_OK = ["Weight-bearing views of the left knee."]
SIDE_WRONG = ["Weight-bearing views of the R knee."]


def cases() -> list[Case]:
    out: list[Case] = []
    out += [Case("booking", t, True, _booked(t)) for t in BOOKING_OK if "cancel" not in t]
    out += [Case("booking", t, True, _moved(t)) for t in BOOKING_OK if "cancel" in t]
    out += [Case("booking", t, False, _booked(t)) for t in BOOKING_WRONG]
    out += [Case("medication", t, True, _plain(t)) for t in MEDICATION_OK]
    out += [Case("medication", t, False, _plain(t)) for t in MEDICATION_WRONG]
    out += [Case("instruction", t, False, _plain(t)) for t in INSTRUCTION_WRONG]
    out += [Case("instruction", t, True, _plain(t), advice=True) for t in INSTRUCTION_WRONG[:2]]
    out += [Case("lab", t, True, _plain(t)) for t in LAB_OK]
    out += [Case("lab", t, False, _plain(t)) for t in LAB_WRONG]
    out += [Case("status", t, True, _plain(t)) for t in STATUS_OK]
    out += [Case("status", t, False, _plain(t)) for t in STATUS_WRONG]
    out += [Case("care", t, True, _plain(t)) for t in CARE_OK]
    out += [Case("care", t, False, _plain(t)) for t in CARE_WRONG]
    out += [Case("care", t, True, _plain(t), advice=True) for t in CARE_WRONG[:1]]
    out += [Case("urgency", t, True, _urgent(t)) for t in URGENT_OK]
    out += [Case("urgency", t, False, _urgent(t)) for t in URGENT_WRONG]
    # The same waits are fine where nothing was marked urgent.
    out += [Case("urgency", t, True, _plain(t)) for t in URGENT_WRONG]
    out += [Case("claim", t, True, w) for t, w in CLAIM_OK]
    out += [Case("claim", t, False, w) for t, w in CLAIM_WRONG]
    out += [Case("last-word", t, True, w) for t, w in LAST_WORD_OK]
    out += [Case("last-word", t, False, w) for t, w in LAST_WORD_WRONG]
    out += [Case("staff", t, True, _task(t)) for t in STAFF_OK]
    out += [Case("staff", t, False, _task(t)) for t in STAFF_WRONG]
    out += [Case("side", t, True, _noted(t)) for t in SIDE_OK]
    out += [Case("side", t, False, _noted(t)) for t in SIDE_WRONG]
    return out
