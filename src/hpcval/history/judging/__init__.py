"""Statistical judging of figures against their own history (pure functions: no
ReFrame, no store). See docs/judging.md for the model and its measured rates.

    settings = JudgingSettings.load(site.judging)
    verdicts = judge_run({"check/variable": FigureData(baseline_runs, samples, "higher")},
                         settings)
    points = change_points(run_medians)
    flagged = sustained_change(run_medians, "higher", settings, name="check/variable")
"""

from hpcval.history.judging.change import Change, signed_pct
from hpcval.history.judging.changes import (
    ChangePoint,
    change_points,
    cusum,
    cusum_run,
    cusum_scores,
    sustained_change,
    sustained_families,
    sustained_run,
)
from hpcval.history.judging.families import (
    adjust,
    effective_figures,
    families,
    family_name,
    holm,
    holm_levels,
    stouffer,
)
from hpcval.history.judging.model import OUTCOMES, FigureData, FigureVerdict, Needed, pooled_spread
from hpcval.history.judging.settings import FigureSettings, JudgingSettings
from hpcval.history.judging.verdict import judge_figure, judge_run, summarize

__all__ = [
    "Change",
    "signed_pct",
    "OUTCOMES",
    "ChangePoint",
    "FigureData",
    "FigureSettings",
    "FigureVerdict",
    "JudgingSettings",
    "Needed",
    "adjust",
    "effective_figures",
    "families",
    "family_name",
    "change_points",
    "cusum",
    "cusum_run",
    "cusum_scores",
    "holm",
    "holm_levels",
    "judge_figure",
    "judge_run",
    "pooled_spread",
    "stouffer",
    "summarize",
    "sustained_change",
    "sustained_families",
    "sustained_run",
]
