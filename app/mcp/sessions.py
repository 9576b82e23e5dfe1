"""Which run each MCP session is working on (in process, like the SDK's sessions)."""

from __future__ import annotations

import uuid
from collections import OrderedDict

from mcp.server.mcpserver.exceptions import ToolError

# Sessions whose current run is remembered; the oldest is forgotten beyond this.
MAX_SESSIONS = 10_000


class CurrentRuns:
    """The run each MCP session works on. Sessions of the initialize-handshake protocol
    have an id; stateless (2026 protocol) clients have none, so for them the current run
    is the one run a stateless client of the tenant started that is still live; with
    several live, a tool must be told which (run_id) rather than guess."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[tuple[uuid.UUID, str], str] = OrderedDict()
        self._stateless: dict[uuid.UUID, list[str]] = {}

    def remember(self, tenant_id: uuid.UUID, session: str | None, run_id: str) -> None:
        if session is None:
            runs = self._stateless.setdefault(tenant_id, [])
            runs.append(run_id)
            del runs[:-MAX_SESSIONS]
            return
        self._sessions[(tenant_id, session)] = run_id
        self._sessions.move_to_end((tenant_id, session))
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)

    def forget(self, tenant_id: uuid.UUID, session: str | None, run_id: str) -> None:
        if session is None:
            runs = self._stateless.get(tenant_id, [])
            if run_id in runs:
                runs.remove(run_id)
        elif self._sessions.get((tenant_id, session)) == run_id:
            del self._sessions[(tenant_id, session)]

    def current(
        self, tenant_id: uuid.UUID, session: str | None, live: frozenset[str]
    ) -> str | None:
        if session is not None:
            return self._sessions.get((tenant_id, session))
        runs = self._stateless.get(tenant_id, [])
        runs[:] = [r for r in runs if r in live]
        if len(runs) > 1:
            raise ToolError(
                f"{len(runs)} runs started over MCP are live ({', '.join(runs)}) and this "
                "client has no MCP session to tell them apart: pass run_id."
            )
        return runs[0] if runs else None
