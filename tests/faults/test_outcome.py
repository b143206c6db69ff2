"""The pieces that name a failure and keep config values literal, on their
own (no ReFrame run): launch records, scheduler and launcher messages,
impossible figures, shell quoting (checked by a real shell)."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest

from hpcval.rfm import outcome
from hpcval.rfm.launch import UnsafeConfigValue, check_env_name, is_plain_value, shell_value


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_launch_records(tmp_path: Path) -> None:
    status = _file(tmp_path, "s", "start\nend 0\nstart\nend 139\nskip\nstart\n")
    assert outcome.read_launches(status) == [
        outcome.Launch(1, 0), outcome.Launch(2, 139), outcome.Launch(3, None)]
    assert outcome.read_launches(tmp_path / "absent") is None


def test_crash_after_complete_table_named(tmp_path: Path) -> None:
    err = _file(tmp_path, "err", "fatal: rank 0 aborted\n")
    why = outcome.job_failure([outcome.Launch(1, 255)], exitcode=0, signal_number=None,
                              scheduler_state=None, stderr=err, program="IMB-MPI1")
    assert why == "IMB-MPI1 ended with exit code 255; stderr: fatal: rank 0 aborted"


def test_second_of_several_launches_named(tmp_path: Path) -> None:
    why = outcome.job_failure([outcome.Launch(1, 0), outcome.Launch(2, 137)], exitcode=0,
                              signal_number=None, scheduler_state=None,
                              stderr=tmp_path / "none", program="IMB-MPI1")
    assert why is not None
    assert "IMB-MPI1 (launch 2 of 2) ended with exit code 137 (128+9: killed by SIGKILL)" in why


def test_clean_job_is_not_a_failure(tmp_path: Path) -> None:
    assert outcome.job_failure([outcome.Launch(1, 0)], exitcode=0, signal_number=None,
                               scheduler_state="COMPLETED", stderr=tmp_path / "none",
                               program="x") is None


@pytest.mark.parametrize("state, words", [
    ("TIMEOUT", "time limit reached"), ("NODE_FAIL", "node failure"),
    ("PREEMPTED", "preempted"), ("OUT_OF_MEMORY", "out of memory"),
])
def test_slurm_states_named(tmp_path: Path, state: str, words: str) -> None:
    why = outcome.job_failure([outcome.Launch(1, None)], exitcode=None, signal_number=None,
                              scheduler_state=state, stderr=tmp_path / "none", program="x")
    assert why is not None and why.startswith(words) and f"({state})" in why


def test_time_limit_from_stderr_without_accounting(tmp_path: Path) -> None:
    err = _file(tmp_path, "err", "slurmstepd: error: *** JOB 12 ON lab-n1 CANCELLED AT "
                "2026-11-23T20:00:00 DUE TO TIME LIMIT ***\n")
    why = outcome.job_failure([outcome.Launch(1, None)], exitcode=None, signal_number=None,
                              scheduler_state=None, stderr=err, program="x")
    assert why is not None and why.startswith("time limit reached")


@pytest.mark.parametrize("text, said", [
    ("=   RANK 1 PID 20282 RUNNING AT vm\n=   KILLED BY SIGNAL: 9 (Killed)\n",
     "rank 1 on vm was killed by SIGKILL"),
    ("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 11 "
     "(Segmentation fault).", "rank 1 on vm was killed by SIGSEGV"),
    ("srun: error: lab-n2: task 1: Killed\n", "rank 1 on lab-n2: Killed"),
    ("srun: error: lab-n1: task 0: Exited with exit code 3\n",
     "rank 0 on lab-n1 exited with exit code 3"),
    ("srun: error: lab-n2: task 1: Exited with exit code 137\n",
     "rank 1 on lab-n2 exited with exit code 137 (128+9: killed by SIGKILL)"),
])
def test_rank_death_from_launcher_messages(tmp_path: Path, text: str, said: str) -> None:
    assert outcome.rank_death(_file(tmp_path, "out", text)) == said


@pytest.mark.parametrize("name, value, unit, words", [
    ("bw", float("inf"), "MB/s", "not finite"),
    ("lat", float("nan"), "us", "not finite"),
    ("lat", -0.1, "us", "negative"),
    ("bw", -3.0, "GB/s", "negative"),
    ("bw", 2e7, "MB/s", "above the ceiling"),
    ("bw", 20.0, "TB/s", "above the ceiling"),
    ("lat", "fast", "us", "not a number"),
])
def test_impossible_figures(name: str, value: object, unit: str, words: str) -> None:
    why = outcome.impossible_figure(name, value, unit)
    assert why is not None and words in why


@pytest.mark.parametrize("name, value, unit", [
    ("lat", 0.0, "us"), ("bw", 12000.0, "MB/s"), ("output_cost", -0.4, "s"),
    ("speed", -1.0, "model_s/s"),
])
def test_possible_figures(name: str, value: float, unit: str) -> None:
    assert outcome.impossible_figure(name, value, unit) is None


HOSTILE = ["$(touch INJ)", "a;touch INJ", "`touch INJ`", "two  words", "it's \"q\"",
           "a|b > INJ", "&& touch INJ", "\\", "*", "~", "", "$((1+1))", "${X:-$(touch INJ)}"]


@pytest.mark.parametrize("value", HOSTILE)
def test_shell_value_literal_in_a_real_shell(tmp_path: Path, value: str) -> None:
    script = f"export V={shell_value(value)}\nprintf '%s' \"$V\"\n"
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert out.stdout == value
    assert not (tmp_path / "INJ").exists()


@pytest.mark.parametrize("value", HOSTILE)
def test_shell_value_not_run_by_reframe(tmp_path: Path, value: str) -> None:
    """ReFrame runs ``$(...)`` and backquoted text in every ``env_vars`` value
    it loads, quoted or not; the quoted value must give it nothing to run."""
    from reframe.utility import osext

    quoted = shell_value(value.replace("INJ", str(tmp_path / "INJ")))
    with contextlib.chdir(tmp_path):
        osext.expandvars(quoted)
    assert not (tmp_path / "INJ").exists()


def test_shell_value_keeps_references(tmp_path: Path) -> None:
    script = f"HOME=/h\nexport V={shell_value('/opt/x y:$HOME:${HOME}/b')}\nprintf '%s' \"$V\""
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout == "/opt/x y:/h:/h/b"


def test_unsafe_names_and_values_rejected() -> None:
    with pytest.raises(UnsafeConfigValue, match="not a shell variable name"):
        check_env_name("X;touch INJ", "environment 'impi' env_vars")
    with pytest.raises(UnsafeConfigValue, match="newline"):
        shell_value("a\ntouch INJ")
    assert is_plain_value("/usr/lib:$LD_LIBRARY_PATH")
    assert not is_plain_value("$(touch INJ)")


def test_launch_wrapper_in_a_real_shell(tmp_path: Path) -> None:
    """The wrapper records each launch's status and skips launches after a
    failed one."""
    script = _file(tmp_path, outcome.LAUNCH_SCRIPT, outcome.LAUNCH_SCRIPT_TEXT)
    status = tmp_path / outcome.LAUNCH_STATUS
    codes = [subprocess.run(["sh", str(script), str(status), "sh", "-c", f"exit {c}"]).returncode
             for c in (0, 3, 0)]
    assert codes == [0, 3, 125]
    assert outcome.read_launches(status) == [outcome.Launch(1, 0), outcome.Launch(2, 3)]


def test_failed_nodes_from_scontrol(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`scontrol show node -o` as the lab printed it after lab-n2's slurmd was
    killed under a job: the failure names the node, first."""
    shown = ("NodeName=lab-n1 Arch=x86_64 CoresPerSocket=1 State=IDLE ThreadsPerCore=1\n"
             "NodeName=lab-n2 Arch=x86_64 CoresPerSocket=1 State=DOWN+NOT_RESPONDING "
             "ThreadsPerCore=1 Reason=Not responding [slurm@2026-11-23T20:46:31]\n")

    def scontrol(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 0, shown, "")

    monkeypatch.setattr(outcome.subprocess, "run", scontrol)
    failed = outcome.slurm_failed_nodes("lab-n[1-2]")
    assert failed == ["lab-n2 DOWN+NOT_RESPONDING (Not responding)"]
    why = outcome.job_failure([outcome.Launch(1, 0), outcome.Launch(2, 233)], exitcode=None,
                              signal_number=None, scheduler_state="FAILED",
                              stderr=tmp_path / "none", program="IMB-MPI1",
                              failed_nodes=failed)
    assert why is not None
    assert why.startswith("node failure: lab-n2 DOWN+NOT_RESPONDING (Not responding) under "
                          "the job; IMB-MPI1 (launch 2 of 2) ended with exit code 233")


