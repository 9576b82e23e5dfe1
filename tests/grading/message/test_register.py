"""Spanish register: tú forms in an usted message and back."""

from __future__ import annotations

import pytest

from app.grading.message.register import register_violations


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("Hola, ¿puedes venir el martes?", ["puedes"]),
        ("Te esperamos el martes.", ["Te"]),
        ("Tu cita es el martes.", ["Tu"]),
        ("Tú decides la hora.", ["Tú"]),
        ("Avísame si necesitas algo.", ["Avísame", "necesitas"]),
        ("Le esperamos el martes. Su cita con la doctora es a las 10.", []),
        ("Puede llamarnos al 555-0100. ¿Quiere un té?", []),
        ("Ustedes pueden venir juntos.", []),
    ],
)
def test_usted_register(message: str, words: list[str]) -> None:
    assert [v.word for v in register_violations(message, "usted")] == words


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("¿Usted puede venir?", ["Usted"]),
        ("Ud. tiene cita el martes.", ["Ud."]),
        ("Avíseme si necesita algo.", ["Avíseme"]),
        ("Te esperamos el martes. Tu cita es a las 10.", []),
        ("Su cita con la doctora es el martes.", []),
        ("Te consigo una cita para el martes.", []),
    ],
)
def test_tu_register(message: str, words: list[str]) -> None:
    assert [v.word for v in register_violations(message, "tu")] == words


def test_violation_quotes_the_message() -> None:
    [v] = register_violations("Buenos días. ¿Puedes confirmar la hora?", "usted")
    assert v.quote == "Buenos días. ¿Puedes confirmar la hora?"
    assert (v.start, v.end) == (14, 20)
