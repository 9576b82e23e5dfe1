"""The import graph of app/ has no cycle: not between modules, and not between the
packages the layer contract (pyproject.toml [tool.importlinter]) places. Imports inside
functions and under TYPE_CHECKING count too: a lazy import is still a dependency."""

from __future__ import annotations

import grimp


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("app", cache_dir=None)


def test_no_module_imports_itself_through_others() -> None:
    graph = _graph()
    cycles: set[tuple[str, ...]] = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                cycles.add((module, *back))
    assert not cycles, sorted(cycles)[:10]


def test_no_two_packages_import_each_other() -> None:
    graph = _graph()
    packages = sorted(
        m for m in graph.find_children("app") if graph.find_children(m)
    )  # app.runs, app.fhir, …: the packages (a module has no children)
    both_ways = [
        (a, b)
        for i, a in enumerate(packages)
        for b in packages[i + 1 :]
        if graph.chain_exists(importer=a, imported=b, as_packages=True)
        and graph.chain_exists(importer=b, imported=a, as_packages=True)
    ]
    assert not both_ways, both_ways
