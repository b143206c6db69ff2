"""What ``hpcval vet`` measures on each GPU of a node of a GPU partition.

Runs as one srun step per node (``python -m hpcval.vet.gpu_probe``), after the
CPU probe: it finds the node's GPUs with ``nvidia-smi --query-gpu``
(:func:`hpcval.node.gpus.query_this_node`), runs BabelStream's CUDA build
(``cuda-stream``) ``samples`` times on each GPU (arrays sized as the
``babelstream_triad_check`` sizes them), and where hpcval's ``gpubench`` is
found, its pinned host-to-device and device-to-host copies and DGEMM on each
GPU (``samples`` repetitions per run). It prints one line ``HPCVAL-VET-GPU
{json}``: per figure of :data:`hpcval.vet.gpu.GPU_FIGURES`, the samples of
each GPU by index, and what could not be measured and why. A program is found
on ``PATH`` or in ``$HPCVAL_GPU_DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from hpcval.core.errors import HpcvalError
from hpcval.node.gpus import babelstream_array_elements, query_this_node
from hpcval.parsers import babelstream, gpubench

MARKER = "HPCVAL-VET-GPU "

Runner = Callable[[list[str]], str]


def _run(argv: list[str], timeout: float = 600) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        raise HpcvalError(f"{' '.join(argv[:2])} exited with {done.returncode}: {tail[0]}")
    return done.stdout


def find(name: str) -> str | None:
    """*name* in ``$HPCVAL_GPU_DIR`` (colon-separated), else on ``PATH``."""
    for d in [d for d in os.environ.get("HPCVAL_GPU_DIR", "").split(":") if d]:
        found = shutil.which(name, path=d)
        if found:
            return found
    return shutil.which(name)


def measure(gpus: int, memory_bytes: int | None, samples: int,
            array_size: int | None = None, run: Runner = _run) -> dict[str, Any]:
    """Samples of every per-GPU figure of the node's *gpus* GPUs, and the skips."""
    figures: dict[str, dict[str, list[float]]] = {}
    skipped: list[str] = []
    stream = find("cuda-stream")
    if stream is None:
        skipped.append("gpu_triad_bw: cuda-stream not found in $HPCVAL_GPU_DIR or PATH "
                       "(Spack: babelstream +cuda)")
    else:
        size = array_size or babelstream_array_elements(memory_bytes, None)
        for d in range(gpus):
            for i in range(samples):
                source = f"cuda-stream --device {d} (sample {i + 1})"
                try:
                    result = babelstream.check_complete(babelstream.parse_babelstream(
                        run([stream, "--device", str(d), "--arraysize", str(size),
                             "--numtimes", "100"]), source))
                except HpcvalError as err:
                    skipped.append(f"gpu_triad_bw: GPU {d}: {err}")
                    break
                figures.setdefault("gpu_triad_bw", {}).setdefault(str(d), []).append(
                    result.rate("Triad"))
    bench = find("gpubench")
    if bench is None:
        skipped.append("gpu_h2d_bw, gpu_d2h_bw, gpu_gemm: gpubench not found in "
                       "$HPCVAL_GPU_DIR or PATH (Spack: hpcval-gpubench +cuda)")
        return {"figures": figures, "skipped": skipped}
    for figure, mode, extra in (("gpu_h2d_bw", "h2d", []), ("gpu_d2h_bw", "d2h", []),
                                ("gpu_gemm", "gemm", ["--precision", "double"])):
        for d in range(gpus):
            argv = [bench, mode, "--device", str(d), "--reps", str(samples), *extra]
            try:
                result = gpubench.check_complete(gpubench.parse_gpubench(
                    run(argv), f"gpubench {mode} --device {d}"), mode)
            except HpcvalError as err:
                skipped.append(f"{figure}: GPU {d}: {err}")
                continue
            figures.setdefault(figure, {})[str(d)] = result.values
    return {"figures": figures, "skipped": skipped}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcval.vet.gpu_probe")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--array-size", type=int, default=None,
                    help="BabelStream elements per array (default: from the GPU's memory)")
    args = ap.parse_args(argv)
    try:
        gpus = query_this_node()
    except HpcvalError as err:
        print(f"hpcval vet gpu probe: error: {err}", file=sys.stderr)
        return 3
    if gpus is None:
        print("hpcval vet gpu probe: error: nvidia-smi not found or sees no GPU on this node",
              file=sys.stderr)
        return 3
    data = measure(gpus.count, gpus.memory_bytes, args.samples, args.array_size)
    print(MARKER + json.dumps({"host": socket.gethostname(), "gpus": gpus.count, **data}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
