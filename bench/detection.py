"""Record IMB PingPong samples on the lab for the detection experiment.

``python bench/detection.py record OUT.json`` (root, lab up, under the lab lock:
use ``bench/detection.sh``) runs clean runs and runs on links made 3, 5, 10
and 20 % slower, in blocks of random order, so that slow drift of the machine
hits clean and degraded runs alike. Each run is one Slurm job on two lab
nodes that starts IMB PingPong ``--samples`` times (one ``srun`` step each),
so every figure has that many samples per run.

Between-run noise. On a shaped link the figure is quieter from run to run than
what the lab showed at 1 Gbit/s (coefficient of variation 7.6 % for 1 MiB
bandwidth), so every run gets competing traffic: a paced UDP stream in both
directions between the two nodes, taking a share of the link drawn per run from
a normal distribution (mean ``--load-mean``, sd ``--load-sd``, cut to
0..``--load-max``), as other jobs' traffic on a shared network would. The share
is of the run's own link rate, so a degraded link moves the figure by the
expected amount. The draw is stored with each run.

``python bench/detection.py traffic send|recv ...`` is that traffic generator
(started inside the node namespaces by ``record``).

``python bench/detection_eval.py DATA.json`` prints the detection tables
(docs/judging.md) by replaying the recorded runs through ``hpcval.history.judging``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Message sizes measured (bytes) and the figures judged from them.
SIZES = [8, 65536, 262144, 1 << 20, 4 << 20]
FIGURES = {
    "lat_8B": (8, "t_usec", "us", "lower"),
    "lat_64KiB": (65536, "t_usec", "us", "lower"),
    "bw_256KiB": (262144, "mbytes_per_sec", "MB/s", "higher"),
    "bw_1MiB": (1 << 20, "mbytes_per_sec", "MB/s", "higher"),
    "bw_4MiB": (4 << 20, "mbytes_per_sec", "MB/s", "higher"),
}
#: Degraded runs: per-cent lower link rate.
DROPS = [3, 5, 10, 20]
UDP_PORT = 5399
PAYLOAD = 1400


# --------------------------------------------------------------------------- traffic
def traffic_send(dest: str, rate_bytes: float, seconds: float) -> None:
    """Send UDP datagrams to ``dest`` at ``rate_bytes`` per second, paced in 5 ms slots."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"\0" * PAYLOAD
    start = time.monotonic()
    sent = 0.0
    while (now := time.monotonic()) - start < seconds:
        due = (now - start) * rate_bytes
        while sent < due:
            try:
                sock.sendto(payload, (dest, UDP_PORT))
            except OSError:  # a full queue drops the datagram, as a switch would
                pass
            sent += PAYLOAD
        time.sleep(0.005)


