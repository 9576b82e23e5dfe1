"""The console: server-rendered pages for people (docs/console.md), served by the API process
under `/`. Pages call the same services as the REST API; `install_console` (app.main)
adds them outside the OpenAPI document.

Adding a page module: make `router = console_router()` (app.console.web), give each
page `viewer: SignedIn` (no session: 303 to /login) and each state-changing POST
`form: PostedForm` (no or a wrong CSRF token: 403), raise the services' AppErrors as
they come (rendered as an HTML page with their status: another tenant's run is a 404),
answer with `render(request, "x/page.html", **context)` or `redirect(url)`, and list the
router in `install.ROUTERS` (and the header link in `web.NAV`). Templates extend
`base.html` (blocks title, head, heading, content, scripts), use `macros.html`
(csrf_input, json_block, empty, badge) and the filters `state` (✓ passed, ✗ failed, …),
`when` (UTC, local time in the browser) and `copyable`. static/console.js offers
`Understudy.poll(url, ms, onChange)` for live pages (If-None-Match; stops when onChange
returns false). tests/console/test_security.py checks every route of `install.ROUTERS`
without a session.
"""
