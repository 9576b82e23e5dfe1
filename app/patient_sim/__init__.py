"""The simulated patient (docs/scenarios.md "Simulated patient")."""
