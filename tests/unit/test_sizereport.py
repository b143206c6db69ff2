"""The report's problem sizes and the output-cost table (hpcval.reporting.sizereport)
from a run report's cases."""

from __future__ import annotations

from hpcval.reporting.report import CaseResult, PerfValue
from hpcval.reporting.sizereport import case_sizes, output_cost_rows, sizes_html


def _case(strategy: str, ranks: int, cost: float, share: float,
          environ: str = "impi") -> CaseResult:
    name = f"cfdio_output_cost_check %strategy={strategy} %ranks={ranks}"
    perf = [PerfValue("output_cost", cost, 0.0, None, None, "s", "pass"),
            PerfValue("output_share", share, 0.0, 0.0, 1.0, "fraction", "pass")]
    raw = {"strategy": strategy, "ranks": ranks, "budget": "full",
           "problem_size": "grid 512x512x384, 3 outputs of 768 MiB (6 sweeps) [full]",
           "size_reason": "1/32 of the node's 24 GiB memory per output; fsync'd"}
    return CaseResult("cfdio_output_cost_check", name, "local", "default", environ, "pass",
                      None, None, "impi", perf, None, None, raw)


def _cases() -> list[CaseResult]:
    costs = {1: {"none": 0.01, "mpiio": 2.0, "gather-to-root": 3.0,
                 "per-rank-then-gather": 9.0},
             2: {"none": -0.02, "mpiio": 1.5, "gather-to-root": 3.3,
                 "per-rank-then-gather": 7.5}}
    return [_case(s, r, c, c / 10) for r, by in costs.items() for s, c in by.items()]


def test_output_cost_rows_take_the_sources_shape() -> None:
    rows = output_cost_rows(_cases())
    assert [(r.where, r.ranks) for r in rows] == [("default+impi", 1), ("default+impi", 2)]
    assert rows[0].cost["per-rank-then-gather"] == 9.0
    assert rows[0].ratios() == "1.00 : 1.50 : 4.50"
    assert rows[1].ratios() == "1.00 : 2.20 : 5.00"


def test_ratios_need_every_strategy_and_a_positive_mpiio_cost() -> None:
    cases = [c for c in _cases() if "gather-to-root" not in c.display_name]
    assert {r.ratios() for r in output_cost_rows(cases)} == {"-"}
    cases = _cases()
    cases[1] = _case("mpiio", 1, -0.001, 0.0)
    assert output_cost_rows(cases)[0].ratios() == "-"


def test_html_shows_costs_shares_and_sizes() -> None:
    page = "".join(sizes_html(_cases()))
    assert "Output cost per strategy and ranks" in page and "1.00 : 2.20 : 5.00" in page
    assert "Problem sizes" in page and "3 outputs of 768 MiB" in page and "fsync&#x27;d" in page


def test_cases_without_a_size_are_left_out() -> None:
    plain = CaseResult("imb_pingpong_check", "imb_pingpong_check", "local", "default", "impi",
                       "pass", None, None, "impi", [], None, None, {})
    assert [c for c, _, _ in case_sizes([plain, *_cases()[:1]])] == _cases()[:1]
    assert sizes_html([plain]) == []
