"""Issue 26: every page works, proven by a crawl.

Seeds a tenant with a run of every built-in scenario in each of its modes (the reference
solution replayed, and one finished idle), an eval with repeats, a compare of two evals,
a schedule and an imported scenario with unusual content (decimals, Spanish, a long
brief, a script tag in every text field), then crawls the console breadth-first from the
nav pages, signed in, following every link and every GET form with its defaults: every
page answers 200 (after a redirect, as a browser follows it) and never lands on sign-in.
POST forms are not submitted: each action must answer 403 without a CSRF token (it
exists and is guarded). Then Chromium opens, at 1400 px and at 390 px, SAMPLE pages of
each shape and every page that shows the unusual scenario's content: no console error,
no injected script ran, nothing wider than the window. `UNDERSTUDY_CRAWL_ALL=1` opens
every page in the browser (a few minutes)."""

from __future__ import annotations

import asyncio
import copy
import os
import time
from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

import httpx
from playwright.async_api import Browser

from tests.conftest import TenantHandle
from tests.console.conftest import OUTPUT, WAIT_MS, sign_in
from tests.console.run_helpers import TASKS

NAV = ["/", "/scenarios", "/runs", "/evals", "/board"]
CAP = 3_000
# Pages of each shape (/runs/{id}, /chart/Patient/{id}?run=…) the browser opens.
SAMPLE = 2
FLOOR = 40
XSS = "<script>window.__x=1</script>"
LONG = ("Redacte una nota clara para la paciente, con acentos: año, niño, corazón. " * 80)[:5_000]


def _observation(
    symbol: str, text: str, value: float, unit: str, note: str | None = None
) -> dict[str, Any]:
    """A final lab value with decimals (the console once answered 500 on a Decimal)."""
    found: dict[str, Any] = {
        "resourceType": "Observation",
        "id": symbol,
        "status": "final",
        "code": {"text": text},
        "subject": {"reference": "@patient"},
        "valueQuantity": {"value": value, "unit": unit},
    }
    if note:
        found["note"] = [{"text": note}]
    return found


ODD: dict[str, Any] = copy.deepcopy(TASKS)
ODD.update(
    id="custom.crawl-odd",
    title=f"Resultado de laboratorio {XSS}",
    brief=f"{{{{patient.name}}}} necesita seguimiento. {XSS} {LONG}",
)
ODD["fixture"] = [
    {
        "resourceType": "Patient",
        "id": "@patient",
        "name": [{"family": f"Muñoz {XSS}", "given": [f"José {XSS}"]}],
    },
    _observation("@potassium", f"Potasio {XSS}", 7.25, "mmol/L", note=f"Nota: {XSS} {LONG}"),
    _observation("@ratio", f"Cociente {XSS}", 0.10, "1"),
]
for expectation in ODD["expectations"]:
    expectation["label"] = f"{expectation['label']} (en español) {XSS}"


async def _idle(client: httpx.AsyncClient, scenario_id: str, mode: str) -> None:
    started = await client.post("/runs", json={"scenarioId": scenario_id, "mode": mode})
    assert started.status_code == 201, (scenario_id, mode, started.text)
    finished = await client.post(f"/runs/{started.json()['id']}/finish")
    assert finished.status_code == 200, (scenario_id, mode, finished.text)


async def _reference(client: httpx.AsyncClient, scenario_id: str, mode: str) -> None:
    answer = await client.post(f"/scenarios/{scenario_id}/reference-run", params={"mode": mode})
    assert answer.status_code == 200, (scenario_id, mode, answer.text)


