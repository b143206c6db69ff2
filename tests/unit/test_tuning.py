"""Collective tuning: sweep parsing, bands and the Intel MPI setting string,
on a real sweep of I_MPI_ADJUST_ALLREDUCE (Intel MPI 2021, 2 ranks)."""

from __future__ import annotations

import pytest

from hpcval.core.errors import ParseError, SiteError
from hpcval.node import tuning


@pytest.fixture
def sweep_text(data_dir):
    return (data_dir / "imb" / "sweep_allreduce_impi2021.19.txt").read_text()


def test_real_sweep_parses_every_preset(sweep_text):
    times = tuning.parse_sweep(sweep_text, "Allreduce")
    assert sorted(times) == list(range(0, 33))  # 0 (default) and presets 1..32
    assert sorted(times[0]) == [0] + [2**i for i in range(3, 17)]
    assert all(sorted(t) == sorted(times[0]) for t in times.values())


def test_bands_cover_all_sizes_and_pick_the_fastest(sweep_text):
    times = tuning.parse_sweep(sweep_text, "Allreduce")
    bands = tuning.best_bands(times)
    assert bands[0].lo == 0 and bands[-1].hi == tuning.OPEN_END
    for prev, nxt in zip(bands, bands[1:], strict=False):
        assert nxt.lo == prev.hi + 1 and nxt.algorithm != prev.algorithm
    for band in bands:
        for size in (s for s in times[0] if band.lo <= s <= band.hi):
            assert times[band.algorithm][size] == min(times[a][size] for a in times if a)
    text = tuning.setting("Allreduce", bands)
    assert text == ";".join(f"{b.algorithm}:{b.lo}-{b.hi}" for b in bands)
    assert tuning.mean_gain_pct(times) == pytest.approx(
        100 * (sum(b.default_us for b in bands) - sum(b.best_us for b in bands))
        / sum(b.default_us for b in bands))


def test_bands_merge_neighbours():
    times = {0: {8: 10.0, 16: 10.0, 32: 10.0}, 1: {8: 1.0, 16: 1.0, 32: 9.0},
             2: {8: 5.0, 16: 5.0, 32: 2.0}}
    bands = tuning.best_bands(times)
    assert [(b.algorithm, b.lo, b.hi) for b in bands] == [(1, 0, 31), (2, 32, tuning.OPEN_END)]
    assert tuning.setting("Allreduce", bands) == f"1:0-31;2:32-{tuning.OPEN_END}"
    assert bands[0].gain_pct == pytest.approx(90.0)


def test_alternating_runs_give_ratios(sweep_text):
    runs = tuning.parse_labelled_runs(sweep_text, "Allreduce")
    pairs = [(0, runs[0][1]), (1, runs[12][1]), (0, runs[0][1]), (1, runs[0][1])]
    ratios = tuning.tuned_vs_default_pct(pairs)
    assert ratios[1] == pytest.approx(100.0)
    with pytest.raises(ParseError, match="must alternate"):
        tuning.tuned_vs_default_pct([(1, runs[0][1]), (0, runs[0][1])])


def test_broken_sweeps(sweep_text):
    with pytest.raises(ParseError, match="the sweep did not run"):
        tuning.parse_sweep("mpirun: command not found\n", "Allreduce")
    only_default = sweep_text[: sweep_text.index("HPCVAL-ALGORITHM 1\n")]
    with pytest.raises(ParseError, match="no explicit algorithm"):
        tuning.best_bands(tuning.parse_sweep(only_default, "Allreduce"))
    cut = sweep_text[: sweep_text.index("HPCVAL-ALGORITHM 5\n") + 600]
    cut_message = r"I_MPI_ADJUST_ALLREDUCE=5\): (no IMB result table|.*ends before)"
    with pytest.raises(ParseError, match=cut_message):
        tuning.parse_sweep(cut, "Allreduce")


@pytest.mark.parametrize("text, message", [
    ("Allreduce: {setting: '12:0-8;3:9-100'}\n", None),
    ("Allreduce: {setting: 'fast'}\n", "is not '<alg>:<lo>-<hi>"),
    ("Allreduce: {ranks: 2}\n", "Allreduce.setting: missing"),
    ("[]\n", "must map collectives"),
    ("Allreduce: {setting: '12:0-8', ranks: '2'}\n", r"Allreduce.ranks: '2' is not a positive"),
    ("Allreduce: {setting: '12:0-8', nodes: 0}\n", r"Allreduce.nodes: 0 is not a positive"),
    ("Allreduce: {setting: [1\n", r"line 2: not valid YAML"),
    ("Allreduce: {setting: '12:0-8'}\nAllreduce: {setting: '1:0-8'}\n", "given twice"),
])
def test_tuning_file_validation(tmp_path, text, message):
    path = tmp_path / "mpi-tuning.yaml"
    path.write_text(text)
    if message is None:
        assert tuning.load_tuning(path)["Allreduce"]["setting"] == "12:0-8;3:9-100"
    else:
        with pytest.raises(SiteError, match=message) as err:
            tuning.load_tuning(path)
        assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)
        assert "hpcval tune collectives --write" in str(err.value) or "YAML" in str(err.value) \
            or "given twice" in str(err.value)
