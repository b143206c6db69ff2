"""A real Prometheus, node_exporter (textfile collector) and Pushgateway on
loopback, for the end-to-end tests of ``hpcval export`` and the shipped rules
(monitoring/hpcval-rules.yml): Debian's ``prometheus``,
``prometheus-node-exporter`` and ``prometheus-pushgateway`` (`make
system-deps`). Ports are chosen free, the scrape and rule evaluation interval
is one second, and every process is stopped when the block ends."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "monitoring" / "grafana" / "hpcval-dashboard.json"
#: the programs, by their Debian names
PROGRAMS = ("prometheus", "prometheus-node-exporter", "prometheus-pushgateway")


def missing() -> list[str]:
    """The programs of :data:`PROGRAMS` not on the PATH."""
    return [p for p in PROGRAMS if shutil.which(p) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(url: str, data: bytes | None = None, method: str | None = None,
         timeout: float = 10) -> bytes:
    req = urllib.request.Request(url, data=data, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return bytes(resp.read())


@dataclass
class Stack:
    workdir: Path
    textfile_dir: Path
    prometheus: str
    node_exporter: str
    pushgateway: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def query(self, promql: str) -> list[dict[str, Any]]:
        """``/api/v1/query``: the instant vector's samples (``metric``, ``value``)."""
        body = http(f"{self.prometheus}/api/v1/query?"
                    + urllib.parse.urlencode({"query": promql}))
        answer = json.loads(body)
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def alerts(self) -> list[dict[str, Any]]:
        answer = json.loads(http(f"{self.prometheus}/api/v1/alerts"))
        return list(answer["data"]["alerts"])

    def push(self, text: str, job: str, **grouping: str) -> None:
        """PUT the text to the Pushgateway under ``job`` and the grouping labels
        (replacing what that group held, as a nightly push does)."""
        path = "/".join(f"{k}/{urllib.parse.quote(v, safe='')}" for k, v in grouping.items())
        http(f"{self.pushgateway}/metrics/job/{job}" + (f"/{path}" if path else ""),
             data=text.encode(), method="PUT")

    def wait_for(self, what: str, probe: Any, timeout: float = 30.0,
                 every: float = 0.5) -> Any:
        """Call ``probe()`` until it returns something true; fail naming ``what``."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = probe()
            if last:
                return last
            time.sleep(every)
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}"
                         for p in sorted(self.workdir.glob("*.log")))
        raise AssertionError(f"{what}: not seen within {timeout:.0f} s (last: {last!r})\n{logs}")


def _config(stack_ports: dict[str, int], rules: list[Path]) -> str:
    return json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                   "scrape_timeout": "1s"},
        "rule_files": [str(r) for r in rules],
        "scrape_configs": [
            # Prometheus itself: its rule evaluations (prometheus_rule_group_*)
            {"job_name": "prometheus", "static_configs": [
                {"targets": [f"127.0.0.1:{stack_ports['prom']}"]}]},
            {"job_name": "node", "static_configs": [
                {"targets": [f"127.0.0.1:{stack_ports['node']}"]}]},
            # the pushed series keep their own job and grouping labels
            {"job_name": "pushgateway", "honor_labels": True, "static_configs": [
                {"targets": [f"127.0.0.1:{stack_ports['push']}"]}]},
        ]}, indent=1)


@contextmanager
def running(workdir: Path, rules: list[Path]) -> Iterator[Stack]:
    """node_exporter reading ``workdir/textfile/*.prom``, a Pushgateway, and a
    Prometheus scraping both every second and evaluating ``rules`` every second."""
    textfile = workdir / "textfile"
    textfile.mkdir(parents=True)
    ports = {"node": free_port(), "push": free_port(), "prom": free_port()}
    config = workdir / "prometheus.yml"
    config.write_text(_config(ports, rules))
    stack = Stack(workdir, textfile, f"http://127.0.0.1:{ports['prom']}",
                  f"http://127.0.0.1:{ports['node']}", f"http://127.0.0.1:{ports['push']}")
    commands = {
        "node-exporter": ["prometheus-node-exporter",
                          f"--web.listen-address=127.0.0.1:{ports['node']}",
                          "--collector.disable-defaults", "--collector.textfile",
                          f"--collector.textfile.directory={textfile}"],
        # its own persistence file: Debian's default, /var/lib/prometheus/pushgateway.data,
        # would hand this Pushgateway whatever was pushed on this machine before
        "pushgateway": ["prometheus-pushgateway",
                        f"--web.listen-address=127.0.0.1:{ports['push']}",
                        f"--persistence.file={workdir / 'pushgateway.data'}"],
        "prometheus": ["prometheus", f"--config.file={config}",
                       f"--storage.tsdb.path={workdir / 'tsdb'}",
                       f"--web.listen-address=127.0.0.1:{ports['prom']}"],
    }
    try:
        for name, cmd in commands.items():
            log = (workdir / f"{name}.log").open("wb")
            stack.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                cwd=workdir))
        for url in (f"{stack.node_exporter}/metrics", f"{stack.pushgateway}/-/ready",
                    f"{stack.prometheus}/-/ready"):
            stack.wait_for(f"{url} answering", lambda u=url: _answers(u, stack))
        yield stack
    finally:
        for proc in stack.procs:
            proc.terminate()
        for proc in stack.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _answers(url: str, stack: Stack) -> bool:
    for proc in stack.procs:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[0]} exited with {proc.returncode}: "
                                 + "".join(p.read_text()[-1500:]
                                           for p in stack.workdir.glob("*.log")))
    try:
        http(url, timeout=2)
    except OSError:
        return False
    return True


def dashboard_queries(variables: dict[str, str],
                      dashboard: Path = DASHBOARD) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target of the Grafana dashboard and every
    template variable's selector (``label_values(SELECTOR, label)``), with
    Grafana's variables (``$site``, ...) filled in from ``variables``."""
    dash = json.loads(dashboard.read_text())
    out = []
    panels = [q for p in dash["panels"] for q in (p, *p.get("panels", []))]
    for p in panels:
        for t in p.get("targets", []):
            out.append((f"panel {p['id']} {p['title']!r} {t['refId']}", str(t["expr"])))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.*), *(\w+)\)", v["query"]["query"])
            assert m, v
            out.append((f"variable {v['name']}", m[1]))
    filled = []
    for where, expr in out:
        for name, value in variables.items():
            expr = expr.replace(name, value)
        assert "$" not in expr, (where, expr)
        filled.append((where, expr))
    return filled
