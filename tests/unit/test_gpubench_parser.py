"""Parser of gpubench, hpcval's own CUDA proxy (proxies/gpubench).

The proxy has not run on a GPU yet (no CUDA toolkit or GPU where it was
written): these outputs are constructed in the format gpubench.cu documents
and prints (its ``print`` and ``info`` functions), not recorded from a run.
A test below reads that format from the proxy's source, so the two cannot
drift apart unnoticed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers.gpubench import check_complete, parse_gpubench

SOURCE = Path(__file__).resolve().parents[2] / "proxies" / "gpubench" / "gpubench.cu"


def run_text(mode: str = "h2d", values: tuple[float, ...] = (24.5, 24.7, 24.6),
             unit: str = "GB/s", done: bool = True, device: int = 0, peer: int = -1,
             size: int = 268435456) -> str:
    lines = [f"hpcval-gpubench mode={mode} device={device} peer={peer} size={size} "
             f"rep={i} value={v:.6g} unit={unit}" for i, v in enumerate(values, start=1)]
    if done:
        lines.append(f"hpcval-gpubench done mode={mode}")
    return "\n".join(lines) + "\n"


def test_the_format_is_the_one_the_proxy_prints() -> None:
    src = SOURCE.read_text()
    assert ('"hpcval-gpubench mode=%s device=%d peer=%d size=%zu rep=%d value=%.6g unit=%s\\n"'
            in src)
    assert '"hpcval-gpubench done mode=%s\\n"' in src
    assert '"hpcval-gpubench error: %s: %s\\n"' in src
    assert re.search(r'"hpcval-gpubench info device=%d name=%s memory_bytes=%zu l2_bytes=%d '
                     r'cc=%d\.%d\\n"', src)


def test_copy_samples_and_their_run() -> None:
    r = check_complete(parse_gpubench(run_text(), "h2d.out"), "h2d")
    assert r.values == [24.5, 24.7, 24.6]
    assert (r.mode, r.device, r.peer, r.size, r.unit) == ("h2d", 0, -1, 268435456, "GB/s")


def test_gemm_and_p2p_lines() -> None:
    g = check_complete(parse_gpubench(run_text("gemm", (51.2, 50.9), "TFLOP/s", size=8192)),
                       "gemm")
    assert g.values == [51.2, 50.9] and g.unit == "TFLOP/s" and g.size == 8192
    p = check_complete(parse_gpubench(run_text("p2p", (310.0,), device=0, peer=3)), "p2p")
    assert (p.device, p.peer) == (0, 3)


def test_info_line() -> None:
    r = parse_gpubench("hpcval-gpubench info device=1 name=NVIDIA_H100_80GB_HBM3 "
                       "memory_bytes=85029158912 l2_bytes=52428800 cc=9.0\n")
    assert r.info == {"device": "1", "name": "NVIDIA_H100_80GB_HBM3",
                      "memory_bytes": "85029158912", "l2_bytes": "52428800", "cc": "9.0"}
    assert r.values == []


def test_error_line_is_the_failure() -> None:
    with pytest.raises(ParseError, match="gpubench failed: cudaMallocHost .pinned.: out of "
                                         "memory"):
        parse_gpubench("hpcval-gpubench error: cudaMallocHost (pinned): out of memory\n", "x")


def test_cut_off_run_and_empty_output_and_wrong_mode() -> None:
    with pytest.raises(ParseError, match="ends before 'done'"):
        check_complete(parse_gpubench(run_text(done=False)), "h2d")
    with pytest.raises(ParseError, match="no gpubench d2h sample"):
        check_complete(parse_gpubench("", "d2h.out"), "d2h")
    with pytest.raises(ParseError, match="ran h2d, not d2h"):
        check_complete(parse_gpubench(run_text()), "d2h")


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-3", "fast"])
def test_impossible_values_are_named(value: str) -> None:
    text = run_text().replace("value=24.7", f"value={value}")
    with pytest.raises(ParseError, match=r"h2d.out:2: (impossible value|value .* is not)"):
        parse_gpubench(text, "h2d.out")


def test_two_runs_in_one_file_are_refused() -> None:
    text = run_text() + run_text("gemm", (40.0,), "TFLOP/s")
    with pytest.raises(ParseError, match="two runs in one file"):
        parse_gpubench(text, "mixed.out")
