"""Message checks: what the system said, read deterministically (pure; no I/O).

One module per concern — `text` (normalisation, phrases), `datetimes`, `quantities`
(doses, money, phones), `facts` (concrete facts, grounding), `claims` with its data module
`lexicon`, and `register` (Spanish tú/usted). See each module's docstring for what its
functions take and return.
"""
