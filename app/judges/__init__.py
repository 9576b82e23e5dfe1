"""Rubric judges (docs/grading.md "Rubric judges")."""
