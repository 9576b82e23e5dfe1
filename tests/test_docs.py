"""Everything the repository cites is in the repository.

The design as built lives in docs/; code comments, the README, tests and scripts cite it
as `docs/<page>.md "Section"`. Someone who clones the project must be able to read what
the code points to, so no tracked file may cite a document that only exists outside the
repository (a design brief by its file name, a path into a shared folder beside the
checkout, an absolute path on the machine it was written on), every `docs/<page>.md`
cited anywhere must exist, and every `app/...py` module the README and docs/ name must
exist (modules get renamed; their mentions must follow).
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Documents that were never part of the repository: cited by name, they cannot be read.
OUTSIDE_NAMES = ("DESIGN.md", "CONVENTIONS.md", "CONSOLE.md", "STATISTICS.md", "LIBRARY-NOTES.md")
OUTSIDE_NAME = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, OUTSIDE_NAMES)) + r")\b")
# An absolute path on the machine a file was written on.
MACHINE_PATH = re.compile(r"/work/")
# A relative path climbing into a `shared` folder: fine when it stays inside the
# repository (a package's own `../shared/api` module), not when it leaves it.
SHARED_PATH = re.compile(r"(?:\.\./)+shared(?:/[\w.-]+)*")
DOC_CITATION = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)\b")
MODULE_PATH = re.compile(r"(?<![\w/.-])(app/[\w/]+\.py)\b")
# Where module paths must be real: the user's guide and the design docs.
MODULE_CITERS = ("README.md", "docs/")


@cache
def tracked_files() -> tuple[str, ...]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return tuple(sorted(p for p in listed.split("\0") if p))


@cache
def text_of(path: str) -> str | None:
    """The file's text, or None for a binary file (or one gone from the work tree)."""
    try:
        data = (ROOT / path).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def texts() -> list[tuple[str, str]]:
    found = [(path, text_of(path)) for path in tracked_files()]
    return [(path, text) for path, text in found if text is not None]


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def leaves_repository(path: str, climb: str) -> bool:
    """Whether a relative path written in tracked file `path` points outside the root."""
    target = (ROOT / path).parent.joinpath(climb).resolve()
    return not target.is_relative_to(ROOT)


def outside_citations(path: str, text: str) -> list[str]:
    """Every mention in `text` of a document outside the repository, as `path:line: …`."""
    out: list[str] = []
    for match in OUTSIDE_NAME.finditer(text):
        out.append(f"{path}:{_line(text, match.start())}: cites {match.group(0)}")
    for match in MACHINE_PATH.finditer(text):
        out.append(f"{path}:{_line(text, match.start())}: names a machine path (/work/…)")
    for match in SHARED_PATH.finditer(text):
        if leaves_repository(path, match.group(0)):
            out.append(f"{path}:{_line(text, match.start())}: cites {match.group(0)}")
    return out


def test_git_lists_files() -> None:
    assert "README.md" in tracked_files()
    assert "tests/test_docs.py" in tracked_files() or (ROOT / "tests/test_docs.py").exists()


def test_nothing_cites_a_document_outside_the_repository() -> None:
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    found = [
        finding
        for path, text in texts()
        if path != this  # names the patterns it looks for
        for finding in outside_citations(path, text)
    ]
    assert found == [], "cite the docs/ page that says it instead:\n" + "\n".join(found)


def test_every_cited_docs_page_exists() -> None:
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    missing = [
        f"{path}:{_line(text, match.start())}: docs/{match.group(1)}"
        for path, text in texts()
        if path != this  # its examples cite pages that do not exist
        for match in DOC_CITATION.finditer(text)
        if not (ROOT / "docs" / match.group(1)).is_file()
    ]
    assert missing == [], "cited but not in docs/:\n" + "\n".join(missing)


def test_docs_links_between_pages_resolve() -> None:
    """Relative links inside docs/ (`[evals.md](evals.md)`) point at pages that exist."""
    link = re.compile(r"\]\(([\w.-]+\.md)(?:#[\w-]*)?\)")
    missing = [
        f"{path}: {match.group(1)}"
        for path, text in texts()
        if path.startswith("docs/") and path.endswith(".md")
        for match in link.finditer(text)
        if not (ROOT / "docs" / match.group(1)).is_file()
    ]
    assert missing == []


def test_every_module_named_in_readme_and_docs_exists() -> None:
    missing = [
        f"{path}:{_line(text, match.start())}: {match.group(1)}"
        for path, text in texts()
        if path == MODULE_CITERS[0] or path.startswith(MODULE_CITERS[1])
        for match in MODULE_PATH.finditer(text)
        if not (ROOT / match.group(1)).is_file()
    ]
    assert missing == [], "named but not in the repository:\n" + "\n".join(missing)


def test_docs_index_lists_every_page() -> None:
    index = text_of("docs/README.md")
    assert index is not None
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert pages, "docs/ holds the design as built"
    unlisted = [page for page in pages if f"]({page})" not in index]
    assert unlisted == []


@pytest.mark.parametrize(
    ("path", "text", "found"),
    [
        ("app/x.py", '"""Rules (DESIGN.md "Run views")."""', 1),
        ("README.md", "follow `STATISTICS.md`", 1),
        ("app/x.py", "# (CONVENTIONS.md, habit 1)", 1),
        ("x.py", "docs: /work/shared/STATISTICS.md", 2),
        ("app/x.py", "see ../../shared/DESIGN.md", 2),
        ("docs/x.md", "see ../../shared/notes.txt", 1),
        ("app/x.py", '(docs/scenarios.md "Scheduling rules")', 0),
        ("integrations/n8n/nodes/A/A.node.ts", "import { call } from '../shared/api';", 0),
        ("app/x.py", "MY_DESIGN.md and DESIGN.mdx", 0),
        ("app/x.py", "docs/DESIGN.md", 1),
    ],
)
def test_the_patterns(path: str, text: str, found: int) -> None:
    assert len(outside_citations(path, text)) == found


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ('(docs/grading.md "Message checks")', ["grading.md"]),
        ("[docs/scaling.md](docs/scaling.md)", ["scaling.md", "scaling.md"]),
        ("see ./docs/x.png and mydocs/y.md", []),
    ],
)
def test_the_docs_pattern(text: str, cited: list[str]) -> None:
    assert [m.group(1) for m in DOC_CITATION.finditer(text)] == cited
