"""Property tests of every parser: garbage, truncated output and random line
noise (lines dropped, repeated, swapped, replaced by lines of other tools'
output or by random text, characters changed) never raise anything but
:class:`~hpcval.core.errors.ParseError` — no IndexError, ValueError, KeyError or
other traceback reaches a user. Inputs are derived from the real outputs in
tests/data; hypothesis runs derandomized, so every run tries the same cases."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcval.core.errors import ParseError
from hpcval.parsers import cfdio, hpcg, imb, ior, omb, stream, wrf

DATA = Path(__file__).resolve().parents[1] / "data"


def _imb(text: str) -> None:
    result = imb.parse_imb(text, "p")
    for table in result.tables:
        table.sizes()
        for column in table.columns:
            table.series(column)
        try:  # every table (each of two modes too), not only those before the first refused
            imb.check_complete(result, table.benchmark, table.sizes()[:3], table.processes,
                               source="p", mode=table.mode)
        except ParseError:
            pass
    for run in imb.parse_imb_runs(text, "p"):
        run.table(run.tables[0].benchmark, mode=run.tables[0].mode)


def _omb(text: str) -> None:
    for result in omb.parse_omb_tables(text, "p").values():
        result.sizes()
        result.validation_failures()
        for column in result.columns[1:]:
            if column != "validation":
                result.column(column)
    omb.check_complete(omb.parse_omb(text, "p"), 1 << 20, "p")


def _ior_json(text: str) -> None:
    for run in ior.parse_ior_json_runs(text, "p", require=()):
        for result in run.values():
            assert result.layout in ("shared", "file-per-process")
    for result in ior.parse_ior_json_tests(text, "p", require=()).values():
        for name in result.operations:
            result.max_mib(name)
            result.mean_mib(name)
    ior.parse_ior_json(text, "p")


def _ior_text(text: str) -> None:
    for run in ior.parse_ior_text_runs(text, "p"):
        assert run.line >= 1 and run.tests
    ior.parse_ior_text_tests(text, "p")
    ior.parse_ior_text(text, "p")


def _wrf_log(text: str) -> None:
    log = wrf.parse_wrf_log(text, "p")
    log.failure()
    wrf.check_complete(log)
    wrf.figures(log)


def _wrf_namelist(text: str) -> None:
    wrf.expected_steps(text)
    wrf.start_time(text)


def _stream(text: str) -> None:
    for run in stream.parse_stream_runs(text, "p"):
        assert run.line >= 1
        try:
            stream.check_complete(run).rate("Triad")
        except ParseError:
            pass
    result = stream.check_complete(stream.parse_stream(text, "p"))
    for kernel in stream.KERNELS:
        result.rate(kernel)


def _hpcg(text: str) -> None:
    result = hpcg.check_valid(hpcg.parse_hpcg(text, "p"))
    assert isinstance(result.official, bool)


def _cfdio(text: str) -> None:
    fields = cfdio.parse_cfdio(text, "p")
    if fields["mode"] == "stencil":
        cfdio.output_cost(fields, fields)


def _files(pattern: str) -> list[str]:
    return [p.read_text(errors="replace") for p in sorted(DATA.glob(pattern))]


PARSERS: dict[str, tuple[Callable[[str], Any], list[str]]] = {
    "cfdio": (_cfdio, _files("cfdio/*.out")),
    "imb": (_imb, _files("imb/*.txt")),
    "omb": (_omb, _files("omb/*/*.txt")),
    "ior-json": (_ior_json, _files("ior/*.json")),
    "ior-text": (_ior_text, _files("ior/*verbose*.txt") + _files("ior/*.out")),
    "wrf-log": (_wrf_log, _files("wrf/*rsl.error*")),
    "wrf-namelist": (_wrf_namelist, _files("wrf/namelist*")),
    "stream": (_stream, _files("stream/*.txt")),
    "hpcg": (_hpcg, _files("hpcg/*.txt") + _files("hpcg/*.yaml")),
}
#: Lines of every tool's real output: the noise one tool's parser meets in a
#: merged job log.
ALL_LINES = sorted({line for _, texts in PARSERS.values() for text in texts
                    for line in text.splitlines()})


def only_parse_errors(parse: Callable[[str], Any], text: str) -> None:
    try:
        parse(text)
    except ParseError:
        pass


@st.composite
def mutated(draw: st.DrawFn, texts: list[str]) -> str:
    text = draw(st.sampled_from(texts))
    kind = draw(st.sampled_from(["truncate", "lines", "chars", "garbage"]))
    if kind == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "garbage":
        return draw(st.text(max_size=400))
    if kind == "chars":
        chars = list(text)
        for _ in range(draw(st.integers(1, 8))):
            if not chars:
                break
            at = draw(st.integers(0, len(chars) - 1))
            chars[at] = draw(st.sampled_from(list("0123456789.-+eE#:=[]() \n\tx\x00")))
        return "".join(chars)
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["drop", "repeat", "swap", "foreign", "random"]))
        at = draw(st.integers(0, max(len(lines) - 1, 0)))
        if op == "drop" and lines:
            del lines[at]
        elif op == "repeat" and lines:
            lines.insert(at, lines[at])
        elif op == "swap" and len(lines) > 1:
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        elif op == "foreign":
            lines.insert(at, draw(st.sampled_from(ALL_LINES)))
        else:
            lines.insert(at, draw(st.text(max_size=80).filter(lambda s: "\n" not in s)))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_recorded_variant_is_in_the_corpus(name: str) -> None:
    assert PARSERS[name][1], f"no recorded {name} output in tests/data"


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_mutated_real_output_raises_only_parse_errors(name: str) -> None:
    parse, texts = PARSERS[name]

    @settings(max_examples=200, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(text=mutated(texts))
    def check(text: str) -> None:
        only_parse_errors(parse, text)

    check()


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_truncation_point_of_a_real_output(name: str) -> None:
    """Every cut before and after a line end of every recorded file, and cuts inside the
    lines of the first file."""
    parse, texts = PARSERS[name]
    for text in texts:
        for cut in [j for i, c in enumerate(text) if c == "\n" for j in (i, i + 1)]:
            only_parse_errors(parse, text[:cut])
    text = texts[0][:20000]
    for cut in range(0, len(text), max(len(text) // 200, 1)):
        only_parse_errors(parse, text[:cut])


JSON_VALUES: list[Any] = [None, "x", "", [], {}, True, 0, -1, 1e308, float("inf"),
                          float("nan"), 2**70, [1, 2], {"access": "write"}, "write"]


def _mutate_json(node: Any, rnd: random.Random) -> None:
    items = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) \
        if isinstance(node, list) else []
    for key, value in items:
        roll = rnd.random()
        if roll < 0.05:
            node[key] = rnd.choice(JSON_VALUES)
        elif roll < 0.08 and isinstance(node, dict):
            del node[key]
        else:
            _mutate_json(value, rnd)


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1),
       name=st.sampled_from(sorted(p.name for p in DATA.glob("ior/*.json")
                                   if "invalid" not in p.name and "error" not in p.name)))
def test_ior_json_with_mutated_structure_raises_only_parse_errors(seed: int, name: str) -> None:
    """Values of the real summaries replaced by other JSON values (Infinity and
    NaN included, which Python's json reads), keys dropped."""
    doc = json.loads((DATA / "ior" / name).read_text())
    _mutate_json(doc, random.Random(seed))
    only_parse_errors(_ior_json, json.dumps(doc))
