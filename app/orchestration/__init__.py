"""Orchestration of runs: the scenario check, oracle replay, mutants and the in-memory
simulation, which drive runs, grading and scenarios together from above them."""
