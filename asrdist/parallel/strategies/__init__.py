"""One module per ``--algo``: each builds its strategy from the contract (strategy.py, base.py)
and the pure rules (rules/), reaches other learners only through a Transport, and ends with
one ``registry.register`` call."""
