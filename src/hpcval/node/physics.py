"""Physics guards: figures that the hardware rules out fail their check, with
the reason, instead of passing as measurements.

Each guard takes the measured figures (and the ceilings a site knows) and
returns ``None`` where the figure is possible, else one sentence saying why it
is not and what it means. The checks' sanity functions call them
(:mod:`hpcval.rfm.cfdio`, :mod:`hpcval.rfm.stream`, :mod:`hpcval.rfm.ior`).

Ceilings come from the partition's ``extras`` where a site states them:

* ``memory_bw_mbs``: the node's peak memory bandwidth in MB/s (channels x
  transfer rate x 8 bytes, from the vendor's figures);
* ``io_bw_mbs``: the most the device or link under the output directory can
  take, in MB/s (a 1 GbE link: 125; a 100 Gb/s link: 12,500; an NVMe
  drive's rated sequential write);
* ``link_bw_mbs``: the point-to-point bandwidth of one rank's link (MB/s),
  for the collective bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hpcval.core.series import median

MEMORY_CEILING_EXTRA = "memory_bw_mbs"
IO_CEILING_EXTRA = "io_bw_mbs"
LINK_CEILING_EXTRA = "link_bw_mbs"

#: MiB/s to MB/s.
MIB_TO_MB = 1.048576


def cache_resident_stencil(stencil_mbs: float, triad_mbs: float) -> str | None:
    """The stencil of a job cannot move memory faster than the triad of the
    same job and ranks: both count the bytes they must move (stencil 16 B per
    point, triad 24 B per element) and the stencil's real traffic per counted
    byte is no lower than the triad's (write-allocate adds 8 B to both), so
    from memory its counted bandwidth stays at or below the triad's. Above it,
    the grid sat in the caches."""
    if triad_mbs > 0 and stencil_mbs > triad_mbs:
        return (f"stencil {stencil_mbs:,.0f} MB/s is above the triad {triad_mbs:,.0f} MB/s of "
                f"the same job ({stencil_mbs / triad_mbs:.2f}x): a stencil from memory cannot "
                "beat the triad, so the grid was cache-resident; size it beyond the "
                "last-level cache (hpcval.node.sizing)")
    return None


def above_ceiling(figure: str, value_mbs: float, ceiling_mbs: float | None,
                  what: str) -> str | None:
    """A bandwidth above the hardware's ceiling (``None``: not known) was
    served by something faster than the thing measured (a cache)."""
    if ceiling_mbs is None or not math.isfinite(value_mbs):
        return None
    if value_mbs > ceiling_mbs:
        return (f"{figure} {value_mbs:,.0f} MB/s is above the {what} ({ceiling_mbs:,.0f} MB/s): "
                "no hardware path can deliver it, so a cache served it")
    return None


def noise_band(baselines_s: Sequence[float]) -> float | None:
    """The noise that ``strategy=none`` measures: the largest difference
    between two consecutive runs without output in one job (``None`` with
    fewer than two runs)."""
    if len(baselines_s) < 2:
        return None
    return max(abs(b - a) for a, b in zip(baselines_s, baselines_s[1:], strict=False))


def output_cost_in_noise(costs_s: Sequence[float], baselines_s: Sequence[float]) -> str | None:
    """A note (never a failure) where an output cost (run with output − run
    without) lies inside the noise of two runs without output: it is then
    indistinguishable from 0 (the output too small to cost anything
    measurable at this size), and a negative median there is the noise too.

    Assumes the runs of a job are exchangeable apart from the output: were
    the output free, each cost would be distributed like the difference of
    two baselines, and the median of the costs would exceed the largest of
    the consecutive baseline differences only by chance (with 5 pairs and
    normally distributed run times: 2.7 % of 200,000 simulated jobs)."""
    band = noise_band(baselines_s)
    if band is None or not costs_s:
        return None
    cost = median(list(costs_s))
    if abs(cost) <= band:
        return (f"output cost {cost * 1000:,.1f} ms is inside the noise of the runs without "
                f"output (±{band * 1000:,.1f} ms between two of them, what strategy=none "
                "measures): indistinguishable from 0 at this size (budget full measures it)")
    return None


#: How many noise bands below 0 an output cost's median must lie (with every
#: pair's cost below 0) to be impossible rather than noise.
BELOW_NOISE_BANDS = 3.0


def output_cost_below_noise(costs_s: Sequence[float], baselines_s: Sequence[float]
                            ) -> str | None:
    """An output cost that cannot be a measurement: writing results cannot
    make a run faster than the same run without output beyond the noise.
    Fails only when every pair's cost is below 0 and their median lies more
    than :data:`BELOW_NOISE_BANDS` noise bands (:func:`noise_band`) below 0.

    Same assumption as :func:`output_cost_in_noise` (exchangeable runs); a
    free output fails this in 0.025 % of 200,000 simulated 5-pair jobs with
    normal run times and 0.02 % with Student-t (3 degrees of freedom, heavy
    tails); a cost of -10 noise standard deviations (a broken measurement)
    is caught in 93 % (normal) and 68 % (Student-t) of them
    (``bench/output_cost_noise_sim.py``). A cost a little below 0 is the
    noise of a cost near 0, not a failure."""
    band = noise_band(baselines_s)
    costs = list(costs_s)
    if band is None or not costs or max(costs) >= 0:
        return None
    cost = median(costs)
    if cost < -BELOW_NOISE_BANDS * band:
        return (f"output cost {cost * 1000:,.1f} ms, every pair below 0: the runs with output "
                f"were faster than those without by more than {BELOW_NOISE_BANDS:g}x their "
                f"noise (±{band * 1000:,.1f} ms): not a measurement of the output (runs not "
                "paired as written?)")
    return None


def collective_bound_us(collective: str, msg_bytes: float, ranks: int,
                        link_mbs: float) -> float | None:
    """The least time (us) a collective of *msg_bytes* per rank can take on
    *ranks* ranks whose links carry at most *link_mbs* each: the bytes every
    rank must receive, over its link.

    * allreduce: every rank receives at least ``2 (p-1)/p`` of the message
      (reduce-scatter then allgather, the bandwidth-optimal bound);
    * alltoall: ``(p-1)/p`` of its buffer, and sends as much;
    * bcast, allgather, reduce: ``(p-1)/p`` of the message (allgather: each
      rank receives the others' blocks).
    ``None`` for a collective without a bound here or one rank."""
    p = int(ranks)
    if p < 2 or link_mbs <= 0 or msg_bytes <= 0:
        return None
    share = {"allreduce": 2 * (p - 1) / p, "alltoall": (p - 1) / p,
             "bcast": (p - 1) / p, "allgather": (p - 1) / p,
             "reduce": (p - 1) / p}.get(collective.lower())
    if share is None:
        return None
    return share * msg_bytes / (link_mbs * 1e6) * 1e6


def collective_faster_than_p2p(collective: str, time_us: float, msg_bytes: float, ranks: int,
                               link_mbs: float | None) -> str | None:
    """A collective that finished faster than its point-to-point bound did
    not move its data (or the time is not per operation)."""
    if link_mbs is None:
        return None
    bound = collective_bound_us(collective, msg_bytes, ranks, link_mbs)
    if bound is None or time_us >= bound:
        return None
    return (f"{collective} of {msg_bytes:,.0f} B on {ranks} ranks took {time_us:,.2f} us, below "
            f"its point-to-point bound {bound:,.2f} us (the bytes each rank must receive over a "
            f"{link_mbs:,.0f} MB/s link): the data was not moved")


def ceiling(extras: dict, key: str) -> float | None:
    """A ceiling from a partition's extras: a positive number of MB/s or
    ``None`` where the site does not state one; anything else is an error
    naming the key."""
    value = extras.get(key)
    if value is None:
        return None
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"extras {key}: {value!r} is not a bandwidth: give a positive number "
                         "of MB/s, or leave it out")
    return number
