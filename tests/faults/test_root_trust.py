"""Running as root with loose permissions: hpcval refuses (exit 3, one line
naming the path, its owner and its mode) to execute or trust what someone
other than root can write (hpcval.core.trust; docs/scheduling.md, "Running
as root"): the site's configuration, references and expectations, the
checks, the results store and the gate's stored vettings and programs, the
virtual environment, the working directory.

Ownership cases use a real unprivileged user (created here with `useradd` when
absent) and `nobody`; every case needs root and is skipped without it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ROOT, TRACEBACK, Result, make_checkout, run
from .test_gate_input import no_slurm, vettings  # noqa: F401 - no_slurm: autouse

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the trust checks apply to root "
                                "alone (run the corpus as root to test them)")

#: The unprivileged user of the ownership cases.
USER = "hpcval-untrusted"


@pytest.fixture(scope="module")
def user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", USER], check=True, capture_output=True)
        return pwd.getpwnam(USER)


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A checkout of the local and lab sites, with a results store holding the
    lab's recorded vettings (root's, mode 755/644: trusted as it is)."""
    root = make_checkout(tmp_path)
    shutil.copytree(ROOT / "site-configs" / "lab", root / "site-configs" / "lab")
    for r in vettings():
        d = root / "var" / "lab" / "vet" / r["id"]
        d.mkdir(parents=True)
        (d / "vet.json").write_text(json.dumps(r))
    return root


def refused(res: Result, path: Path | str, *words: str) -> str:
    """Exit 3, one line naming ``path`` and ``words``, no traceback."""
    assert res.returncode == 3, res.output
    assert TRACEBACK not in res.output, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    for w in (f"{path} ", "running as root, refusing", *words):
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    return lines[0]


def history(root: Path, **env: str) -> Result:
    return run(root, "history", "--site", "local", env=env or None)


def health(root: Path) -> Result:
    return run(root, "health", "--site", "lab", "--node", "lab-n2", timeout=120)


def not_refused(res: Result) -> None:
    """The command went on to its own business (here: no results store yet)."""
    assert "running as root, refusing" not in res.output, res.output
    assert res.returncode in (2, 3) and "no results store yet" in res.output, res.output


# ---- the site's configuration -----------------------------------------------------------

def test_a_world_writable_site_config_is_refused(checkout: Path) -> None:
    config = checkout / "site-configs" / "local" / "config.py"
    config.chmod(0o646)
    refused(history(checkout), config, "is world-writable", "owner root", "0646")


def test_group_writable_references_are_refused(checkout: Path) -> None:
    refs = checkout / "site-configs" / "local" / "references.yaml"
    refs.chmod(0o664)
    refused(history(checkout), refs, "is group-writable", "0664")


def test_a_site_directory_owned_by_another_user_is_refused(
        checkout: Path, user: pwd.struct_passwd) -> None:
    site = checkout / "site-configs" / "local"
    os.chown(site, user.pw_uid, user.pw_gid)
    refused(history(checkout), site, "is owned by someone else", f"owner {USER}")


def test_host_expectations_owned_by_nobody_are_refused(checkout: Path) -> None:
    exp = checkout / "site-configs" / "local" / "host-expectations.yaml"
    os.chown(exp, 65534, 65534)
    refused(history(checkout), exp, "owner nobody")


def test_references_linked_to_another_users_file_are_refused(
        checkout: Path, tmp_path: Path, user: pwd.struct_passwd) -> None:
    """The link is root's, in a directory only root can write; its target is not."""
    refs = checkout / "site-configs" / "local" / "references.yaml"
    target = tmp_path / "theirs.yaml"
    shutil.copy(refs, target)
    os.chown(target, user.pw_uid, user.pw_gid)
    refs.unlink()
    refs.symlink_to(target)
    refused(history(checkout), target, f"owner {USER}")


def test_a_world_writable_check_file_is_refused(checkout: Path) -> None:
    checks = checkout / "reframe-checks"
    checks.unlink()
    shutil.copytree(ROOT / "reframe-checks", checks,
                    ignore=shutil.ignore_patterns("__pycache__"))
    check = next(checks.rglob("*.py"))
    check.chmod(0o666)
    refused(history(checkout), check, "group- and world-writable")


# ---- the results store and the gate's inputs --------------------------------------------

