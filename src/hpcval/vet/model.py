"""What vetting judges and says: the figures and their settings, a node's or
pair's deviation, a culprit and the whole verdict (data only; the judging is
:mod:`hpcval.vet.judge`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from hpcval.core.figures import check_direction, unit_direction, worse_change
from hpcval.vet.ranks import median


@dataclass(frozen=True)
class FigureSpec:
    """What a figure is and how far off it may be before it counts."""

    name: str
    label: str
    unit: str
    better: str  # "higher" or "lower"
    #: smallest relative deviation (worse side) that names a node
    min_effect: float
    #: how samples make the figure: "median", or "best" for a capacity that
    #: interference only ever lowers (STREAM reports its best repetition too)
    summary: str = "median"

    def __post_init__(self) -> None:
        check_direction(self.better, f"vet figure {self.name}")
        if unit_direction(self.unit) not in (None, self.better):
            raise ValueError(f"vet figure {self.name}: {self.unit} is better {self.better}?")

    def of(self, samples: Sequence[float]) -> float:
        if self.summary == "best":
            return float(max(samples) if self.better == "higher" else min(samples))
        return median(samples)

    def worse(self, value: float, center: float) -> float:
        """Relative deviation towards 'worse' (0.3 = 30 % worse than center)."""
        if center == 0:
            return 0.0
        return worse_change((value - center) / abs(center), self.better)


#: The figures ``hpcval vet`` measures.
PAIR_BW = FigureSpec("pingpong_bw_1MiB", "PingPong 1 MiB", "MB/s", "higher", 0.15)
FIGURES: dict[str, FigureSpec] = {f.name: f for f in (
    PAIR_BW,
    FigureSpec("triad_bw", "triad", "MB/s", "higher", 0.25, "best"),
    FigureSpec("shm_pingpong_bw_1MiB", "shared-memory PingPong 1 MiB", "MB/s", "higher", 0.30,
               "best"),
    FigureSpec("shm_pingpong_lat_8B", "shared-memory PingPong 8 B", "us", "lower", 1.0),
    FigureSpec("cpu_mhz", "CPU frequency", "MHz", "higher", 0.10),
    # the median: each sample is a multiply of seconds that already spans many time
    # slices, so its best is a moment when others idled, not the node (docs/vet.md)
    FigureSpec("dgemm_gflops", "DGEMM", "GFLOP/s", "higher", 0.25),
)}


#: Recorded and shown, never judged: shared-memory latency on nodes whose cores are
#: shared (the lab) is the scheduler's time slice, not the node (docs/vet.md).
INFORMATIONAL = {"shm_pingpong_lat_8B"}


@dataclass
class JudgeSettings:
    #: robust z beyond which a figure is statistically off
    z: float = 3.5
    #: fewer nodes than this cannot be judged against each other
    min_nodes: int = 4
    #: the robust scale is at least this fraction of the median (a population
    #: measured to 0.1 % would otherwise call every 1 % an outlier)
    scale_floor: float = 0.02
    #: family-wise error rate of the rank test (Bonferroni over the population)
    alpha: float = 0.01
    #: per-figure override of FigureSpec.min_effect
    min_effect: dict[str, float] = field(default_factory=dict)

    def effect(self, spec: FigureSpec) -> float:
        return self.min_effect.get(spec.name, spec.min_effect)


@dataclass
class Deviation:
    """One figure of one node (or pair) next to its population."""

    value: float
    center: float
    worse_by: float  # relative, towards worse
    z: float  # robust z, towards worse (positive = worse)
    low: bool
    samples: int = 0
    #: Bonferroni-uncorrected p of the rank test, where it was needed
    p: float | None = None

    def percent(self) -> str:
        return f"{-self.worse_by * 100:+.0f} %"


@dataclass
class Culprit:
    kind: str  # node, link, switch
    name: str
    figure: str
    evidence: str
    nodes: list[str] = field(default_factory=list)
    #: the finding's stable code (:mod:`hpcval.vet.findings`), its severity
    #: (``off``: drained with ``--drain``; ``suspect``, ``unknown``: named only)
    #: and what to do
    code: str = ""
    severity: str = "off"
    remedy: str = ""


@dataclass
class Verdict:
    """Everything the judging found; JSON-ready through :meth:`to_dict`."""

    nodes: list[str]
    #: node -> figure -> deviation
    table: dict[str, dict[str, Deviation]] = field(default_factory=dict)
    #: "a|b" -> deviation of the pair figure
    pairs: dict[str, Deviation] = field(default_factory=dict)
    culprits: list[Culprit] = field(default_factory=list)
    #: findings about the whole partition (below a site reference everywhere)
    partition: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judged: bool = True
    #: every coded finding (:class:`hpcval.vet.findings.Finding` as a dict)
    findings: list[dict] = field(default_factory=list)
    #: fingerprint category -> key -> the partition's majority (health judges on it)
    majority: dict = field(default_factory=dict)

    @property
    def named_nodes(self) -> list[str]:
        named: list[str] = []
        for c in self.culprits:
            for n in c.nodes:
                if n not in named:
                    named.append(n)
        return named

    def to_dict(self) -> dict:
        return {
            "nodes": self.nodes, "judged": self.judged,
            "table": {n: {f: asdict(d) for f, d in figs.items()}
                      for n, figs in self.table.items()},
            "pairs": {k: asdict(d) for k, d in self.pairs.items()},
            "culprits": [asdict(c) for c in self.culprits],
            "named_nodes": self.named_nodes,
            "partition": self.partition, "notes": self.notes,
            "findings": self.findings, "fingerprint_majority": self.majority,
        }
