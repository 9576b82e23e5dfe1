"""The simulated patient (DESIGN.md "Simulated patient")."""
