"""Rubric judges (DESIGN.md "Expectations and grading", `rubric`)."""