_LAUNCHERS = Path(__file__).resolve().parents[1] / "data" / "launchers"


@pytest.mark.parametrize("name, cleanup, said", [
    # hydra's defaults: both ranks say SIGKILL; rank 0's block (the clean-up) first
    ("hydra_rank1_sigkill_impi2021.18.txt", 9,
     "rank 0 on vm and rank 1 on vm were killed by SIGKILL, the signal hydra ends the other "
     "ranks with: which one died first is not in the launcher's output"),
    # as hpcval launches Intel MPI (I_MPI_JOB_ABORT_SIGNAL=15): the cause is told apart
    ("hydra_rank1_sigkill_abort15_impi2021.18.txt", 15,
     "rank 1 on vm was killed by SIGKILL (hydra then ended rank 0 on vm with SIGTERM)"),
    # rank 1 a script that exited 137: hydra prints only its clean-up of rank 0
    ("hydra_wrapped_rank1_exit137_impi2021.18.txt", 9, "rank 0 on vm was killed by SIGKILL"),
])
def test_first_rank_that_died_is_blamed(name: str, cleanup: int, said: str) -> None:
    """Recorded hydra output of rank 1 killed with SIGKILL (tests/data/launchers):
    never rank 0, whose block hydra prints first, unless nothing else is known."""
    assert outcome.rank_death(_LAUNCHERS / name, cleanup=cleanup) == said


