"""What the report shows of problem sizes: the size each case ran at and why
(the ``problem_size`` and ``size_reason`` a sized check records,
:mod:`hpcval.rfm.sizing`), and the output-cost table in the shape of
"SMBDirect BMT まとめ": output cost per strategy against ranks, with the
ratios of MPI-IO, rank-0 POSIX (gather-to-root) and per-rank-then-gather.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

OUTPUT_COST_CHECK = "cfdio_output_cost_check"
#: The strategies of the table, in the source's order, with their names there.
STRATEGIES = (("mpiio", "MPI-IO"), ("gather-to-root", "rank-0 POSIX (V11)"),
              ("per-rank-then-gather", "per-rank-then-gather (V10)"))


def case_sizes(cases: list[Any]) -> list[tuple[Any, str, str]]:
    """(case, size, reason) of every case that recorded its size."""
    rows = []
    for case in sorted(cases, key=lambda c: (c.display_name, c.environ)):
        size = str(case.raw.get("problem_size") or "")
        if size:
            rows.append((case, size, str(case.raw.get("size_reason") or "")))
    return rows


def _param(case: Any, name: str) -> str | None:
    value = case.raw.get(name)
    if value is not None:
        return str(value)
    for part in case.display_name.split():
        if part.startswith(f"%{name}="):
            return part.split("=", 1)[1]
    return None


@dataclass
class CostRow:
    """One rank count of one partition+environment: the median output cost
    (s) of each strategy, the noise (``none``) and the output share."""

    where: str
    ranks: int
    cost: dict[str, float]
    share: dict[str, float]
    size: str

    def ratios(self) -> str:
        """``1.00 : 2.31 : 3.02`` (MPI-IO = 1), ``-`` where one is missing or
        MPI-IO's cost is not positive."""
        base = self.cost.get("mpiio")
        if not base or base <= 0 or any(s not in self.cost for s, _ in STRATEGIES):
            return "-"
        return " : ".join(f"{self.cost[s] / base:.2f}" for s, _ in STRATEGIES)


def output_cost_rows(cases: list[Any]) -> list[CostRow]:
    """The output-cost cases of a run as the source's table: a row per
    partition+environment and rank count."""
    rows: dict[tuple[str, int], CostRow] = {}
    for case in cases:
        if case.check != OUTPUT_COST_CHECK or not case.perf:
            continue
        strategy, ranks = _param(case, "strategy"), _param(case, "ranks")
        if strategy is None or ranks is None:
            continue
        where = f"{case.partition}+{case.environ}"
        key = (where, int(ranks))
        row = rows.setdefault(key, CostRow(where, int(ranks), {}, {},
                                           str(case.raw.get("problem_size") or "")))
        for p in case.perf:
            if p.variable == "output_cost" and isinstance(p.value, int | float):
                row.cost[strategy] = float(p.value)
            elif p.variable == "output_share" and isinstance(p.value, int | float):
                row.share[strategy] = float(p.value)
    return [rows[k] for k in sorted(rows)]


def _cell(row: CostRow, strategy: str) -> str:
    if strategy not in row.cost:
        return "-"
    share = row.share.get(strategy)
    return f"{row.cost[strategy]:.3g}" + (f" ({100 * share:.0f} %)" if share is not None
                                           and strategy != "none" else "")


def sizes_html(cases: list[Any]) -> list[str]:
    """HTML sections: the output-cost table (where the run has one) and the
    size of every sized case with its reason."""
    esc = html.escape
    parts: list[str] = []
    rows = output_cost_rows(cases)
    if rows:
        parts.append("<h2 id='output-cost'>Output cost per strategy and ranks</h2>"
                     "<p>Median output cost (run with output − run without, s) and its share "
                     "of the run; ratios with MPI-IO = 1 (the table of \"SMBDirect BMT "
                     "まとめ\"). Size: " + esc(rows[0].size) + "</p>"
                     "<table><tr><th>partition+environment</th><th>ranks</th>"
                     "<th>noise (none)</th>"
                     + "".join(f"<th>{esc(label)}</th>" for _, label in STRATEGIES)
                     + "<th>MPI-IO : rank-0 POSIX : per-rank-then-gather</th></tr>")
        for r in rows:
            parts.append(f"<tr><td>{esc(r.where)}</td><td class='num'>{r.ranks}</td>"
                         f"<td class='num'>{esc(_cell(r, 'none'))}</td>"
                         + "".join(f"<td class='num'>{esc(_cell(r, s))}</td>"
                                   for s, _ in STRATEGIES)
                         + f"<td>{esc(r.ratios())}</td></tr>")
        parts.append("</table>")
    sized = case_sizes(cases)
    if sized:
        parts.append("<h2 id='sizes'>Problem sizes</h2><table><tr><th>case</th>"
                     "<th>partition+environment</th><th>size</th><th>why</th></tr>")
        for case, size, reason in sized:
            parts.append(f"<tr><td>{esc(case.display_name)}</td><td>{esc(case.partition)}+"
                         f"{esc(case.environ)}</td><td>{esc(size)}</td><td>{esc(reason)}</td>"
                         "</tr>")
        parts.append("</table>")
    return parts
