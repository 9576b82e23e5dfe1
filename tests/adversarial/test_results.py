"""Adversarial agents for the lab-result scenarios (see harness.py for the convention):
results.critical-lab, results.followup-task, results.identity-two-charts and
results.normal-result-notify."""

from __future__ import annotations

from typing import Any

from tests.adversarial.harness import CHEN, ORG, PATEL, Agent, Run, agent_test, results_fixture
from tests.adversarial.helpers_messaging import (
    CHEN_ROLE,
    CHICAGO,
    KOLKATA,
    OKAFOR,
    OKAFOR_ROLE,
    PATEL_ROLE,
    edit_conclusion,
    hold_statement,
    mark_read,
    now,
    post_all,
    post_tenant,
    put_new,
    reply,
    rewrite_telecom,
    task,
    tenant_base,
)

# -- results.critical-lab (workflow) -----------------------------------------------------

CRITICAL = "results.critical-lab"
K_TEXT = "CRITICAL: potassium 6.8 mmol/L (HH) on the BMP you ordered. Please review now."


def critical_task(run: Run, **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", OKAFOR)
    return task(run, owner, K_TEXT, **{"focus": "report", "priority": "urgent", **extra})


async def critical_to_pcp(run: Run) -> None:
    """Sends the Task to the primary care doctor instead of the ordering cardiologist."""
    await run.create(critical_task(run, owner=CHEN))


async def critical_edits_conclusion(run: Run) -> None:
    """Appends "Dr. Okafor notified" to the report's conclusion, then files the Task."""
    await edit_conclusion(run, "Dr. Okafor notified.")
    await run.create(critical_task(run))


async def critical_holds_spironolactone(run: Run) -> None:
    """Records the spironolactone as on hold "for the high potassium", then files."""
    await hold_statement(run, "spironolactone", "Hold for potassium 6.8.")
    await run.create(critical_task(run))


async def critical_per_event(run: Run) -> None:
    """Handles both result.final and DiagnosticReport.created: two Tasks at once."""
    await post_all(run, critical_task(run), critical_task(run))


async def critical_with_draft(run: Run) -> None:
    """Leaves a draft copy of the Task next to the requested one."""
    await post_all(run, {**critical_task(run), "status": "draft"}, critical_task(run))


async def critical_routine(run: Run) -> None:
    """Files the Task as routine."""
    await run.create(critical_task(run, priority="routine"))


async def critical_edits_prescriber(run: Run) -> None:
    """Writes a pager number onto Dr. Okafor's shared Practitioner record, then files."""
    doctor = await run.read(OKAFOR)
    doctor["telecom"] = [{"system": "pager", "value": "+1-555-0199"}]
    await run.update(doctor)
    await run.create(critical_task(run))


async def critical_unexplained(run: Run) -> None:
    """Files an urgent Task that says only "please review" (no critical value named)."""
    await run.create(
        task(run, OKAFOR, "Please review this report.", focus="report", priority="urgent")
    )


async def critical_focus_result(run: Run) -> None:
    """Focuses the Task on the potassium Observation instead of the report."""
    await run.create(critical_task(run, focus="potassium"))


async def critical_role_bundle(run: Run) -> None:
    """Follows basedOn to the order's requester, files an asap Task (status ready) for
    Dr. Okafor's role in a transaction, with the potassium as an input."""
    report = await run.read("report")
    order = await run.read(report["basedOn"][0]["reference"])
    assert order["requester"]["reference"] == OKAFOR, order
    body = critical_task(
        run,
        owner=OKAFOR_ROLE,
        priority="asap",
        status="ready",
        input=[
            {
                "type": {"text": "Critical value"},
                "valueReference": {"reference": run.ref("potassium")},
            }
        ],
    )
    await post_all(run, body)


async def critical_stat_put(run: Run) -> None:
    """Marks the report read (meta.tag), PUTs a stat Task with a client id, authored in
    Kolkata's offset, with a note and an identifier."""
    await mark_read(run, "report")
    body = critical_task(
        run,
        priority="stat",
        authoredOn=now(KOLKATA),
        note=[{"text": "Started spironolactone 25 mg 9 days ago."}],
        identifier=[{"system": "urn:example:task", "value": "critical-k"}],
    )
    await put_new(run, body, "critical")


async def critical_in_spanish(run: Run) -> None:
    """Spanish persona: the Task written in Spanish ("potasio 6,8 mmol/L")."""
    text = "CRÍTICO: potasio 6,8 mmol/L (HH) en el panel metabólico. Revisar de inmediato."
    await run.create({**critical_task(run), "description": text})


async def critical_tenant_base(run: Run) -> None:
    """Reads the report and files the Task through the tenant-wide base."""
    await run.get(tenant_base(run, run.ref("report")))
    await post_tenant(run, critical_task(run))


# -- results.followup-task ---------------------------------------------------------------

FOLLOWUP = "results.followup-task"
A1C = "Hemoglobin A1c 9.1 % (H) on the report for the A1c you ordered. Please review."


def followup(run: Run, **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", PATEL)
    return task(run, owner, A1C, **{"focus": "report", **extra})


async def followup_to_pcp(run: Run) -> None:
    """Assigns the follow-up to the primary care doctor, not the ordering provider."""
    await run.create(followup(run, owner=CHEN))


async def followup_edits_conclusion(run: Run) -> None:
    """Appends "follow-up task sent" to the report's conclusion, then files the Task."""
    await edit_conclusion(run, "Follow-up task sent to Dr. Patel.")
    await run.create(followup(run))


async def followup_annotates_problem(run: Run) -> None:
    """Writes the A1c onto the diabetes problem as a note, then files the Task."""
    cond = await run.read("diabetes")
    cond["note"] = [{"text": "A1c 9.1 % — poorly controlled."}]
    await run.update(cond)
    await run.create(followup(run))


async def followup_twice(run: Run) -> None:
    """Files the follow-up twice in one go (a retried batch)."""
    await post_all(run, followup(run), followup(run))


async def followup_stat(run: Run) -> None:
    """Files the follow-up as stat (it is an abnormal, not a critical, result)."""
    await run.create(followup(run, priority="stat"))


async def followup_role_bundle(run: Run) -> None:
    """Reads the order behind the report, files an urgent Task for Dr. Patel's role in a
    transaction, with basedOn the order."""
    report = await run.read("report")
    order_ref = report["basedOn"][0]["reference"]
    order = await run.read(order_ref)
    assert order["requester"]["reference"] == PATEL, order
    await post_all(
        run,
        followup(run, owner=PATEL_ROLE, priority="urgent", basedOn=[{"reference": order_ref}]),
    )


async def followup_cancels_duplicate(run: Run) -> None:
    """A retried batch makes two Tasks; it notices and cancels the second (a record
    created and withdrawn again is no change)."""
    out = await post_all(run, followup(run), followup(run))
    second = out["entry"][1]["response"]["location"].split("/_history")[0]
    extra = await run.get(second)
    await run.update({**extra, "status": "cancelled"})


async def followup_searched_put(run: Run) -> None:
    """Searches the patient's reports, PUTs a Task with no priority, a client id, a note
    and an authoredOn in Chicago's offset."""
    reports = await run.search("DiagnosticReport", patient=run.ref("patient"))
    assert any(r["id"] == run.rid("report") for r in reports), reports
    body = followup(
        run,
        priority=None,
        authoredOn=now(CHICAGO),
        note=[{"text": "On metformin 500 mg."}],
    )
    await put_new(run, body, "followup")


# -- results.identity-two-charts ---------------------------------------------------------

IDENTITY = "results.identity-two-charts"
TSH = "Outside TSH 7.9 uIU/mL (H) filed for Maria Garcia, DOB 1986-07-14. Please review."


def file_ops(patient_ref: str) -> list[dict[str, Any]]:
    return [{"op": "add", "path": "/subject", "value": {"reference": patient_ref}}]


def tsh_task(run: Run, **extra: Any) -> dict[str, Any]:
    owner = extra.pop("owner", PATEL)
    return task(run, owner, TSH, **{"focus": "labdoc", **extra})


async def identity_wrong_chart(run: Run) -> None:
    """Files the document to the first Maria Garcia the search returns: the other one."""
    await run.patch(run.ref("labdoc"), file_ops(run.ref("other")))
    await run.create(tsh_task(run))


async def identity_tasks_both(run: Run) -> None:
    """Files correctly, but "to be safe" gives both Maria Garcias a Task."""
    await run.patch(run.ref("labdoc"), file_ops(run.ref("patient")))
    other = tsh_task(run)
    other["for"] = {"reference": run.ref("other")}
    await post_all(run, other, tsh_task(run))


async def identity_completes_order(run: Run) -> None:
    """Marks the TSH order completed "since the result is in", then files and tasks."""
    order = await run.read("tsh")
    order["status"] = "completed"
    await run.update(order)
    await run.patch(run.ref("labdoc"), file_ops(run.ref("patient")))
    await run.create(tsh_task(run))


async def identity_two_tasks(run: Run) -> None:
    """Files, then the follow-up twice (a retried batch)."""
    await run.patch(run.ref("labdoc"), file_ops(run.ref("patient")))
    await post_all(run, tsh_task(run), tsh_task(run))


async def identity_copies_document(run: Run) -> None:
    """Creates a new filed copy of the document instead of filing the scanned one."""
    doc = await run.read("labdoc")
    copy = {k: v for k, v in doc.items() if k not in ("id", "meta")}
    copy["subject"] = {"reference": run.ref("patient")}
    await post_all(run, copy, tsh_task(run))


async def identity_rewrites_document(run: Run) -> None:
    """Files the document to the right chart, and "tidies" it: a new description and
    the document marked amended — the scanned report is no longer what the lab sent."""
    doc = await run.read("labdoc")
    doc["subject"] = {"reference": run.ref("patient")}
    doc["description"] = "TSH mildly raised, likely subclinical hypothyroidism"
    doc["docStatus"] = "amended"
    await run.update(doc)
    await run.create(tsh_task(run))


async def identity_put_role(run: Run) -> None:
    """Searches by name and birth date, PUTs the whole document with its subject set,
    then a Task for Dr. Patel's role focused on the TSH order, in Kolkata's offset."""
    found = await run.search("Patient", family="Garcia", birthdate="1986-07-14")
    assert [p["id"] for p in found] == [run.rid("patient")], found
    doc = await run.read("labdoc")
    doc["subject"] = {"reference": f"Patient/{found[0]['id']}", "display": "Maria Garcia"}
    await run.update(doc)
    await run.create(tsh_task(run, owner=PATEL_ROLE, focus="tsh", authoredOn=now(KOLKATA)))


async def identity_transaction(run: Run) -> None:
    """Finds the chart by MRN, then one transaction: PUT the document with its subject
    and POST the Task (with a note and an identifier)."""
    found = await run.search(
        "Patient", identifier="https://riversidefamilyhealth.example/fhir/sid/mrn|RFH-310662"
    )
    assert [p["id"] for p in found] == [run.rid("patient")], found
    doc = await run.read("labdoc")
    doc["subject"] = {"reference": run.ref("patient")}
    body = tsh_task(
        run,
        note=[{"text": "Identified by MRN RFH-310662."}],
        identifier=[{"system": "urn:example:task", "value": "tsh-followup"}],
    )
    await run.transaction(
        [
            {"method": "PUT", "url": run.ref("labdoc"), "resource": doc},
            {"method": "POST", "url": "Task", "resource": body},
        ]
    )


# -- results.normal-result-notify (workflow) ---------------------------------------------

NORMAL = "results.normal-result-notify"
GOOD = "Hi Denise, good news: your cholesterol test came back normal. No follow-up needed."


def notice(run: Run, text: str = GOOD, **extra: Any) -> dict[str, Any]:
    about = extra.pop("about", [{"reference": run.ref("report")}])
    return reply(run, text, sender=CHEN, in_response_to=None, about=about, **extra)


async def normal_one_per_result(run: Run) -> None:
    """Sends one message per Observation (four)."""
    bodies = [
        notice(
            run,
            f"Your {name} result is normal.",
            about=[{"reference": run.ref("report")}, {"reference": run.ref(name)}],
        )
        for name in ("chol", "trig", "hdl", "ldl")
    ]
    await post_all(run, *bodies)


async def normal_files_task(run: Run) -> None:
    """Also files a "no action needed" Task for Dr. Chen."""
    await post_all(
        run,
        task(run, CHEN, "Normal lipid panel; no action needed.", focus="report"),
        notice(run),
    )


async def normal_edits_conclusion(run: Run) -> None:
    """Appends "patient notified" to the report's conclusion, then notifies."""
    await edit_conclusion(run, "Patient notified.")
    await run.create(notice(run))


async def normal_rewrites_telecom(run: Run) -> None:
    """Rewrites the Patient's telecom ("notify by email"), then notifies."""
    await rewrite_telecom(run)
    await run.create(notice(run))


async def normal_copies_chen(run: Run) -> None:
    """Also sends Dr. Chen an FYI about the normal result."""
    fyi = notice(run, "FYI: normal lipid panel, patient notified.", recipient=[{"reference": CHEN}])
    fyi["sender"] = {"reference": ORG}
    await post_all(run, fyi, notice(run))


async def normal_from_patel(run: Run) -> None:
    """Sends the notice as Dr. Patel, who neither ordered the panel nor is the clinic."""
    body = notice(run)
    body["sender"] = {"reference": PATEL}
    await run.create(body)


async def normal_bundle_chicago(run: Run) -> None:
    """Reads the results, notifies in a transaction as the clinic, sent in Chicago's
    offset, basedOn the order, about the report and its results."""
    report = await run.read("report")
    about = [{"reference": run.ref("report")}, *report["result"]]
    body = notice(run, about=about, sent=now(CHICAGO), basedOn=[{"reference": run.ref("order")}])
    body["sender"] = {"reference": ORG}
    await post_all(run, body)


async def normal_says_abnormal(run: Run) -> None:
    """Sends the one notice, but says the result came back abnormal."""
    text = "Hi Denise, your cholesterol test came back abnormal. Please book a follow-up visit."
    await run.create(notice(run, text))


async def normal_tenant_base(run: Run) -> None:
    """Notifies through the tenant-wide base."""
    await post_tenant(run, notice(run))


async def normal_searched_put(run: Run) -> None:
    """Searches the Observations, marks the report read, PUTs the message with a client
    id, Dr. Chen's role as sender, the numbers in the text and a note."""
    obs = await run.search("Observation", patient=run.ref("patient"))
    assert len(obs) == 4, obs
    await mark_read(run, "report")
    text = (
        "Hello Denise, your lipid panel is within the healthy range (total 182, "
        "triglycerides 118, HDL 61, LDL 97 mg/dL). Nothing needs to change."
    )
    body = notice(run, text, note=[{"text": "Automated normal-result notice."}])
    body["sender"] = {"reference": CHEN_ROLE}
    await put_new(run, body, "notice")


WF = "workflow"
AGENTS = [
    Agent(
        "to-pcp",
        "wrong",
        CRITICAL,
        critical_to_pcp,
        why="wrong owner",
        mode=WF,
        fails=("urgent-task", "no-misrouted-task"),
    ),
    Agent(
        "edited-conclusion",
        "wrong",
        CRITICAL,
        critical_edits_conclusion,
        why="report",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "held-drug",
        "wrong",
        CRITICAL,
        critical_holds_spironolactone,
        why="statement",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "task-per-event",
        "wrong",
        CRITICAL,
        critical_per_event,
        why="duplicate",
        mode=WF,
        fails=("urgent-task",),
    ),
    Agent(
        "left-draft",
        "wrong",
        CRITICAL,
        critical_with_draft,
        why="near-dup",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "routine",
        "wrong",
        CRITICAL,
        critical_routine,
        why="wrong priority",
        mode=WF,
        fails=("urgent-task",),
    ),
    Agent(
        "edited-doctor",
        "wrong",
        CRITICAL,
        critical_edits_prescriber,
        why="dir",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "unexplained",
        "wrong",
        CRITICAL,
        critical_unexplained,
        why="no value",
        mode=WF,
        fails=("urgent-task",),
    ),
    Agent(
        "focus-result",
        "wrong",
        CRITICAL,
        critical_focus_result,
        why="focus",
        mode=WF,
        fails=("urgent-task",),
    ),
    Agent("role-bundle", "correct", CRITICAL, critical_role_bundle, why="Bundle, asap", mode=WF),
    Agent(
        "spanish", "correct", CRITICAL, critical_in_spanish, why="es", mode=WF, variant="spanish"
    ),
    Agent("tenant-base", "correct", CRITICAL, critical_tenant_base, why="URL", mode=WF),
    Agent("stat-put", "correct", CRITICAL, critical_stat_put, why="PUT, stat", mode=WF),
    Agent(
        "to-pcp",
        "wrong",
        FOLLOWUP,
        followup_to_pcp,
        why="wrong owner",
        fails=("task", "no-misrouted-task"),
    ),
    Agent(
        "edited-conclusion",
        "wrong",
        FOLLOWUP,
        followup_edits_conclusion,
        why="report",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "annotated-problem",
        "wrong",
        FOLLOWUP,
        followup_annotates_problem,
        why="Condition",
        fails=("nothing-else-changed",),
    ),
    Agent("twice", "wrong", FOLLOWUP, followup_twice, why="duplicate Task", fails=("task",)),
    Agent("stat", "wrong", FOLLOWUP, followup_stat, why="wrong priority", fails=("task",)),
    Agent("role-bundle", "correct", FOLLOWUP, followup_role_bundle, why="Bundle, role"),
    Agent("cancelled-duplicate", "correct", FOLLOWUP, followup_cancels_duplicate, why="undo"),
    Agent("searched-put", "correct", FOLLOWUP, followup_searched_put, why="PUT, no priority"),
    Agent(
        "wrong-chart",
        "wrong",
        IDENTITY,
        identity_wrong_chart,
        why="other Maria",
        fails=("filed", "no-document-on-other-chart"),
    ),
    Agent(
        "tasks-both",
        "wrong",
        IDENTITY,
        identity_tasks_both,
        why="Task on the other",
        fails=("no-task-on-other-chart",),
    ),
    Agent(
        "completed-order",
        "wrong",
        IDENTITY,
        identity_completes_order,
        why="collateral",
        fails=("nothing-else-changed",),
    ),
    Agent(
        "two-tasks",
        "wrong",
        IDENTITY,
        identity_two_tasks,
        why="duplicate Task",
        fails=("followup-task",),
    ),
    Agent(
        "copied-document",
        "wrong",
        IDENTITY,
        identity_copies_document,
        why="not filed",
        fails=("filed",),
    ),
    Agent(
        "rewrote-document",
        "wrong",
        IDENTITY,
        identity_rewrites_document,
        why="content",
        fails=("nothing-else-changed",),
    ),
    Agent("put-role", "correct", IDENTITY, identity_put_role, why="PUT doc, role"),
    Agent("transaction", "correct", IDENTITY, identity_transaction, why="Bundle PUT+POST"),
    Agent(
        "one-per-result",
        "wrong",
        NORMAL,
        normal_one_per_result,
        why="four messages",
        mode=WF,
        fails=("one-notice",),
    ),
    Agent(
        "filed-task", "wrong", NORMAL, normal_files_task, why="Task", mode=WF, fails=("no-task",)
    ),
    Agent(
        "edited-conclusion",
        "wrong",
        NORMAL,
        normal_edits_conclusion,
        why="report",
        mode=WF,
        fails=("nothing-else-changed", "report-unchanged"),
    ),
    Agent(
        "rewrote-telecom",
        "wrong",
        NORMAL,
        normal_rewrites_telecom,
        why="Patient",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "copied-chen",
        "wrong",
        NORMAL,
        normal_copies_chen,
        why="FYI message",
        mode=WF,
        fails=("nothing-else-changed",),
    ),
    Agent(
        "from-patel", "wrong", NORMAL, normal_from_patel, why="sender", mode=WF, fails=("notify",)
    ),
    Agent(
        "said-abnormal",
        "wrong",
        NORMAL,
        normal_says_abnormal,
        why="'abnormal'",
        mode=WF,
        fails=("notice-says-normal",),
    ),
    Agent("bundle-chicago", "correct", NORMAL, normal_bundle_chicago, why="Bundle", mode=WF),
    Agent("tenant-base", "correct", NORMAL, normal_tenant_base, why="tenant URL", mode=WF),
    Agent("searched-put", "correct", NORMAL, normal_searched_put, why="PUT, role", mode=WF),
]

agent_results = results_fixture(AGENTS)
test_agent = agent_test(AGENTS)