async def _eval(client: httpx.AsyncClient, label: str, scenarios: list[str]) -> str:
    created = await client.post(
        "/evals",
        json={"mode": "workflow", "label": label, "scenarios": scenarios, "repeats": 2},
    )
    assert created.status_code == 201, created.text
    eval_id: str = created.json()["id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view = (await client.get(f"/evals/{eval_id}")).json()
        if view["status"] == "completed":
            return eval_id
        for item in view["runs"]:
            if "runId" in item and item.get("status") == "live":
                await client.post(f"/runs/{item['runId']}/finish")
        await asyncio.sleep(0.2)
    raise AssertionError(f"eval {eval_id} did not complete in 60 s")


async def _seed(tenant: TenantHandle) -> None:
    async with httpx.AsyncClient(
        base_url=f"{tenant.server}/api/testing", headers=tenant.headers, timeout=120
    ) as client:
        imported = await client.post("/scenarios", json=ODD)
        assert imported.status_code in (200, 201), imported.text
        scenarios = (await client.get("/scenarios")).json()["scenarios"]
        for scenario in scenarios:
            for mode in scenario["modes"]:
                await _reference(client, scenario["id"], mode)
                await _idle(client, scenario["id"], mode)
        workflow = sorted(s["id"] for s in scenarios if "workflow" in s["modes"] and s["builtin"])
        assert len(workflow) >= 2, workflow
        first = await _eval(client, "crawl v1", workflow[:2])
        second = await _eval(client, "crawl v2", workflow[:2])
        # The compare page is linked from the eval page: v2 against v1 (the CI rule's pick).
        compared = await client.get(f"/evals/{second}/compare", params={"baseline": first})
        assert compared.status_code == 200, compared.text
        schedule = await client.post(
            "/schedules",
            json={
                "name": f"nightly {XSS}",
                "cron": "0 3 * * *",
                "eval": {"mode": "workflow", "labelPrefix": "nightly", "scenarios": workflow[:2]},
            },
        )
        assert schedule.status_code == 201, schedule.text


class _Targets(HTMLParser):
    """A page's links, its GET forms as the URLs their defaults submit, its POST actions."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.gets: list[str] = []
        self.posts: list[str] = []
        self._form: tuple[str, str] | None = None
        self._pairs: list[tuple[str, str]] = []
        self._select: tuple[str, bool] | None = None  # name, an option chosen yet
        self._first_option: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "a" and "href" in a:
            self.links.append(a["href"])
        elif tag == "form":
            self._form, self._pairs = ((a.get("method") or "get").lower(), a.get("action", "")), []
        elif self._form is None or "disabled" in a or not a.get("name"):
            return
        elif tag == "input" and a.get("type", "text") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self._pairs.append((a["name"], a.get("value", "on" if a.get("type") else "")))
        elif tag == "textarea":
            self._pairs.append((a["name"], ""))
        elif tag == "select":
            self._select, self._first_option = (a["name"], False), None
        elif tag == "option" and self._select is not None:
            name, chosen = self._select
            if "selected" in a and not chosen:
                self._pairs.append((name, a.get("value", "")))
                self._select = (name, True)
            elif self._first_option is None:
                self._first_option = a.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None:
            name, chosen = self._select
            if not chosen and self._first_option is not None:
                self._pairs.append((name, self._first_option))
            self._select = None
        elif tag == "form" and self._form is not None:
            method, action = self._form
            if method == "post":
                self.posts.append(action)
            else:
                query = urlencode(self._pairs)
                self.gets.append(f"{action.split('?')[0]}?{query}" if query else action)
            self._form = None


def _targets(html: str) -> _Targets:
    found = _Targets()
    found.feed(html)
    return found


# In the browser: scripts that ran, console errors, and what overflows a phone's width.
_LOOK = """() => {
  const width = document.documentElement.scrollWidth;
  const wide = [];
  if (width > innerWidth + 1) {
    const clipped = el => {
      for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== 'visible') return true;
      }
      return false;
    };
    // Past the viewport: the element's box, or its text spilling out of a box that fits.
    const over = el => !clipped(el) && (el.getBoundingClientRect().right > innerWidth + 1 ||
      (el.getBoundingClientRect().left + el.scrollWidth > innerWidth + 1 &&
       getComputedStyle(el).overflowX === 'visible'));
    for (const el of document.body.querySelectorAll('*')) {
      if (over(el) && ![...el.children].some(over)) {
        const r = el.getBoundingClientRect();
        wide.push(el.tagName.toLowerCase() + (el.className ? '.' + el.className : '') +
                  ' «' + (el.textContent || '').trim().slice(0, 40) + '» ' + Math.round(r.right));
        if (wide.length >= 3) break;
      }
    }
  }
  return {x: typeof window.__x, width, wide};
}"""


def _pattern(path: str) -> str:
    """A page's shape: ids and query values blanked, so a sample visits each shape."""
    parts = urlsplit(path)
    segments = [seg if seg.isalpha() else "{}" for seg in parts.path.split("/")]
    keys = sorted(k for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return "/".join(segments) + ("?" + "&".join(keys) if keys else "")


def _same_origin(url: str, origin: str) -> str | None:
    parts = urlsplit(url)
    if f"{parts.scheme}://{parts.netloc}" != origin:
        return None
    if parts.path == "/logout" or parts.path.startswith(("/api/", "/static/")):
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


async def _crawl(console: httpx.AsyncClient, origin: str) -> _Crawl:
    """Every page reachable from the nav over HTTP, breadth-first."""
    crawl = _Crawl()
    queue: deque[tuple[str, str]] = deque((path, "(nav)") for path in NAV)
    seen = set(NAV)
    while queue:
        assert len(seen) < CAP, f"the crawl passed {CAP} pages: a link generates pages"
        path, referrer = queue.popleft()
        # A resource's chart link redirects to its patient's chart: followed, as a browser.
        answer = await console.get(path, follow_redirects=True)
        if answer.status_code != 200 or answer.url.path == "/login":
            crawl.bad_status.append((f"{path} → {answer.url}", answer.status_code, referrer))
            continue
        if not answer.headers.get("content-type", "").startswith("text/html"):
            continue  # a download (JSON export): answered, nothing to follow
        crawl.pages[path] = answer.text
        found = _targets(answer.text)
        for target in found.links + found.gets:
            local = _same_origin(urljoin(origin + path, target.split("#")[0]), origin)
            if local and local not in seen:
                seen.add(local)
                queue.append((local, path))
        for action in found.posts:
            local = _same_origin(urljoin(origin + path, action), origin)
            if local:
                crawl.posts.setdefault(local, path)
    return crawl


@dataclass
class _Crawl:
    pages: dict[str, str] = field(default_factory=dict)
    posts: dict[str, str] = field(default_factory=dict)
    bad_status: list[tuple[str, int, str]] = field(default_factory=list)


def _sample(pages: dict[str, str]) -> list[str]:
    """What the browser opens: SAMPLE pages of each shape and every page showing the
    unusual scenario's content (all of them with UNDERSTUDY_CRAWL_ALL=1)."""
    if os.environ.get("UNDERSTUDY_CRAWL_ALL") == "1":
        return list(pages)
    shapes: dict[str, int] = {}
    chosen = []
    for path, html in pages.items():
        shape = _pattern(path)
        if shapes.get(shape, 0) < SAMPLE or ODD["id"] in html or "window.__x" in html:
            shapes[shape] = shapes.get(shape, 0) + 1
            chosen.append(path)
    return chosen


async def _look(
    browser: Browser, cookies: list[dict[str, str | None]], base: str, paths: list[str], width: int
) -> list[str]:
    """Each page at that width: console errors, an injected script that ran, overflow."""
    problems = []
    context = await browser.new_context(base_url=base, viewport={"width": width, "height": 900})
    context.set_default_timeout(WAIT_MS)
    await context.add_cookies(cookies)  # type: ignore[arg-type]
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        for path in paths:
            errors.clear()
            response = await page.goto(path, wait_until="domcontentloaded")
            if response is None or response.status != 200:
                problems.append(f"{path} at {width} px: {response and response.status}")
                continue
            found = await page.evaluate(_LOOK)
            if found["x"] != "undefined":
                problems.append(f"{path} at {width} px: an injected script ran")
            if found["width"] > width + 1:
                problems.append(f"{path} at {width} px: {found['width']} px wide: {found['wide']}")
            if errors:
                problems.append(f"{path} at {width} px: console errors {errors}")
    finally:
        await context.close()
    return problems


async def test_every_page_works(browser: Browser, tenant: TenantHandle) -> None:
    began = time.monotonic()
    await _seed(tenant)
    seeded = time.monotonic() - began
    origin = tenant.server.rstrip("/")
    console = await sign_in(tenant.server, tenant.key)
    try:
        crawl = await _crawl(console, origin)
        crawled = time.monotonic() - began - seeded
        bad_posts = []
        for action, referrer in sorted(crawl.posts.items()):
            answer = await console.post(action, data={})
            if answer.status_code != 403:
                bad_posts.append((action, answer.status_code, referrer))
        cookies = [{"name": c.name, "value": c.value, "url": origin} for c in console.cookies.jar]
    finally:
        await console.aclose()
    sample = _sample(crawl.pages)
    problems = [
        problem
        for width in (1400, 390)
        for problem in await _look(browser, cookies, tenant.server, sample, width)
    ]
    took = time.monotonic() - began
    shapes = len({_pattern(p) for p in sample})
    line = (
        f"crawl: {len(crawl.pages)} pages answered 200 over HTTP, {len(crawl.posts)} POST "
        f"actions refused without CSRF; {len(sample)} of them ({shapes} shapes) opened in "
        f"Chromium at 1400 px and 390 px ({seeded:.0f} s seeding, {crawled:.0f} s "
        f"crawling, {took:.0f} s in all)"
    )
    print(line)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "crawl.txt").write_text(line + "\n")
    assert crawl.bad_status == [], f"pages not 200 (url, status, referrer): {crawl.bad_status[:10]}"
    assert bad_posts == [], f"POST actions not 403 without CSRF: {bad_posts}"
    assert problems == [], "\n".join(problems)
    assert len(crawl.pages) > FLOOR, line
