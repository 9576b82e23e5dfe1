"""The claim lexicon: the words that claim an action, and the writes that back each one.

Data only; `claims` reads it. Every action has
- `kinds`: the names of the `WRITE_KINDS` that back it (any one will do);
- English: `active` verb phrases after "I"/"we" ("I've booked", "we just sent"),
  `passive` participles after "has/have been" ("has been booked"), written as regex
  fragments over folded text (lower case, no accents, `'` for every apostrophe);
- Spanish (accents kept: "reservé" claims, "reserve" is the subjunctive of an offer):
  `preterite` first-person forms ("reservé", "hice la cita"), `participles` after
  "he/hemos" and "ha sido/fue/quedó" (masculine singular, the other endings are derived),
  and `plural` first-person plural preterites, which count only after "ya" ("ya le
  reservamos"; alone they read as the present).
- `needs_staff_object`: the claim counts only when staff is named after it ("I've notified
  Dr. Chen", "avisé a la doctora"): "I have informed you that…" is the message itself.
- `subject_passive`: whole claims with their subject ("your refill was sent", the simple
  past included, which the bare passives leave alone), and `not_after`, words after one
  that make it another claim ("… sent to Dr. Chen for review").

A write kind is a resource type, the statuses its body may have (`None`: any), and for a
Communication whether the recipient must be staff (not the patient). A delete (a write
with no body) backs only the `cancel` kinds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WriteKind:
    resource_type: str
    statuses: frozenset[str] | None = None
    staff_recipient: bool = False  # a Communication to a practitioner, care team or org
    deletes: bool = False  # a delete of this type backs it too


@dataclass(frozen=True, slots=True)
class Action:
    kinds: tuple[str, ...]
    active: tuple[str, ...] = ()
    passive: tuple[str, ...] = ()
    preterite: tuple[str, ...] = ()
    participles: tuple[str, ...] = ()
    plural: tuple[str, ...] = ()
    needs_staff_object: bool = False
    # Objects right after the verb that make it another action ("booked an interpreter").
    not_objects: str = ""
    # Whole claims naming their subject, matched as they stand ("your refill was sent"):
    # the subject decides the action, and the simple past counts ("was sent"), which the
    # bare `passive` forms leave alone (too often a description of what already was).
    subject_passive: tuple[str, ...] = ()
    # Words after the claim that make it another one ("… sent to Dr. Chen for review" is
    # a request forwarded to staff, not the refill itself sent).
    not_after: str = ""


_MESSAGE_OBJECT = (
    r"(?:you |him |her |them |le |te |les |lo |la )?(?:a |an |the |this |these |that |un |una "
    r"|el |la |este |esta |ese |esa )?(?:message|text|note|email|e-mail|sms|confirmation"
    r"|reminder|mensaje|correo|texto|sms|nota|recordatorio|confirmación|aviso)"
)

_ACTIVE_APPOINTMENT = frozenset(
    {"proposed", "pending", "booked", "arrived", "fulfilled", "checked-in", "waitlist"}
)

WRITE_KINDS: dict[str, WriteKind] = {
    "appointment-booked": WriteKind("Appointment", _ACTIVE_APPOINTMENT),
    "appointment-cancelled": WriteKind("Appointment", frozenset({"cancelled"}), deletes=True),
    "service-request": WriteKind("ServiceRequest"),
    "service-request-revoked": WriteKind("ServiceRequest", frozenset({"revoked"}), deletes=True),
    "medication-request": WriteKind("MedicationRequest"),
    "medication-request-stopped": WriteKind(
        "MedicationRequest", frozenset({"cancelled", "stopped"}), deletes=True
    ),
    "task": WriteKind("Task"),
    "task-cancelled": WriteKind("Task", frozenset({"cancelled"}), deletes=True),
    "communication": WriteKind("Communication"),
    "communication-staff": WriteKind("Communication", staff_recipient=True),
    "communication-request": WriteKind("CommunicationRequest"),
    "flag": WriteKind("Flag"),
    "document": WriteKind("DocumentReference"),
    "patient": WriteKind("Patient"),
}

# Recipients that are staff, for `staff_recipient`.
STAFF_REFERENCE_TYPES = frozenset({"Practitioner", "PractitionerRole", "CareTeam", "Organization"})

# Words after a notify-like verb that name staff, not the patient.
STAFF_NOUNS = (
    r"dr\b|dra\b|doctor|doctora|nurse|team|provider|physician|pharmac|office|specialist|staff"
    r"|clinician|front desk|care coordinator|surgeon|cardiolog|dermatolog|medico|medica"
    r"|equipo|enfermer|farmacia|personal|clinica|consultorio|especialista|proveedor"
)

ACTIONS: dict[str, Action] = {
    "booked": Action(
        kinds=("appointment-booked",),
        active=(
            r"booked",
            r"scheduled",
            r"reserved",
            r"made (?:you |your )?(?:an |the |a new )?appointment",
            r"got you (?:in|booked|scheduled)",
            r"penciled you in",
            r"pencilled you in",
            r"secured (?:you |your )?(?:a |the )?(?:slot|spot|appointment)",
            r"set (?:you |it )?up (?:an |the |a |your )?appointment",
        ),
        passive=(r"booked", r"scheduled", r"reserved", r"made"),
        preterite=(
            r"reservé",
            r"agendé",
            r"programé",
            r"hice (?:su |tu |la |una )?cita",
            r"conseguí (?:una |la |su |tu )?cita",
            r"aparté",
        ),
        participles=("reservado", "agendado", "programado", "apartado"),
        plural=("reservamos", "agendamos", "programamos"),
        not_objects=(
            r"(?:you |your |an? |the |un |una |el |la |su )*(?:interpreter|translator|ride"
            r"|transport|taxi|cab|uber|lyft|parking|room|hotel|flight|shuttle|intérprete"
            r"|interprete|traductor|transporte|habitación|sala|reminder|call|callback"
            r"|recordatorio|llamada)"
        ),
    ),
    "rescheduled": Action(
        kinds=("appointment-booked",),
        active=(
            r"rescheduled",
            r"rebooked",
            r"moved (?:you|your|it|the)",
            r"changed (?:your|the) appointment",
            r"switched (?:you|your|it|the)",
        ),
        passive=(r"rescheduled", r"moved", r"changed"),
        preterite=(
            r"reprogramé",
            r"cambié (?:su |tu |la )?(?:cita|hora)",
            r"moví (?:su |tu |la )?cita",
        ),
        participles=("reprogramado",),
        plural=("reprogramamos",),
    ),
    "cancelled": Action(
        kinds=(
            "appointment-cancelled",
            "service-request-revoked",
            "medication-request-stopped",
            "task-cancelled",
        ),
        active=(r"cancell?ed", r"called off"),
        passive=(r"cancell?ed", r"called off"),
        preterite=(r"cancelé", r"anulé"),
        participles=("cancelado", "anulado"),
        plural=("cancelamos", "anulamos"),
    ),
    "referred": Action(
        kinds=("service-request", "task"),
        active=(
            r"referred",
            r"(?:placed|put in|submitted|sent|made|entered) (?:a |the |your |an )?referral",
        ),
        passive=(r"referred",),
        preterite=(r"derivé", r"referí", r"remití", r"hice (?:la |una |su |tu )?derivación"),
        participles=("derivado", "referido", "remitido"),
        plural=("derivamos", "referimos"),
    ),
    "ordered": Action(
        kinds=("service-request", "medication-request"),
        active=(r"ordered", r"(?:placed|put in|submitted|entered) (?:an |the |your )?order"),
        passive=(r"ordered", r"placed"),
        preterite=(
            r"ordené",
            r"pedí (?:el |la |los |las |un |una |su |sus |tu |tus )?"
            r"(?:análisis|analisis|prueba|estudio|examen|laboratorio"
            r"|radiografía|ecografía)",
        ),
        participles=("ordenado",),
    ),
    # A prescription said to have gone out (to the pharmacy): only a MedicationRequest backs
    # it; an escalation Task does not ("your refill was sent" while it waits on a doctor).
    "prescription-sent": Action(
        kinds=("medication-request",),
        subject_passive=(
            r"your\s+(?:[a-z'-]+\s+){0,2}?(?:refill|prescription|renewal|rx|medication|medicine)s?"
            r"\s+(?:(?:has|have)\s+been|was|were|is\s+now|are\s+now)\s+"
            r"(?:(?:just|already|also|now|successfully)\s+)*"
            r"(?:sent|submitted|called in|faxed|e-?prescribed|transmitted)",
            r"su\s+(?:receta|renovación|renovacion|resurtido|medicamento|medicina)s?"
            r"\s+(?:fue|fueron|ha sido|han sido|quedó|quedaron)\s+(?:ya\s+)?"
            r"(?:enviad|mandad)[oa]s?",
        ),
        not_after=(
            r"\s+(?:to|a|al|para)\s+(?:(?:the|your|la|el|su)\s+)?"
            r"(?:dr\b|dra\b|doctor|doctora|nurse|provider|physician|clinician|specialist|care team"
            r"|team|médic|medic|equipo)"
            r"|\s+(?:for|para)\s+(?:(?:his|her|their|the|a|su)\s+)?(?:review|approval|sign|revisión"
            r"|revision|aprobación|aprobacion)"
        ),
    ),
    "refilled": Action(
        kinds=("medication-request", "task"),
        active=(
            r"refilled",
            r"renewed",
            r"(?:sent|submitted|approved|authorized|processed) "
            r"(?:in )?(?:a |the |your )?(?:refill|renewal)",
        ),
        passive=(r"refilled", r"renewed"),
        preterite=(r"renové", r"resurtí", r"repuse"),
        participles=("renovado", "resurtido"),
    ),
    "sent": Action(
        kinds=(
            "communication",
            "communication-request",
            "task",
            "service-request",
            "medication-request",
            "document",
        ),
        active=(
            r"sent(?! you (?:this|these)\b)",
            r"forwarded",
            r"faxed",
            r"emailed",
            r"submitted",
            r"passed (?:it|this|that|your (?:message|request|question)s?) (?:along|on)",
        ),
        passive=(r"sent", r"forwarded", r"faxed", r"submitted", r"passed (?:along|on)"),
        preterite=(
            r"envié",
            r"mandé",
            r"reenvié",
            r"pasé (?:su |tu |el )?(?:mensaje|solicitud|pedido)",
        ),
        participles=("enviado", "mandado", "reenviado"),
        plural=("enviamos", "mandamos"),
        # A message sent is the `sent-message` action: to staff, or it is this very message.
        not_objects=_MESSAGE_OBJECT,
    ),
    "sent-message": Action(
        kinds=("communication-staff", "task", "communication-request"),
        active=(
            r"sent (?:a |an |the )?(?:message|text|note|email|e-mail|sms)",
            r"messaged",
        ),
        preterite=(
            r"(?:envié|mandé|he enviado|hemos enviado|he mandado) (?:un |el |una |la )?"
            r"(?:mensaje|correo|texto|sms|nota|aviso)",
        ),
        needs_staff_object=True,
    ),
    "requested": Action(
        kinds=(
            "service-request",
            "medication-request",
            "task",
            "communication-staff",
            "communication-request",
        ),
        active=(r"requested", r"put in (?:a |the |your )?request", r"made (?:a |the )?request"),
        passive=(r"requested",),
        preterite=(r"solicité", r"pedí"),
        participles=("solicitado", "pedido"),
        plural=("solicitamos",),
    ),
    "notified": Action(
        kinds=("communication-staff", "task", "communication-request", "flag"),
        active=(
            r"notified",
            r"informed",
            r"told",
            r"alerted",
            r"messaged",
            r"paged",
            r"contacted",
            r"reached out to",
            r"let",
            r"escalated",
            r"flagged",
        ),
        passive=(
            r"notified",
            r"informed",
            r"told",
            r"alerted",
            r"messaged",
            r"paged",
            r"contacted",
            r"escalated",
            r"flagged",
        ),
        preterite=(
            r"avisé",
            r"notifiqué",
            r"informé",
            r"comuniqué",
            r"escribí",
            r"contacté",
            r"dejé (?:un |el )?(?:mensaje|recado|aviso)",
        ),
        participles=("avisado", "notificado", "informado", "comunicado", "contactado"),
        plural=("avisamos", "notificamos", "informamos"),
        needs_staff_object=True,
    ),
    "task": Action(
        kinds=("task",),
        active=(
            r"created (?:a |the )?task",
            r"opened (?:a |the )?(?:task|ticket)",
            r"logged (?:a |the |your )?(?:request|task)",
            r"assigned (?:a |the |this |it )",
        ),
        passive=(r"assigned",),
        preterite=(r"creé (?:una |la )?tarea", r"abrí (?:una |la |un )?(?:tarea|ticket)"),
        participles=(),
    ),
    "updated": Action(
        kinds=tuple(WRITE_KINDS),
        # Only with the patient's things as the object: "we have updated our hours" and "ha
        # sido actualizado" report no write of this run.
        active=(
            r"updated (?:your|it|the|that|this)",
            r"corrected (?:your|it|the|that|this)",
            r"changed your (?:address|phone|number|email|contact|insurance|pharmacy)",
        ),
        preterite=(r"actualicé (?:su|sus|tu|tus|el|la|los|las)", r"corregí (?:su|sus|tu|tus)"),
    ),
}
