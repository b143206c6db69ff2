"""Physics guards (hpcval.node.physics) on recorded and constructed outputs: each
fails the figure physics rules out, with the reason, and passes a possible one."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.node import physics
from hpcval.parsers.cfdio import output_cost, parse_cfdio

DATA = Path(__file__).resolve().parents[1] / "data" / "cfdio"

# The sizing issue's 16-core server (Intel MPI), as the proxy printed its line:
# a 256 x 256 x 128 grid (2 x 64 MiB) inside a 300 MiB L3 (constructed from the
# issue's figures: stencil 138.8 GB/s, triad 57.4 GB/s in the same job).
CACHE_RESIDENT = ("CFDIO mode=stencil strategy=none ranks=16 dims=4x2x2 grid=256x256x128 "
                  "steps=20 every=10 outputs=0 total_s=1.934e-01 compute_s=1.209e-01 "
                  "halo_s=7.2e-02 output_s=0 output_share=0.0000 bytes_written=0 write_MBs=0.0 "
                  "stencil_MBs=138800.0 checksum=f9b00241b2bd69d0 verified=1 kept=0 "
                  "triad_MBs=57400.0 stencil_fraction=2.4181 valid=1")


def test_cache_resident_stencil_fails_with_the_reason() -> None:
    r = parse_cfdio(CACHE_RESIDENT, source="constructed")
    why = physics.cache_resident_stencil(float(r["stencil_MBs"]), float(r["triad_MBs"]))
    assert why is not None
    assert "138,800 MB/s is above the triad 57,400 MB/s" in why and "cache-resident" in why


def test_stencil_from_memory_passes() -> None:
    # recorded on the 2-core workstation: 2 x 16 MiB fields, stencil at 0.40 of triad
    r = parse_cfdio((DATA / "stencil_with_triad_2ranks.out").read_text(), source="recorded")
    assert physics.cache_resident_stencil(float(r["stencil_MBs"]), float(r["triad_MBs"])) is None


def test_bandwidth_above_a_stated_ceiling_fails_and_none_means_unknown() -> None:
    why = physics.above_ceiling("triad_bw", 410_000, 409_600, "node's memory bandwidth")
    assert why is not None and "410,000 MB/s is above the node's memory bandwidth" in why
    assert physics.above_ceiling("triad_bw", 300_000, 409_600, "x") is None
    assert physics.above_ceiling("write_bw", 1e9, None, "x") is None
    # 1 GbE carries at most 125 MB/s: a 1,629 MB/s read over it came from a cache
    r = parse_cfdio((DATA / "read_2readers.out").read_text(), source="recorded")
    assert physics.above_ceiling("aggregate_read_bw", float(r["aggregate_MBs"]), 125,
                                 "link") is not None


def _pairs(costs: list[float], base: float, noise: list[float]) -> tuple[list[float],
                                                                          list[float]]:
    baselines = [base + n for n in noise]
    return [b + c for b, c in zip(baselines, costs, strict=True)], baselines


def test_output_cost_inside_the_noise_is_noted_not_failed() -> None:
    # 2 MiB per output (the fixed 64^3 grid): costs of a few ms, baselines that
    # differ by up to 40 ms between runs
    runs, baselines = _pairs([0.004, -0.012, 0.009, 0.002, 0.020], 0.070,
                             [0.0, 0.040, 0.003, 0.031, 0.008])
    costs = [r - b for r, b in zip(runs, baselines, strict=True)]
    why = physics.output_cost_in_noise(costs, baselines)
    assert why is not None and "inside the noise" in why and "±40.0 ms" in why
    assert "indistinguishable from 0" in why
    # a median of a few ms below 0 is that noise, not an impossible figure
    assert physics.output_cost_below_noise(costs, baselines) is None
    negative = [c - 0.012 for c in costs]
    assert physics.output_cost_below_noise(negative, baselines) is None


def test_output_cost_far_below_the_noise_fails() -> None:
    """Every pair faster with output, by more than 3x the noise: not a
    measurement of the output."""
    baselines = [1.0, 1.004, 1.001, 1.003, 1.0]
    costs = [-0.2, -0.25, -0.22, -0.3, -0.21]
    why = physics.output_cost_below_noise(costs, baselines)
    assert why is not None and "every pair below 0" in why and "±4.0 ms" in why
    assert physics.output_cost_below_noise([*costs[:4], 0.01], baselines) is None


def test_output_cost_above_the_noise_passes() -> None:
    runs, baselines = _pairs([0.42, 0.45, 0.40, 0.43, 0.44], 0.12,
                             [0.0, 0.002, 0.001, 0.003, 0.0])
    costs = [r - b for r, b in zip(runs, baselines, strict=True)]
    assert physics.output_cost_in_noise(costs, baselines) is None
    assert physics.output_cost_in_noise(costs, baselines[:1]) is None  # no noise measured


def _recorded_pairs(run: str, base: str) -> tuple[list[float], list[float]]:
    pairs = DATA / "pairs_64cubed"
    runs = [parse_cfdio((pairs / f"{run}-{i}.out").read_text(), source=run) for i in range(1, 6)]
    bases = [parse_cfdio((pairs / f"{base}-{i}.out").read_text(), source=base)
             for i in range(1, 6)]
    costs = [output_cost(r, b)[0] for r, b in zip(runs, bases, strict=True)]
    return costs, [float(b["total_s"]) for b in bases]


def test_recorded_noise_level_output_cost_is_noted() -> None:
    # two runs without output paired as a strategy and its baseline: what a cost
    # inside the noise looks like on real runs
    costs, baselines = _recorded_pairs("none", "baseline2")
    why = physics.output_cost_in_noise(costs, baselines)
    assert why is not None and "inside the noise" in why
    assert physics.output_cost_below_noise(costs, baselines) is None


def test_recorded_small_but_real_output_cost_passes() -> None:
    # mpiio's 4 fsync'd outputs of 2 MiB cost 15-32 ms here, far above the ~1 ms
    # the baselines differ by
    costs, baselines = _recorded_pairs("mpiio", "baseline")
    assert min(costs) > 0.01
    assert physics.output_cost_in_noise(costs, baselines) is None


@pytest.mark.parametrize(("collective", "share"), [("allreduce", 2 * 7 / 8),
                                                   ("alltoall", 7 / 8), ("bcast", 7 / 8)])
def test_collective_bound_is_the_bytes_each_rank_must_receive(collective: str,
                                                              share: float) -> None:
    bound = physics.collective_bound_us(collective, 1 << 20, 8, 12_500)
    assert bound == pytest.approx(share * (1 << 20) / 12.5e9 * 1e6)


def test_collective_faster_than_its_point_to_point_bound_fails() -> None:
    # 1 MiB allreduce on 8 ranks over 12.5 GB/s links needs >= 146.8 us
    why = physics.collective_faster_than_p2p("Allreduce", 20.0, 1 << 20, 8, 12_500)
    assert why is not None and "below its point-to-point bound 146.80 us" in why
    assert physics.collective_faster_than_p2p("Allreduce", 200.0, 1 << 20, 8, 12_500) is None
    assert physics.collective_faster_than_p2p("Allreduce", 1.0, 1 << 20, 8, None) is None
    assert physics.collective_faster_than_p2p("Barrier", 1.0, 0, 8, 12_500) is None


@pytest.mark.parametrize("bad", ["fast", -1, 0, True, float("nan")])
def test_a_wrong_ceiling_names_the_key(bad: object) -> None:
    with pytest.raises(ValueError, match="extras io_bw_mbs"):
        physics.ceiling({"io_bw_mbs": bad}, "io_bw_mbs")
    assert physics.ceiling({}, "io_bw_mbs") is None
    assert physics.ceiling({"io_bw_mbs": "125"}, "io_bw_mbs") == 125.0


def test_recorded_allreduce_against_its_point_to_point_bound() -> None:
    # IMB Allreduce on 2 ranks of the workstation (Intel MPI 2021.19, shared memory)
    from hpcval.parsers.imb import parse_imb

    result = parse_imb((Path(__file__).resolve().parents[1] / "data" / "imb" /
                        "allreduce_sendrecv_npmin1_impi2021.19.txt").read_text(), "recorded")
    table = result.table("Allreduce", 2)
    t = table.value(1024, "t_avg_usec")
    # a shared-memory copy of 10 GB/s allows it; a 1 MB/s link could not carry 1 KiB
    # in that time
    assert physics.collective_faster_than_p2p("Allreduce", t, 1024, 2, 10_000) is None
    assert physics.collective_faster_than_p2p("Allreduce", t, 1024, 2, 1) is not None


def test_recorded_cache_resident_stencil_fails() -> None:
    # a 32^3 grid on the workstation: the stencil ran from the caches at 2.2x the triad
    r = parse_cfdio((DATA / "stencil_cache_resident_2ranks.out").read_text(), source="recorded")
    why = physics.cache_resident_stencil(float(r["stencil_MBs"]), float(r["triad_MBs"]))
    assert why is not None and "cache-resident" in why
