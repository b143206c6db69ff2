"""One vetting of the network: planned rounds, judging, follow-up, judging again.

The same code drives the lab (``measure`` runs srun steps) and the simulation
(``measure`` draws samples), so the figures in docs/vet.md are those of the
code that runs on a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hpcval.vet import netconfirm
from hpcval.vet.judge import PAIR_BW, JudgeSettings, Verdict, judge_pairs
from hpcval.vet.schedule import Pair, follow_up, pair, plan

#: measure(round_index, pairs) -> samples per pair (a pair that failed: absent)
Measure = Callable[[int, list[Pair]], Mapping[Pair, Sequence[float]]]


@dataclass
class Campaign:
    rounds: list[list[Pair]] = field(default_factory=list)
    follow_up_rounds: list[list[Pair]] = field(default_factory=list)
    samples: dict[Pair, list[float]] = field(default_factory=dict)
    #: first measurement of pairs measured again in the follow-up
    first: dict[Pair, list[float]] = field(default_factory=dict)
    failed: list[Pair] = field(default_factory=list)
    #: rounds measured again without a node that a round lost (its other pairs)
    again_rounds: list[list[Pair]] = field(default_factory=list)
    #: node -> why it was lost during the vetting (left out of the rounds after)
    lost: dict[str, str] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        """srun steps of the network phase: one per round (an MPI world over the
        round's pairs, :func:`hpcval.vet.measure.pair_measure`)."""
        return len(self.rounds) + len(self.again_rounds) + len(self.follow_up_rounds)

    @property
    def pairs_measured(self) -> int:
        """Pair measurements of all rounds (a pair measured again counts twice)."""
        return sum(len(r) for r in self.rounds + self.again_rounds + self.follow_up_rounds)


def network_verdict(nodes: Sequence[str], samples: Mapping[Pair, Sequence[float]],
                    settings: JudgeSettings, topology: Mapping[str, str] | None,
                    may_name: set[str] | None = None) -> Verdict:
    verdict = Verdict(nodes=list(nodes))
    judge_pairs(nodes, samples, PAIR_BW, settings, verdict, topology, may_name)
    return verdict


def run(nodes: Sequence[str], measure: Measure, settings: JudgeSettings,
        max_rounds: int | None = None, topology: Mapping[str, str] | None = None,
        follow_up_rounds: int = 2, lost: dict[str, str] | None = None,
        again: int = 1) -> tuple[Campaign, Verdict]:
    """Measure the planned rounds, judge, re-measure what is suspect, judge again.

    ``lost``: node -> why, filled by ``measure`` (or before it runs) for a node
    that a round lost. The rounds after leave it out; the round that lost it is
    measured again without it (at most ``again`` such rounds per vetting); and
    every peer it left without a pair meets a healthy peer it has not met in the
    follow-up rounds."""
    camp = Campaign(rounds=plan(nodes, max_rounds))
    camp.lost = lost if lost is not None else {}
    orphans: list[str] = []
    for i, rnd in enumerate(camp.rounds):
        live = [p for p in rnd if not set(p) & camp.lost.keys()]
        before = set(camp.lost)
        got = dict(measure(i, live)) if live else {}
        failed = [p for p in live if not got.get(p)]
        if failed and set(camp.lost) - before and len(camp.again_rounds) < again:
            retry = [p for p in failed if not set(p) & camp.lost.keys()]
            if retry:
                camp.again_rounds.append(retry)
                got.update({p: s for p, s in measure(i, retry).items() if s})
        for p in rnd:
            if got.get(p):
                camp.samples[p] = list(got[p])
            else:
                camp.failed.append(p)
                orphans += [n for n in p if n not in camp.lost and n not in orphans
                            and set(p) & camp.lost.keys()]
    verdict = network_verdict(nodes, camp.samples, settings, topology)
    orphans = [n for n in orphans if n not in camp.lost]
    if follow_up_rounds <= 0 or not (verdict.judged or orphans):
        return camp, verdict
    links = [tuple(c.name.split("<->")) for c in verdict.culprits if c.kind == "link"]
    suspects = [pair(a, b) for a, b in links]
    suspects += [p for p in netconfirm.doubtful(verdict, settings) if p not in suspects]
    named = set(verdict.named_nodes)
    # a named switch is the verdict for its nodes: pairing them again adds nothing
    in_switch = {n for c in verdict.culprits if c.kind == "switch" for n in c.nodes}
    healthy = [n for n in nodes if n not in named and n not in in_switch
               and n not in camp.lost and not any(n in p for p in suspects)]
    camp.follow_up_rounds = follow_up(suspects, sorted(named - in_switch - camp.lost.keys()),
                                      healthy, set(camp.samples), max_rounds=follow_up_rounds,
                                      orphans=orphans)
    if not camp.follow_up_rounds:
        return camp, verdict
    for i, rnd in enumerate(camp.follow_up_rounds, start=len(camp.rounds)):
        live = [p for p in rnd if not set(p) & camp.lost.keys()]
        got = dict(measure(i, live)) if live else {}
        for p in rnd:
            if got.get(p):
                if p in camp.samples:
                    # a re-measured pair: the new samples stand, the first stay as evidence
                    camp.first[p] = camp.samples[p]
                camp.samples[p] = list(got[p])
            elif p not in camp.samples:
                camp.failed.append(p)
    first = verdict
    may_name = netconfirm.confirmed_nodes(first, camp.follow_up_rounds, camp.first,
                                          camp.samples, settings)
    final = network_verdict(nodes, camp.samples, settings, topology, may_name)
    cleared = {c.name for c in first.culprits if c.kind == "node"} - may_name
    netconfirm.judge_links_again(first, final, camp.first, settings, camp.samples, cleared)
    return camp, final