def traffic_recv(seconds: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", UDP_PORT))
    sock.settimeout(0.5)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            sock.recv(65536)
        except TimeoutError:
            pass


class Background:
    """UDP traffic both ways between two lab nodes while a run goes on."""

    def __init__(self, nodes: list[tuple[str, str]], rate_bytes: float, seconds: float) -> None:
        self.procs: list[subprocess.Popen] = []
        if rate_bytes <= 0:
            return
        me = [sys.executable, os.path.abspath(__file__), "traffic"]
        for netns, _ in nodes[:2]:
            ns = ["ip", "netns", "exec", netns]
            self.procs.append(subprocess.Popen([*ns, *me, "recv", "--seconds", str(seconds)]))
        time.sleep(0.3)
        for (netns, _), (_, peer) in ((nodes[0], nodes[1]), (nodes[1], nodes[0])):
            ns = ["ip", "netns", "exec", netns]
            self.procs.append(subprocess.Popen(
                [*ns, *me, "send", peer, "--rate", str(rate_bytes), "--seconds", str(seconds)]))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# --------------------------------------------------------------------------- recording
def lab_env() -> dict[str, str]:
    """Intel MPI over the lab's TCP links, as site-configs/lab/config.py sets it."""
    from hpcval.lab.layout import NODE_IFACE
    from hpcval.lab.slurm import PMI2_LIBRARY

    prefix = Path(sys.prefix)
    env = dict(os.environ)
    env.update({
        "PATH": f"{prefix / 'bin'}:{env.get('PATH', '')}",
        "LD_LIBRARY_PATH": f"{prefix / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}",
        "FI_PROVIDER_PATH": str(prefix / "lib"),
        "I_MPI_PMI_LIBRARY": PMI2_LIBRARY,
        "I_MPI_FABRICS": "shm:ofi",
        "FI_PROVIDER": "tcp",
        "FI_TCP_IFACE": NODE_IFACE,
        "I_MPI_HYDRA_IFACE": NODE_IFACE,
        "I_MPI_WAIT_MODE": "1",
    })
    return env


def one_job(samples: int, iterations: int, lengths: Path,
            hosts: list[str] | None = None) -> list[str]:
    """One Slurm job on two nodes (``hosts`` when given); IMB PingPong ``samples`` times."""
    imb = shlex.join([str(Path(sys.prefix) / "bin" / "IMB-MPI1"), "PingPong",
                      "-msglen", str(lengths), "-iter", str(iterations), "-iter_policy", "off"])
    marker = "=== hpcval-sample ==="
    script = (f"for i in $(seq {samples}); do echo '{marker}'; "
              f"srun --mpi=pmi2 -N2 -n2 --ntasks-per-node=1 {imb} || exit 1; done")
    where = ["-w", ",".join(hosts)] if hosts else []
    proc = subprocess.run(
        ["salloc", "-p", "lab", "-N2", "-n2", "--ntasks-per-node=1", "-t", "5", *where,
         "bash", "-c", script],
        env=lab_env(), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"job failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return [part for part in proc.stdout.split(marker)[1:]]


def figures_of(outputs: list[str]) -> dict[str, list[float]]:
    from hpcval.parsers.imb import check_complete, parse_imb

    out: dict[str, list[float]] = {name: [] for name in FIGURES}
    for i, text in enumerate(outputs):
        table = check_complete(parse_imb(text, f"sample {i}"), "PingPong", SIZES,
                               processes=2, source=f"sample {i}")
        for name, (size, column, _, _) in FIGURES.items():
            out[name].append(table.value(size, column))
    return out


def schedule(clean: int, per_drop: int, rng: random.Random,
             drops: list[int] | None = None) -> list[int]:
    """Run order: blocks of (2 clean, one of each drop) in random order, then the rest."""
    drops = DROPS if drops is None else drops
    runs: list[int] = []
    blocks = min(clean // 2, per_drop)
    for _ in range(blocks):
        block = [0, 0, *drops]
        rng.shuffle(block)
        runs += block
    rest = [0] * (clean - 2 * blocks) + [d for d in drops for _ in range(per_drop - blocks)]
    rng.shuffle(rest)
    return runs + rest


def record(args: argparse.Namespace) -> int:
    from hpcval.lab import cluster
    from hpcval.lab.layout import default_state_dir
    from hpcval.lab.state import LabState

    state = LabState.load(default_state_dir() / "state.json")
    if state is None or not state.ready or state.nodes < 2:
        print("detection: no lab of 2 nodes is up (bench/detection.sh brings it up)",
              file=sys.stderr)
        return 3
    layout = cluster.layout_from_state(state, default_state_dir())
    if args.pool > len(layout.nodes) or args.pool < 2:
        print(f"detection: --pool {args.pool} needs a lab of that many nodes "
              f"({len(layout.nodes)} are up)", file=sys.stderr)
        return 3
    pool = layout.nodes[:args.pool]
    # With a pool of more than two nodes, every run gets a pair drawn at random (as a
    # scheduler would place it) and the last node of the pool has a slower link.
    slow = pool[-1].name if args.pool > 2 and args.slow_pct > 0 else None
    drops = [int(d) for d in args.drops.split(",")] if args.drops else DROPS
    rng = random.Random(args.seed)
    if args.counts:
        order = [int(d) for item in args.counts.split(",")
                 for d, n in [item.split(":")] for _ in range(int(n))]
        rng.shuffle(order)
    else:
        order = schedule(args.clean, args.per_drop, rng, drops)
    out = Path(args.out)
    data: dict = {
        "experiment": "IMB PingPong, 2 lab nodes, one rank each, Intel MPI over TCP",
        "machine": machine(),
        "base_rate_mbit": args.rate,
        "samples_per_run": args.samples,
        "imb_iterations": args.iterations,
        "background": {"kind": "paced UDP both ways between the two nodes",
                       "share_mean": args.load_mean, "share_sd": args.load_sd,
                       "share_max": args.load_max},
        "pool": {"nodes": [n.name for n in pool], "slow_node": slow,
                 "slow_pct": args.slow_pct if slow else 0,
                 "kind": "pair drawn at random per run" if args.pool > 2 else "fixed pair"},
        "figures": {n: {"size": s, "unit": u, "better": b}
                    for n, (s, _, u, b) in FIGURES.items()},
        "runs": [],
    }
    deadline = time.monotonic() + args.minutes * 60
    with tempfile.NamedTemporaryFile("w", suffix=".msglen", delete=False) as fh:
        fh.write("\n".join(str(s) for s in SIZES) + "\n")
        lengths = Path(fh.name)
    os.chmod(lengths, 0o644)
    try:
        # Calibration, no background: is the link, not the CPU, the limit at this rate?
        data["calibration"] = []
        for factor in (2.0, 1.0, 0.8) if args.calibrate else ():
            rate = args.rate * factor
            cluster.set_fabric(f"{rate:g}m")
            figs = figures_of(one_job(3, args.iterations, lengths))
            data["calibration"].append({"rate_mbit": rate, "figures": figs})
            print(f"calibration {rate:g} Mbit/s: bw_1MiB {sorted(figs['bw_1MiB'])[1]:.2f} MB/s "
                  f"(line rate {rate / 8:.2f} MB/s)", flush=True)
        for index, drop in enumerate(order):
            if time.monotonic() > deadline:
                print(f"detection: time is up after {index} runs", file=sys.stderr)
                break
            rate = args.rate * (100 - drop) / 100
            cluster.set_fabric(f"{rate:g}m")
            if slow is not None:
                cluster.set_fabric(f"{rate * (100 - args.slow_pct) / 100:g}m", node=slow)
            pair = sorted(rng.sample(pool, 2), key=lambda n: n.index) if args.pool > 2 \
                else pool[:2]
            nodes = [(n.netns, n.address) for n in pair]
            share = min(max(rng.gauss(args.load_mean, args.load_sd), 0.0), args.load_max)
            bg = Background(nodes, share * rate * 1e6 / 8, seconds=300)
            started = time.time()
            try:
                figs = figures_of(one_job(args.samples, args.iterations, lengths,
                                          [n.name for n in pair] if args.pool > 2 else None))
            finally:
                bg.stop()
            run = {"index": index, "drop_pct": drop, "rate_mbit": rate,
                   "background_share": round(share, 4), "started": started,
                   "nodes": [n.name for n in pair],
                   "seconds": round(time.time() - started, 1), "load1": os.getloadavg()[0],
                   "figures": figs}
            data["runs"].append(run)
            out.write_text(json.dumps(data, indent=1) + "\n")
            med = sorted(figs["bw_1MiB"])[len(figs["bw_1MiB"]) // 2]
            print(f"run {index:2d} drop {drop:2d}% share {share:.2f} "
                  f"{'+'.join(n.name for n in pair)} bw_1MiB {med:7.2f} "
                  f"({run['seconds']} s, load {run['load1']:.1f})", flush=True)
    finally:
        lengths.unlink(missing_ok=True)
        cluster.set_fabric(f"{args.rate:g}m")
    return 0


def machine() -> dict:
    info = {"host": socket.gethostname(), "cpus": os.cpu_count(), "kernel": os.uname().release}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record runs on the lab (root, lab up)")
    r.add_argument("out")
    r.add_argument("--rate", type=float, default=200.0, help="clean link rate, Mbit/s")
    r.add_argument("--clean", type=int, default=20)
    r.add_argument("--per-drop", type=int, default=10)
    r.add_argument("--samples", type=int, default=5)
    r.add_argument("--iterations", type=int, default=5)
    r.add_argument("--load-mean", type=float, default=0.12)
    r.add_argument("--load-sd", type=float, default=0.07)
    r.add_argument("--load-max", type=float, default=0.35)
    r.add_argument("--minutes", type=float, default=27.0, help="stop starting runs after this")
    r.add_argument("--seed", type=int, default=14)
    r.add_argument("--pool", type=int, default=2,
                   help="draw each run's pair at random from the first N lab nodes")
    r.add_argument("--slow-pct", type=float, default=0.0,
                   help="with --pool > 2: the pool's last node's link is this much slower")
    r.add_argument("--drops", help="degraded link rates, per cent, e.g. '10,20' "
                   "(default 3,5,10,20)")
    r.add_argument("--counts", help="runs per drop instead of --clean/--per-drop, e.g. "
                   "'0:4,10:2' (to complete an experiment cut short by --minutes)")
    r.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=True,
                   help="first measure the link without competing traffic at 2x, 1x, 0.8x")
    r.set_defaults(func=record)
    t = sub.add_parser("traffic", help="background traffic (inside a node namespace)")
    t.add_argument("mode", choices=["send", "recv"])
    t.add_argument("dest", nargs="?")
    t.add_argument("--rate", type=float, default=0.0, help="bytes per second")
    t.add_argument("--seconds", type=float, default=60.0)
    t.set_defaults(func=lambda a: traffic_send(a.dest, a.rate, a.seconds) if a.mode == "send"
                   else traffic_recv(a.seconds))
    args = p.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
