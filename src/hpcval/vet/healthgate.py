"""``hpcval health`` end to end: passes until the finding is confirmed
(:mod:`hpcval.vet.healthstorm`), one line, and what is done to Slurm
(:mod:`hpcval.vet.healthdrain`)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError, InputError
from hpcval.vet import counters, health, healthdrain, healthstorm, uniformity
from hpcval.vet import rules as vrules
from hpcval.vet.findings import Finding
from hpcval.vet.health import (
    HealthVerdict,
    dgemm_of,
    judge_health,
    last_full_vet,
    measure_here,
)
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.sitecfg import VetSite


@dataclass
class GateOptions:
    samples: int = 5
    budget: float = 50.0
    #: random delay before each confirming pass (seconds, low and high)
    confirm: tuple[float, float] = (2.0, 10.0)
    #: random delay before the first pass (0: none)
    spread: float = 0.0
    #: seconds of each CPU-share spin (one before, one after each pass)
    spin: float = 0.5
    drain: bool = False
    rule: healthdrain.ShareRule = field(default_factory=healthdrain.ShareRule)
    #: where the record goes (None: ``var/<site>/health/``; a node's own directory
    #: where ``var/`` is shared read-only)
    record_dir: Path | None = None


def audit_bad(audit: list[dict[str, Any]], untaken: set[str] | frozenset[str] = frozenset()
              ) -> list[str]:
    """The audit's misses, but for the limits the gate could not take from the
    node (what it reads there is the launching shell's)."""
    return [f"{f['setting']} found {f.get('found')!r}, expected {f.get('expected')}"
            for f in audit if f.get("status") in ("mismatch", "unknown")
            and f.get("setting") not in untaken]


class _Passes:
    """Measures and judges one pass at a time, keeping the last one's figures."""

    def __init__(self, site: VetSite, node: str, results: list[dict[str, Any]],
                 settings: JudgeSettings, opts: GateOptions, untaken: set[str]) -> None:
        self.site, self.node, self.results = site, node, results
        self.untaken = untaken
        self.settings, self.opts = settings, opts
        self.figures: dict[str, Any] = {}
        self.verdict: HealthVerdict | None = None
        self.rules = vrules.load(site.dir)  # a bad rules file: exit 2 before measuring
        #: the last full pass's probe line, and its suspect/unknown findings
        self.probe: dict[str, Any] = {}
        self.named: list[Finding] = []

    def __call__(self, budget: float, light: bool = False) -> healthstorm.PassResult:
        started, t0 = time.time(), time.monotonic()
        before = healthstorm.spin(self.opts.spin)
        if light:
            after = healthstorm.spin(self.opts.spin)
            share, ev = healthstorm.share_status([before, after])
            return healthstorm.PassResult(started, time.monotonic() - t0, [before, after],
                                          {"cpu_share": share},
                                          {"cpu_share": ev} if ev else {}, light=True)
        try:
            size = dgemm_of(last_full_vet(self.results, self.node, self.settings))
        except InputError:
            size = None  # judge_health says why there is nothing to judge against
        figures, audit = measure_here(self.site, self.opts.samples,
                                      budget - 2 * self.opts.spin - 0.5, dgemm=size,
                                      probe_out=self.probe)
        after = healthstorm.spin(self.opts.spin)
        verdict = judge_health(self.node, figures, audit, self.results, self.settings)
        self.figures, self.verdict = figures, verdict
        status, evidence = healthstorm.classify(verdict.figures,
                                                audit_bad(audit, self.untaken),
                                                [before, after])
        # fingerprint and counters: off findings confirmed as the figures are,
        # suspect and unknown ones named in the line, never drained
        self.named = []
        for f in identity_findings(self.node, self.probe, self.results, self.settings,
                                   self.rules, self.opts.record_dir or self.site.var / "health"):
            if f.severity == "off":
                status[f.code] = "off"
                evidence[f.code] = _one(f)
            else:
                self.named.append(f)
        return healthstorm.PassResult(started, time.monotonic() - t0, [before, after],
                                      status, evidence)


def _one(f: Finding) -> str:
    return f"[{f.code}] {f.text}; remedy: {f.remedy}"


def identity_findings(node: str, probe: dict[str, Any], results: list[dict[str, Any]],
                      settings: JudgeSettings, rules: vrules.Rules,
                      health_dir: Path | None) -> list[Finding]:
    """The node's fingerprint against the majority the last full vetting recorded,
    its counters against its previous stored reading (vetting or health record)."""
    found: list[Finding] = []
    ref = health.last_full_vet(results, node, settings)
    recorded = ref["verdict"].get("fingerprint_majority") or {}
    if isinstance(probe.get("fingerprint"), dict) and recorded:
        found += uniformity.against_recorded(node, probe["fingerprint"],
                                             (probe.get("fingerprint_unknown") or {}),
                                             recorded, ref["id"], rules)
    if isinstance(probe.get("counters"), dict):
        prev = counters.previous_readings(results, [node], health_dir)[node]
        now = {"time": probe.get("read_at", time.time()), "values": probe["counters"]}
        cnt, _ = counters.judge({node: now}, {node: prev}, rules, partition_sources=False)
        found += cnt
    kept, _ = rules.apply(found)
    return kept


def _busy(c: healthstorm.Confirmation) -> str:
    fair = [p.fair for p in c.passes]
    others = max(r.others for p in c.passes for r in p.contention)
    cpus = c.passes[0].contention[0].cpus
    return (f"{len(c.passes)} pass(es), fair share {min(fair):.2f}-{max(fair):.2f} of a CPU "
            f"(up to {others:.0f} other runnable tasks on {cpus} CPU(s)), "
            f"under {healthstorm.BUSY_SHARE} in every pass")


def run_gate(site: VetSite, node: str, results: list[dict[str, Any]],
             settings: JudgeSettings, opts: GateOptions, run_id: str,
             rng: random.Random | None = None) -> tuple[str, int]:
    """The gate's one line and exit code (0 ok, 1 off, 3 not judged)."""
    rng = rng or random.Random()
    t0 = time.monotonic()
    note, untaken = healthstorm.take_node_limits(node)
    if opts.spread > 0:
        time.sleep(rng.uniform(0, opts.spread))
    passes = _Passes(site, node, results, settings, opts, untaken)
    left = opts.budget - (time.monotonic() - t0)

    notes: list[str] = [note]
    try:
        conf = healthstorm.confirm_loop(passes, left, opts.confirm, rng=rng,
                                        log=notes.append)
    except HpcvalError as err:
        return f"health {node}: not judged: {err}", err.exit_code
    seconds = time.monotonic() - t0
    verdict = passes.verdict
    assert verdict is not None
    took = f" in {seconds:.0f} s"
    gaps = [b.started - (a.started + a.seconds) for a, b in
            zip(conf.passes, conf.passes[1:], strict=False)]
    how = (f"{len(conf.passes)} passes" + (f", {min(gaps):.0f}-{max(gaps):.0f} s apart"
                                           if gaps else ""))
    if conf.confirmed:
        verdict.ok = False
        verdict.evidence = [conf.confirmed[f] for f in conf.confirmed]
        line = (f"health {node}: NO{took}: " + "; ".join(verdict.evidence)
                + f" (confirmed: {how})")
        code = 1
    elif any(f in conf.undecided for f in (*healthstorm.CONTENDED, "cpu_share")):
        verdict.ok = False
        verdict.evidence = []
        line = (f"health {node}: not judged{took}: the node's CPUs were busy ({_busy(conf)}): "
                + ", ".join(conf.undecided) + " undecided")
        code = 3
    else:
        verdict.ok = True
        line = verdict.line(seconds) + f" ({how}"
        if conf.cleared:
            line += "; cleared on a later pass: " + ", ".join(conf.cleared)
        line += ")"
        code = 0
    if passes.named and code != 3:
        # suspect and unknown findings: named in the line, never a drain
        line += "; " + "; ".join(f"{f.severity}: {_one(f)}" for f in passes.named)
    if opts.drain and code in (0, 1):
        findings = {f: conf.confirmed[f] for f in conf.confirmed}
        try:
            action = healthdrain.act(node, site.slurm_partition, findings, code == 0,
                                     opts.rule)
        except HpcvalError as err:  # the verdict stands and is stored; Slurm did not answer
            action = f"Slurm not updated: {err}"
        if action:
            line += f"; {action}"
    verdict.notes += notes
    _store(site, run_id, verdict, seconds, passes.figures, conf, line, opts.record_dir,
           passes.probe, passes.named)
    return line, code


def _store(site: VetSite, run_id: str, verdict: HealthVerdict, seconds: float,
           figures: dict[str, Any], conf: healthstorm.Confirmation,
           line: str, base: Path | None = None, probe: dict[str, Any] | None = None,
           named: list[Finding] | None = None) -> Path:
    """The gate's record (``health.store``) with its confirmation passes, and the
    node's counters with the time read (the next run's previous reading)."""
    probe = probe or {}
    extra: dict[str, Any] = {"confirmation": conf.summary(),
                             "named": [f.to_dict() for f in named or []]}
    if isinstance(probe.get("counters"), dict):
        extra["counters"] = {"time": probe.get("read_at"), "values": probe["counters"]}
    if isinstance(probe.get("fingerprint"), dict):
        extra["fingerprint"] = probe["fingerprint"]
    return health.store(site, run_id, verdict, seconds, figures, base, line=line,
                        extra=extra)
