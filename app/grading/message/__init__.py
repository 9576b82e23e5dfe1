"""Message checks: what the system said, read deterministically (pure: no I/O, no database).

One module per concern; each module's docstring says what its functions take and return.

- `text`: `fold`, `find_phrase`, `find_phrases`, `quote` — for `says`, `saysAny`, `not`
  (case, accents, spacing, apostrophes and dashes ignored; a phrase matches as text, so
  "free" also catches "freedom").
- `datetimes`: `find_datetimes`, `states_datetime(messages, instant, zones)`.
- `quantities`: `find_quantities`, `find_money`, `find_phones`, `same_phone`.
- `mentions`: `states_value(messages, value, zones)` — the `mentions` field for a value of
  any kind FHIRPath gives (dateTime, date, Quantity, Money, number, string).
- `facts`: `concrete_facts(message)`, `SourceIndex.build(sources, zones)`,
  `grounded(message, sources_or_index, zones)` — the `grounded` field.
- `lexicon` (data) and `claims`: `claims(message)`, `unbacked(claims, writes)`,
  `Write(resource_type, status, body)` — the `claims` field.
- `register`: `register_violations(message, "usted" | "tu")` — the `register` field.
"""