def test_a_world_writable_results_store_is_refused(checkout: Path) -> None:
    store = checkout / "var" / "local"
    store.mkdir(parents=True)
    store.chmod(0o777)
    refused(history(checkout), store, "group- and world-writable")


def test_a_sticky_world_writable_results_store_is_refused(checkout: Path) -> None:
    """Sticky (/tmp-like) directories are accepted *above* what is trusted, never
    as the store itself: anyone could add entries there."""
    store = checkout / "var" / "local"
    store.mkdir(parents=True)
    store.chmod(0o1777)
    refused(history(checkout), store, "1777")


def test_a_group_writable_history_database_is_refused(checkout: Path) -> None:
    db = checkout / "var" / "local" / "history.sqlite"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"")
    db.chmod(0o664)
    refused(history(checkout), db, "group-writable")


def test_a_results_store_linked_to_a_directory_of_nobody_is_refused(
        checkout: Path, tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    link = tmp_path / "var-link"
    link.symlink_to(theirs)
    refused(history(checkout, HPCVAL_VAR=str(link)), theirs, "owner nobody")


def test_a_world_writable_vet_directory_is_refused_by_the_gate(checkout: Path) -> None:
    """Whoever can write var/<site>/vet/ could make the gate drain nodes."""
    vet = checkout / "var" / "lab" / "vet"
    vet.chmod(0o777)
    res = health(checkout)
    refused(res, vet, "group- and world-writable")


def test_a_stored_vetting_owned_by_another_user_is_refused_by_the_gate(
        checkout: Path, user: pwd.struct_passwd) -> None:
    [path] = sorted((checkout / "var" / "lab" / "vet").glob("*/vet.json"))[-1:]
    os.chown(path, user.pw_uid, user.pw_gid)
    line = refused(health(checkout), path, f"owner {USER}", "a stored vetting")
    assert line.startswith("health lab-n2: not judged: ")


def test_a_group_writable_cfdio_of_the_gate_is_refused(checkout: Path) -> None:
    """The gate runs var/<site>/vet/bin/cfdio as root."""
    cfdio = checkout / "var" / "lab" / "vet" / "bin" / "cfdio"
    cfdio.parent.mkdir()
    cfdio.write_text("#!/bin/sh\n")
    cfdio.chmod(0o775)
    refused(health(checkout), cfdio, "group-writable", "a program the gate runs")


# ---- the code: the virtual environment, the working directory ---------------------------

@pytest.fixture()
def venv(tmp_path: Path) -> Path:
    """A virtual environment of its own (no pip) that imports hpcval and its
    dependencies from this checkout's."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    [site] = env.glob("lib/python*/site-packages")
    deps = Path(sys.executable).parent.parent
    [deps_site] = deps.glob("lib/python*/site-packages")
    (site / "hpcval-test.pth").write_text(f"{ROOT / 'src'}\n{deps_site}\n")
    return env


def test_a_group_writable_venv_bin_is_refused(checkout: Path, venv: Path) -> None:
    (venv / "bin").chmod(0o775)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "hpcval.cli", "history",
                           "--site", "local"], cwd=checkout, capture_output=True, text=True,
                          env={**os.environ, "HPCVAL_ROOT": str(checkout)}, timeout=120)
    refused(Result(proc.returncode, proc.stdout, proc.stderr), venv / "bin",
            "the code it runs", "group-writable")


def test_a_world_writable_working_directory_is_refused(checkout: Path,
                                                       tmp_path: Path) -> None:
    """hpcval starts `python -m hpcval.vet.probe`, which imports from its working
    directory first."""
    cwd = tmp_path / "shared"
    cwd.mkdir()
    cwd.chmod(0o777)
    proc = subprocess.run([str(Path(sys.executable).parent / "hpcval"), "history", "--site",
                           "local"], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HPCVAL_ROOT": str(checkout)})
    refused(Result(proc.returncode, proc.stdout, proc.stderr), cwd, "the working directory")


def test_tmp_as_working_directory_is_refused(checkout: Path) -> None:
    """/tmp is accepted above a path (sticky, root's), never as the directory
    `python -m` children import from: anyone can create /tmp/hpcval/ there."""
    proc = subprocess.run([str(Path(sys.executable).parent / "hpcval"), "history", "--site",
                           "local"], cwd="/tmp", capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HPCVAL_ROOT": str(checkout)})
    refused(Result(proc.returncode, proc.stdout, proc.stderr), "/tmp", "1777",
            "the working directory")


# ---- what is accepted -------------------------------------------------------------------

@pytest.fixture()
def sticky_parent() -> Iterator[Path]:
    """A /tmp-like directory (root's, mode 1777) right under /tmp."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="hpcval-sticky-"))
    d.chmod(0o1777)
    yield d
    shutil.rmtree(d)


def test_a_root_owned_checkout_under_a_sticky_directory_is_accepted(
        sticky_parent: Path) -> None:
    root = make_checkout(sticky_parent)
    not_refused(history(root))


def test_files_of_the_user_who_ran_sudo_are_accepted(
        checkout: Path, user: pwd.struct_passwd) -> None:
    site = checkout / "site-configs" / "local"
    for p in (site, *site.iterdir()):
        os.chown(p, user.pw_uid, user.pw_gid)
    refused(history(checkout), site, f"owner {USER}")
    not_refused(history(checkout, SUDO_UID=str(user.pw_uid)))


def test_what_hpcval_creates_as_root_is_not_group_writable(checkout: Path) -> None:
    """A permissive umask (slurmd or cron may hand one down) does not make what
    hpcval creates as root writable by others (the next run would refuse it, and
    rightly): here a new site's files."""
    proc = subprocess.run(["sh", "-c", f"umask 000; exec {Path(sys.executable).parent}/hpcval "
                           "site new trusty"], cwd=checkout, capture_output=True,
                          text=True, env={**os.environ, "HPCVAL_ROOT": str(checkout)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    made = [checkout / "site-configs" / "trusty",
            *(checkout / "site-configs" / "trusty").rglob("*")]
    assert len(made) > 2
    loose = [f"{p} {p.stat().st_mode & 0o7777:04o}" for p in made if p.stat().st_mode & 0o022]
    assert not loose
    not_refused(run(checkout, "history", "--site", "trusty"))


needs_mpi = pytest.mark.skipif(
    not (shutil.which("mpiexec", path=str(Path(sys.executable).parent))
         and shutil.which("IMB-MPI1", path=str(Path(sys.executable).parent))),
    reason="Intel MPI and IMB-MPI1 in the environment (make setup)")


def judged_or_busy(res: Result) -> bool:
    """OK (exit 0), or, on a machine too loaded to judge, the gate's own "not
    judged: the node's CPUs were busy" (exit 3: its storm protection)."""
    return (res.returncode == 0 and res.stdout.startswith("health lab-n2: OK in ")) or (
        res.returncode == 3 and "the node's CPUs were busy" in res.stdout)


@needs_mpi
def test_the_gate_judges_from_a_read_only_shared_store(tmp_path: Path) -> None:
    """docs/vet.md, "Installing the gate for root": var/ shared read-only (here a
    read-only bind mount), the record in a directory of the node. The stored
    partition is scaled 100x below anything this machine measures, so the verdict
    is OK whatever the load (or, above a load the gate will not judge at, its
    "CPUs were busy": the store is read all the same); the first run, on the
    writable store, builds cfdio there as a vetting would."""
    root = make_checkout(tmp_path)
    shutil.copytree(ROOT / "site-configs" / "lab", root / "site-configs" / "lab")
    served = tmp_path / "served"
    for r in vettings(0.01):
        d = served / "lab" / "vet" / r["id"]
        d.mkdir(parents=True)
        (d / "vet.json").write_text(json.dumps(r))
    gate = ["health", "--site", "lab", "--node", "lab-n2", "--samples", "3"]
    first = run(root, *gate, env={"HPCVAL_VAR": str(served)}, timeout=300)
    assert judged_or_busy(first), first.output
    assert (served / "lab" / "vet" / "bin" / "cfdio").exists()
    mnt = tmp_path / "var"
    mnt.mkdir()
    if subprocess.run(["mount", "--bind", str(served), str(mnt)]).returncode != 0:
        pytest.skip("no bind mounts here (a container without CAP_SYS_ADMIN)")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], check=True)
        before = sorted(p.name for p in served.rglob("*"))
        res = run(root, *gate, "--record-dir", str(tmp_path / "records"),
                  env={"HPCVAL_VAR": str(mnt)}, timeout=300)
        assert judged_or_busy(res), res.output
        [line] = res.stdout.splitlines()
        assert sorted(p.name for p in served.rglob("*")) == before
        [record] = (tmp_path / "records").glob("*-lab-n2.json")
        assert json.loads(record.read_text())["line"] == line
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
