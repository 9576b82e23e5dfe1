"""Oracle checks: each call's shape, and the symbols and saved names it may use."""

from __future__ import annotations

from app.scenarios.calls import capture_kind
from app.scenarios.validation_base import OnSymbol, field_of, list_of, path_symbols
from app.scenarios.validation_problems import json_pointer
from app.scenarios.validation_symbols import SymbolChecks


class OracleChecks(SymbolChecks):
    """The oracle (the reference solution)."""

    def check_oracle(self) -> None:
        calls = list_of(self.data.get("oracle"))
        names = [field_of(c, "saveAs") if isinstance(c, dict) else None for c in calls]
        saved: dict[str, str] = {}  # saveAs name -> path of the call that saves it
        for index, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            path = json_pointer("oracle", index)
            # A call may use the scenario's symbols and what earlier calls saved.
            allowed = {*self.symbols, *saved}
            later = {n for n in names[index:] if isinstance(n, str)}

            on_symbol = self.oracle_symbol_handler(allowed, later)

            call_path = call.get("path")
            if isinstance(call_path, str):
                if not call_path.startswith("/"):
                    self.add(
                        f"{path}/path",
                        "path must start with '/' (relative to the FHIR base, or /api/...)",
                    )
                for symbol in path_symbols(call_path):
                    on_symbol(symbol, f"{path}/path")
                self.check_capture(call, call_path, path)
            if "body" in call:
                self.walk_body(call["body"], f"{path}/body", on_symbol)
            name = names[index]
            if not isinstance(name, str):
                continue
            if name in self.symbols:
                self.add(
                    f"{path}/saveAs",
                    f"saveAs {name!r} is already a symbol ({self.symbols[name].path})",
                )
            elif name in saved:
                self.add(f"{path}/saveAs", f"saveAs {name!r} is already used by {saved[name]}")
            else:
                saved[name] = path

    def oracle_symbol_handler(self, allowed: set[str], later: set[str]) -> OnSymbol:
        def on_symbol(symbol: str, where: str) -> None:
            if self.symbols_readable and symbol not in allowed and symbol in later:
                self.used.add(symbol)
                self.add(where, f"@{symbol} is used before the oracle call that saves it")
            else:
                self.use(symbol, where, allowed)

        return on_symbol

    def check_capture(self, call: dict[str, object], call_path: str, path: str) -> None:
        """A captured effect the reference sends (docs/capture.md "In a reference
        solution"): an SMS or e-mail is a POST with a `to` and a `body`."""
        kind = capture_kind(call_path)
        if kind not in ("sms", "email"):
            return
        if call.get("method") != "POST":
            self.add(f"{path}/method", f"sending an {kind.upper()} is a POST")
        body = call.get("body")
        if not isinstance(body, dict):
            self.add(f"{path}/body", f'an {kind.upper()} needs a body {{"to": …, "body": …}}')
            return
        to = body.get("to")
        if kind == "sms" and not (isinstance(to, str) and to.strip()):
            self.add(f"{path}/body/to", "the number to text, as a string (+15555550123)")
        if kind == "email" and not (
            (isinstance(to, str) and to.strip())
            or (isinstance(to, list) and to and all(isinstance(t, str) for t in to))
        ):
            self.add(f"{path}/body/to", "the recipients' addresses: a string or a list of them")
        text = body.get("body")
        if not (
            (isinstance(text, str) and text.strip())
            or (isinstance(text, list) and text and all(isinstance(t, str | dict) for t in text))
        ):
            self.add(
                f"{path}/body/body",
                "the text sent: a non-empty string, or a list of strings and time tokens",
            )
