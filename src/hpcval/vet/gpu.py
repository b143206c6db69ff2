"""``hpcval vet`` on GPU partitions: every GPU judged against all the GPUs of
its partition, the one that is off named by node and index.

A GPU partition's nodes carry the same GPUs, so the population of a per-GPU
figure is every GPU of every vetted node (8 nodes of 4 GPUs: 32 values), not
the nodes: a node with one slow GPU of four would hide in a per-node median.
Judging is the node judging's (:func:`hpcval.vet.judge.deviations`): the
median and the MAD of the better half, robust z beyond ``settings.z`` *and* a
one-sided rank test of the GPU's samples against the samples of the GPUs of the
*other* nodes (a node-wide cause slows every GPU of the node, so its own GPUs
are no yardstick for each other), and worse than the figure's ``min_effect``.
Per-node GPU figures (NCCL all-reduce bus bandwidth across a node's GPUs) are
judged like the other node figures.

Samples come as ``{figure: {node: {gpu_index: [samples]}}}`` (``gpu_samples``
of a stored vetting). Assumptions, to check on the first real partition: the
GPUs are one model (a mixed partition must be vetted per model), and a GPU's
repeated runs scatter less than the GPUs differ when one is faulty: BabelStream
triad on one A100 varied 0.8 % between two recorded runs (tests/data/gpu).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hpcval.vet.judge import (
    Culprit,
    Deviation,
    FigureSpec,
    JudgeSettings,
    Verdict,
    _fmt,
    deviations,
    judge_node_figure,
)

#: Per-GPU figures: one value per GPU of each node.
GPU_FIGURES: dict[str, FigureSpec] = {f.name: f for f in (
    FigureSpec("gpu_triad_bw", "GPU memory triad (BabelStream)", "MB/s", "higher", 0.10,
               "best"),
    FigureSpec("gpu_h2d_bw", "host-to-device pinned copy", "GB/s", "higher", 0.15, "best"),
    FigureSpec("gpu_d2h_bw", "device-to-host pinned copy", "GB/s", "higher", 0.15, "best"),
    FigureSpec("gpu_gemm", "GEMM throughput", "TFLOP/s", "higher", 0.10, "best"),
)}

#: Per-node GPU figures: one value per node.
NODE_GPU_FIGURES: dict[str, FigureSpec] = {f.name: f for f in (
    FigureSpec("gpu_nccl_allreduce_busbw", "NCCL all-reduce bus bandwidth (node's GPUs)",
               "GB/s", "higher", 0.15, "best"),
)}


def gpu_key(node: str, index: int | str) -> str:
    """``node/gpuN``: how a GPU is named in a verdict."""
    return f"{node}/gpu{index}"


def judge_gpu_figure(samples: Mapping[str, Mapping[int | str, Sequence[float]]],
                     spec: FigureSpec, settings: JudgeSettings, verdict: Verdict) -> None:
    """Judge one per-GPU figure over every GPU of the partition."""
    flat: dict[str, list[float]] = {}
    where: dict[str, tuple[str, str]] = {}
    for node, per_gpu in samples.items():
        for index, values in per_gpu.items():
            if values:
                key = gpu_key(node, index)
                flat[key] = [float(v) for v in values]
                where[key] = (node, str(index))
    values = {k: spec.of(s) for k, s in flat.items()}
    if len(values) < settings.min_nodes:
        verdict.notes.append(
            f"{spec.label}: {len(values)} GPU(s) measured, fewer than {settings.min_nodes}: "
            "too few to judge against each other")
        for key, v in values.items():
            node, index = where[key]
            verdict.table.setdefault(node, {})[f"{spec.name}[gpu{index}]"] = Deviation(
                v, v, 0.0, 0.0, False, len(flat[key]))
        return
    def other_nodes(key: str) -> list[float]:
        # a node-wide cause (power cap, co-running load) slows all its GPUs: the
        # GPUs of the same node are no independent yardstick for each other
        node = where[key][0]
        return [x for k, s in flat.items() if where[k][0] != node for x in s]

    devs = deviations(values, spec, settings, counts={k: len(s) for k, s in flat.items()},
                      samples=flat, both=True, others_of=other_nodes)
    for key, d in sorted(devs.items()):
        node, index = where[key]
        verdict.table.setdefault(node, {})[f"{spec.name}[gpu{index}]"] = d
        if d.low:
            verdict.culprits.append(Culprit(
                "gpu", key, spec.name,
                f"{node} GPU {index}: {spec.label} {_fmt(d.value)} {spec.unit} ({spec.summary} "
                f"of {d.samples} samples), {abs(d.worse_by) * 100:.0f} % worse than the median "
                f"of the partition's {len(values)} GPUs {_fmt(d.center)} {spec.unit} (robust z "
                f"{d.z:.1f}; its samples below other nodes' GPUs', rank test p {d.p:.1g})",
                [node]))


def judge_gpus(verdict: Verdict,
               gpu_samples: Mapping[str, Mapping[str, Mapping[int | str, Sequence[float]]]],
               node_samples: Mapping[str, Mapping[str, Sequence[float]]],
               settings: JudgeSettings) -> None:
    """Every GPU figure of a vetting: per GPU (``gpu_samples``) and per node
    (``node_samples``, keyed by the figures of :data:`NODE_GPU_FIGURES`)."""
    for name, per_node in gpu_samples.items():
        if name not in GPU_FIGURES:
            verdict.notes.append(f"{name}: not a GPU figure hpcval judges (known: "
                                 f"{', '.join(GPU_FIGURES)}); shown, not judged")
            continue
        judge_gpu_figure(per_node, GPU_FIGURES[name], settings, verdict)
    for name, spec in NODE_GPU_FIGURES.items():
        if node_samples.get(name):
            judge_node_figure(node_samples[name], spec, settings, verdict)
