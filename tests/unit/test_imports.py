"""The package's layering: no import circle among hpcval modules, each package
imports only its own floor and those below (:data:`FLOORS`), and the statistics
(``hpcval.history.judging``) stand on the ground floor (``hpcval.core``) alone.

Every ``import`` is counted, at module level or inside a function: a lazy
import that closes a circle is still a circle (it only moves the failure to
run time)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

#: Circles still to be cut (none left); the list must shrink, never grow: the
#: test fails on a new circle and on one that is gone but still listed.
KNOWN_CIRCLES: set[frozenset[str]] = set()

#: The ground floor (``hpcval.core``) judging may stand on: modules that import
#: nothing of hpcval but each other.
GROUND = {f"hpcval.core.{f.stem}" for f in SRC.joinpath("hpcval", "core").glob("*.py")
          if f.stem != "__init__"} | {"hpcval.core"}

#: The floors of the packages, as their imports stand: a package imports only
#: its own floor and those below it (a module belongs to the longest package
#: name it starts with). A new package needs a floor here.
FLOORS = {
    "hpcval.core": 0,             # errors, YAML and files, figures, series, run ids, paths
    "hpcval.history.judging": 1,  # the statistics: core only
    "hpcval.node": 1,             # the node (reads nvidia-smi and IMB output: parsers)
    "hpcval.parsers": 1,          # benchmark output: core only
    "hpcval.spack": 1,
    "hpcval.lab": 1,
    "hpcval.site": 2,             # a site's files, references, check discovery
    "hpcval.history": 3,          # stored runs, the store, contracts, comparisons
    "hpcval.rfm": 3,              # what checks import
    "hpcval.reporting": 4,        # what a person reads
    "hpcval.run": 5,              # one validation run: runs ReFrame, stores, judges, reports
    "hpcval.vet": 5,              # vetting a partition: measures, judges, draws its report
    "hpcval.commands": 6,
    "hpcval.cli": 6,
    "hpcval": 6,
}


def _module_name(file: Path) -> str:
    parts = list(file.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """``{module: the hpcval modules it imports}`` (a package's ``__init__``
    counts as the package)."""
    files = {_module_name(f): f for f in SRC.joinpath("hpcval").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, file in files.items():
        package = name if file.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text(), filename=str(file))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in files else base)
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or ``None``."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_graph_sees_imports() -> None:
    """The walk finds real edges (else the tests below pass on nothing)."""
    graph = _imports()
    assert "hpcval.core.yamlio" in graph["hpcval.node.expectations"]
    assert "hpcval.node.expectations" in graph["hpcval.node.gpu_audit"]
    assert "hpcval.history.judging.verdict" in graph["hpcval.history.judging"]


def test_no_import_circle() -> None:
    graph = _imports()
    # package __init__ files re-export their modules: a module importing its
    # own package is the package's business, not a circle of concerns
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    found = set()
    while (circle := _cycle(graph)) is not None:
        found.add(frozenset(circle))
        graph[circle[-2]].discard(circle[-1])  # cut it, look for the next
    assert frozenset({"hpcval.node.audit", "hpcval.site.references"}) not in found
    assert found == KNOWN_CIRCLES


def test_a_circle_is_found() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_judging_imports_nothing_above_it() -> None:
    above = {m: sorted(d for d in deps
                       if not d.startswith("hpcval.history.judging") and d not in GROUND)
             for m, deps in _imports().items() if m.startswith("hpcval.history.judging")}
    assert {m: d for m, d in above.items() if d} == {}
    ground = _imports()
    assert {m: sorted(ground[m] - GROUND) for m in GROUND} == {m: [] for m in GROUND}


#: Packages that stand on the ground floor alone (and on themselves): the
#: statistics, and the parsers of benchmark output (text in, data out), which
#: the node's readers use and must never use back.
CORE_ONLY = ("hpcval.history.judging", "hpcval.parsers")


def test_core_only_packages_import_nothing_else() -> None:
    graph = _imports()
    found = sorted(f"{m} imports {d}" for m, deps in graph.items() for d in deps
                   for p in CORE_ONLY if (m == p or m.startswith(p + "."))
                   and not (d == p or d.startswith(p + ".")) and d not in GROUND)
    assert found == []


def test_core_only_rule_can_fail() -> None:
    """The edge the rule was written against (WRF's parser used the node's MPI ABI)."""
    graph = _imports()
    graph["hpcval.parsers.wrf.binaries"] = {"hpcval.node.mpi_abi"}
    assert any(m.startswith("hpcval.parsers") and "hpcval.node.mpi_abi" in deps
               and "hpcval.node.mpi_abi" not in GROUND for m, deps in graph.items())


def _floor(module: str) -> tuple[str, int]:
    package = max((p for p in FLOORS if module == p or module.startswith(p + ".")), key=len)
    return package, FLOORS[package]


def test_each_package_imports_only_its_floor_and_below() -> None:
    graph = _imports()
    upward = sorted(f"{m} (floor {_floor(m)[1]}) imports {d} (floor {_floor(d)[1]})"
                    for m, deps in graph.items() for d in deps if _floor(d)[1] > _floor(m)[1])
    assert upward == []
    # every top-level package has its own floor (hpcval's is only for its __init__ and cli)
    tops = {".".join(m.split(".")[:2]) for m in graph}
    assert sorted(t for t in tops if t not in FLOORS) == []


def _outer_floor(module: str) -> int:
    """The floor of the top-level package a module lies in (``hpcval.history``
    for ``hpcval.history.judging.verdict``)."""
    return FLOORS.get(".".join(module.split(".")[:2]), FLOORS["hpcval"])


def test_no_import_reaches_into_a_package_above() -> None:
    """A module below a package imports nothing inside it, even a sub-package
    with a lower floor (the site reading judging settings out of
    ``hpcval.history``): what both need lives on the lower floor."""
    graph = _imports()
    found = sorted(f"{m} (floor {_floor(m)[1]}) imports {d} (inside a package of floor "
                   f"{_outer_floor(d)})" for m, deps in graph.items() for d in deps
                   if _outer_floor(d) > _floor(m)[1]
                   and m.split(".")[:2] != d.split(".")[:2])
    assert found == []
    assert _outer_floor("hpcval.history.judging.settings") > _floor("hpcval.site")[1]


def test_the_floor_rule_can_fail() -> None:
    assert _floor("hpcval.history.judging.verdict") == ("hpcval.history.judging", 1)
    assert _floor("hpcval.history.store") == ("hpcval.history", 3)
    assert _floor("hpcval.run.runner")[1] > _floor("hpcval.reporting.report")[1]


def test_only_the_lab_knows_the_lab() -> None:
    """What a site adds (the lab's fabric in every run's provenance) comes from
    its config's extras; no module outside the lab and its command imports it."""
    users = sorted(m for m, deps in _imports().items()
                   if any(d == "hpcval.lab" or d.startswith("hpcval.lab.") for d in deps)
                   and not m.startswith(("hpcval.lab", "hpcval.commands.lab")))
    assert users == []