def test_hydra_cleanup_kill_is_not_blamed(tmp_path: Path) -> None:
    """The only block is hydra's clean-up (SIGTERM, as hpcval sets it): it
    says so instead of naming rank 0 the cause."""
    text = (_LAUNCHERS / "hydra_rank1_sigkill_abort15_impi2021.18.txt").read_text()
    only = text.split("===================================================================="
                      "===============\n=   BAD TERMINATION")[0] + (
        "===================================================================================\n"
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   RANK 0 PID 24802 RUNNING AT vm\n=   KILLED BY SIGNAL: 15 (Terminated)\n")
    said = outcome.rank_death(_file(tmp_path, "out", only), cleanup=15)
    assert said is not None and said.startswith("rank 0 on vm was ended by hydra (SIGTERM) "
                                                "after another rank ended first")


def test_full_disk_is_named_before_the_exit_code(tmp_path: Path) -> None:
    """A benchmark that found the disk full (recorded cfdio output,
    tests/data/cfdio/enospc_read.out) fails naming the full disk first, not
    only its exit code."""
    recorded = Path(__file__).resolve().parents[1] / "data" / "cfdio" / "enospc_read.out"
    err = _file(tmp_path, "err", recorded.read_text())
    why = outcome.job_failure([outcome.Launch(1, 1)], exitcode=1, signal_number=None,
                              scheduler_state=None, stderr=err, program="cfdio")
    assert why is not None
    assert why.startswith("disk full: cfdio: rank 0: write to /tmp/hpcval-tiny/"
                          "cfdio_read00000.dat failed: No space left on device"), why
    assert "cfdio ended with exit code 1" in why


def test_free_space_checked_just_before_writing(tmp_path: Path) -> None:
    """The line a cfdio output job runs before writing: a disk with less free
    space than the job writes plus the margin stops the job (exit 28) naming
    the directory and the full disk, which the failure then quotes first."""
    from hpcval.rfm.cfdio import free_space_check

    full = subprocess.run(["bash", "-c", free_space_check(str(tmp_path), 1 << 60)],
                          capture_output=True, text=True)
    assert full.returncode == 28
    assert f"hpcval: {tmp_path}: " in full.stderr and "No space left on device" in full.stderr
    err = _file(tmp_path, "err", full.stderr)
    why = outcome.job_failure(None, exitcode=28, signal_number=None, scheduler_state=None,
                              stderr=err, program="cfdio")
    assert why is not None and why.startswith(f"disk full: hpcval: {tmp_path}: ")
    room = subprocess.run(["bash", "-c", free_space_check(str(tmp_path), 4096)],
                          capture_output=True, text=True)
    assert room.returncode == 0 and room.stderr == ""
