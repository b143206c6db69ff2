"""What a vetting will run, known before it starts: its steps and its wall time.

The steps are counted from the schedule (:mod:`hpcval.vet.schedule`) and checked
against the cluster's ``MaxStepCount``. The wall time is taken from the step
times of the partition's own stored vettings (``vet.json``, ``step_seconds``)
where there are any; the first vetting of a partition uses a model whose
constants are the lab's recorded step times (docs/vet.md, "Measured on the lab").
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpcval.core.errors import InputError
from hpcval.vet import measure
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.sitecfg import VetSite

#: srun steps of the per-node phase: probe, triad, shared-memory PingPong
NODE_STEPS = 3
#: start-up of a step of independent tasks (probe, triad), as recorded on the lab
TASKS_START_S = 4.0
#: start-up of a step that is one Intel MPI world over TCP (the shared-memory
#: PingPong, a round of pairs), as recorded on the lab (16 and 32 nodes on 2 cores)
MPI_START_S = 15.0
#: the link rate the model assumes where the site states none
ASSUMED_LINK_MBS = 100.0
#: the memory bandwidth the model's triad assumes
TRIAD_BYTES_S = 1e9
#: stored vettings whose step times the plan reads (the most recent)
RECORDED = 5


@dataclass
class Options:
    settings: measure.Settings = field(default_factory=measure.Settings)
    judging: JudgeSettings = field(default_factory=JudgeSettings)
    max_rounds: int = 7
    follow_up_rounds: int = 2
    #: steps measured again without a node lost in them (a round, or the
    #: shared-memory PingPong: an MPI world ends with any of its nodes)
    again: int = 1
    #: steps that measure again, beside healthy controls, the nodes suspected on
    #: a per-node figure (one per figure and measurement again, as many as
    #: vet.confirm.needed says; 0: name on the first measurement alone)
    confirm: int = 4
    minutes: int = 30
    reservation: str | None = None


@dataclass
class Plan:
    """What a vetting will run, known before it starts."""

    nodes: int
    rounds: int
    follow_up_rounds: int
    node_steps: int
    wall_s: float
    assumptions: str
    #: steps measured again without a lost node, at most
    again_steps: int = 0
    #: steps confirming per-node suspects beside healthy controls, at most
    confirm_steps: int = 0
    #: a DGEMM step among the per-node steps (``--dgemm``)
    dgemm: bool = False

    @property
    def steps(self) -> int:
        """srun steps at most: per-node steps, one per round, one per follow-up
        round, one per step measured again without a lost node."""
        return (self.node_steps + self.rounds + self.follow_up_rounds + self.again_steps
                + self.confirm_steps)

    def text(self) -> str:
        again = (f"; up to {self.again_steps} measured again without a lost node"
                 if self.again_steps else "")
        again += (f"; up to {self.confirm_steps} confirming per-node suspects"
                  if self.confirm_steps else "")
        return (f"plan: {self.nodes} nodes, 1 job, at most {self.steps} srun steps "
                f"({self.node_steps} per-node: probe, triad, shared-memory PingPong"
                f"{', DGEMM' if self.dgemm else ''}"
                f"{', GPU probe' if self.node_steps > NODE_STEPS + self.dgemm else ''}; "
                f"{self.rounds} "
                f"round(s) of pairs, one step each; up to {self.follow_up_rounds} follow-up "
                f"round(s){again}), one srun at a time; expected wall time "
                f"~{self.wall_s:.0f} s ({self.assumptions})")


def step_kind(key: str) -> str:
    """``round12``, ``round3-again1`` -> ``round``; ``shm-pingpong-again0`` ->
    ``shm-pingpong``: the kind of step a recorded step time belongs to."""
    return re.sub(r"(-again\d+)$", "", re.sub(r"^round\d+", "round", key))


def recorded_step_seconds(vet_dir: Path, partition: str, last: int = RECORDED,
                          ) -> tuple[dict[str, list[float]], list[int]]:
    """Step kind -> seconds over the ``last`` most recent stored vettings of
    ``partition`` (``vet.json`` under ``vet_dir``), and their node counts. A file
    that cannot be read is passed over: the plan is an estimate."""
    if not vet_dir.is_dir():
        return {}, []
    seconds: dict[str, list[float]] = {}
    sizes: list[int] = []
    for path in sorted(vet_dir.glob("*/vet.json"), reverse=True):
        if len(sizes) >= last:
            break
        try:
            data = json.loads(path.read_text())
            steps = data["step_seconds"]
            if data.get("partition") != partition or not steps:
                continue
            nodes = len(data["verdict"]["nodes"])
            pairs = [(step_kind(str(k)), float(v)) for k, v in steps.items()]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        sizes.append(nodes)
        for kind, sec in pairs:
            seconds.setdefault(kind, []).append(sec)
    return seconds, sizes


def make_plan(site: VetSite, nodes: Sequence[str], opts: Options) -> Plan:
    from hpcval.vet.schedule import plan

    rounds = len(plan(nodes, opts.max_rounds))
    node_steps = NODE_STEPS + int(site.gpus) + int(opts.settings.dgemm)
    later = rounds + opts.follow_up_rounds
    rec, sizes = recorded_step_seconds(site.var / "vet", site.slurm_partition)
    kinds = ("probe", "triad", "shm-pingpong", "round") + (("gpu-probe",) if site.gpus
                                                            else ())
    if all(k in rec for k in kinds):
        per = {k: statistics.median(rec[k]) for k in kinds}
        wall = sum(per[k] for k in kinds if k != "round") + later * per["round"]
        span = (f"{min(sizes)}" if min(sizes) == max(sizes)
                else f"{min(sizes)}-{max(sizes)}")
        assumptions = (f"median step times of the last {len(sizes)} stored vetting(s) of "
                       f"partition {site.slurm_partition}, {span} nodes: probe "
                       f"{per['probe']:.0f} s, triad {per['triad']:.0f} s, shared-memory "
                       f"PingPong {per['shm-pingpong']:.0f} s, a round {per['round']:.0f} s; "
                       "follow-up rounds included")
    else:
        s = opts.settings
        ref = site.references().get("pingpong_bw_1MiB")
        rate = ref[0] if ref else ASSUMED_LINK_MBS
        triad_bytes = 24 * (s.triad_n or 16_778_000) * s.samples * 3
        round_s = MPI_START_S + s.samples * s.iterations * 2 * 1.048576 / rate
        wall = (2 * TASKS_START_S + triad_bytes / TRIAD_BYTES_S + MPI_START_S
                + (node_steps - NODE_STEPS) * TASKS_START_S + later * round_s)
        assumptions = (f"no stored vetting of partition {site.slurm_partition} yet: "
                       f"{TASKS_START_S:.0f} s start-up per step of tasks, "
                       f"{MPI_START_S:.0f} s per MPI world (the lab's), pairs at "
                       f"{'the site reference ' if ref else 'an assumed '}{rate:.0f} MB/s, "
                       "triad at 1 GB/s, follow-up rounds included")
    if opts.settings.dgemm:
        # DGEMM: the recorded step's median, else (samples + warm-up) multiplies of ~2 s
        wall += (statistics.median(rec["dgemm"]) if rec.get("dgemm") else
                 TASKS_START_S + (opts.settings.samples + 1) * 2.0)
    return Plan(len(nodes), rounds, opts.follow_up_rounds, node_steps, wall, assumptions,
                again_steps=opts.again, confirm_steps=opts.confirm, dgemm=opts.settings.dgemm)


def check_plan(plan_: Plan, max_steps: int) -> None:
    """Refuse a plan of more steps than one job may start (``MaxStepCount``)."""
    if plan_.steps > max_steps:
        again = f" + {plan_.again_steps} again" if plan_.again_steps else ""
        again += f" + {plan_.confirm_steps} confirming" if plan_.confirm_steps else ""
        raise InputError(
            f"the plan needs up to {plan_.steps} srun steps in one job ({plan_.node_steps} "
            f"per-node + {plan_.rounds} rounds + {plan_.follow_up_rounds} follow-up{again}) "
            f"and this cluster's MaxStepCount is {max_steps} (scontrol show config): lower "
            "--max-rounds or --follow-up; exit 2")
