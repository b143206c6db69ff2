"""Property tests of the GPU parsers, as tests/unit/test_parser_properties.py does
for the others: truncated, mutated and garbage versions of the recorded outputs
in tests/data/gpu raise nothing but :class:`~hpcval.core.errors.ParseError`.
Hypothesis runs derandomized, so every run tries the same cases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcval.core.errors import ParseError
from hpcval.node import gpu_audit
from hpcval.parsers import babelstream, nccl_tests, nvidia_smi, omb

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"
EXPECT = {"gpu.ecc_volatile_uncorrected": {"max": 0}, "gpu.pcie_width_fraction": {"min": 1},
          "gpu.clock_reasons": "none", "gpu.count": {"min": 1}, "gpu.persistence_mode": "any"}


def _xml(text: str) -> None:
    log = nvidia_smi.parse_nvidia_smi_xml(text, "p")
    gpu_audit.failures(gpu_audit.audit_gpus(EXPECT, log))


def _csv(text: str) -> None:
    q = nvidia_smi.parse_query_csv(text, "p")
    for i in range(len(q.rows)):
        for name in q.fields:
            if name not in ("name", "driver_version"):
                q.number(i, name)


def _babelstream(text: str) -> None:
    r = babelstream.check_complete(babelstream.parse_babelstream(text, "p"))
    r.rate("triad")


def _nccl(text: str) -> None:
    r = nccl_tests.check_complete(nccl_tests.parse_nccl_tests(text, "p"))
    r.busbw(r.sizes()[-1])


def _omb_cuda(text: str) -> None:
    omb.check_complete(omb.parse_omb(text, "p"), 1 << 20, "p")


def _files(pattern: str) -> list[str]:
    return [p.read_text(errors="replace") for p in sorted(DATA.glob(pattern))]


PARSERS: dict[str, tuple[Callable[[str], Any], list[str]]] = {
    "nvidia-smi-xml": (_xml, _files("nvidia-smi/*.xml")),
    "nvidia-smi-csv": (_csv, _files("nvidia-smi-csv/*.csv")),
    "babelstream": (_babelstream, _files("babelstream/*.txt")),
    "nccl-tests": (_nccl, _files("nccl-tests/*.txt")),
    "omb-cuda": (_omb_cuda, _files("omb-cuda/*.txt")),
}
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
            at = draw(st.integers(0, len(chars) - 1))
            chars[at] = draw(st.sampled_from(list("0123456789.-+eE#:=[]()<>/&;x \n\t\x00")))
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
    assert PARSERS[name][1], f"no recorded {name} output in tests/data/gpu"


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
    parse, texts = PARSERS[name]
    for text in texts:
        cuts = [j for i, c in enumerate(text) if c == "\n" for j in (i, i + 1)]
        for cut in cuts[:: max(len(cuts) // 400, 1)]:
            only_parse_errors(parse, text[:cut])
