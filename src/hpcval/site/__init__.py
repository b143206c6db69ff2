"""A site: the one object every part of hpcval reaches a site's files through.

A site is a directory ``site-configs/<name>/`` holding its ReFrame
configuration, references, host expectations, tuning and judging settings; its
Spack environment is ``environments/<name>/`` (named by the site); its results
store is ``var/<name>/`` (or ``$HPCVAL_VAR/<name>``). Checks reach it through
their partition (:meth:`Site.of_test`), the command line and scheduled runs
through :meth:`Site.load`.

A site name is a name, never a path or a piece of shell: ReFrame expands
``$(...)`` and variables in configuration paths, and job scripts are shell.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcval.core.errors import InputError, SiteError
from hpcval.core.paths import CHECKS_DIR, ENVIRONMENTS_DIR, SITE_CONFIGS_DIR, project_root

if TYPE_CHECKING:
    from hpcval.core.judgingsettings import JudgingSettings
    from hpcval.site.references import ReferencesFile

#: What a site name may be: letters, digits, ``.``, ``_``, ``-``; 64 at most.
SITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: Characters a shell or ReFrame's path expansion would act on.
_UNSAFE_PATH = re.compile(r"[$`;&|<>(){}\\\"'\s*?!\[\]#~]")

#: The files of ``site-configs/<site>/``: every module reaches them through a
#: :class:`Site` property of the same name and loads them with its ``load_*``.
CONFIG_FILE = "config.py"
REFERENCES_FILE = "references.yaml"
HOST_EXPECTATIONS_FILE = "host-expectations.yaml"
TUNING_FILE = "mpi-tuning.yaml"
JUDGING_FILE = "judging.yaml"

#: Partition extra that names the site directory (set by ``partition_extras``).
SITE_DIR_EXTRA = "site_dir"
#: Partition extra with facts about the machine that every stored run keeps
#: beside its own (``{"fabric": ...}`` on the lab; recorded by each check as
#: ``site_provenance``, read by :func:`hpcval.run.verdicts.provenance`).
PROVENANCE_EXTRA = "provenance"


def validate_name(name: str, what: str = "--site") -> str:
    """``name`` if it is a valid site name, else an :class:`InputError`."""
    if not isinstance(name, str) or not SITE_NAME.fullmatch(name):
        raise InputError(
            f"{what} {name!r}: not a site name (letters, digits, '.', '_' and '-', starting "
            "with a letter or digit, at most 64; a name under site-configs/, not a path)")
    return name


def safe_path(path: str | Path, what: str) -> Path:
    """``path`` if no character in it would be expanded by a shell or by
    ReFrame's configuration (``$``, backticks, ``;``, spaces, ...)."""
    text = str(path)
    bad = _UNSAFE_PATH.search(text)
    if bad:
        raise InputError(f"{what} {text!r}: character {bad.group()!r} is not allowed in a path "
                         "hpcval hands to ReFrame or a job script; use a plain directory name")
    return Path(text)


def var_base(root: Path) -> Path:
    """Where results stores live: ``$HPCVAL_VAR`` or ``<root>/var``."""
    env = os.environ.get("HPCVAL_VAR")
    return safe_path(env, "HPCVAL_VAR") if env else root / "var"


@dataclass(frozen=True)
class Site:
    """One site: its files in the checkout and its results store."""

    name: str
    root: Path

    @classmethod
    def load(cls, name: str, root: Path | None = None, must_exist: bool = True) -> Site:
        """The site ``name`` of the checkout ``root``; the name is validated
        and, with ``must_exist``, its directory must hold a ``config.py``."""
        validate_name(name)
        site = cls(name, (root or project_root()).resolve())
        if must_exist:
            if not site.dir.is_dir():
                known = ", ".join(known_sites(site.root)) or "none"
                raise SiteError(f"{site.dir}: no such site (known sites: {known}); "
                                f"create one with `hpcval site new {name}`")
            if not site.config.is_file():
                raise SiteError(f"{site.config}: site has no ReFrame configuration")
        return site

    @classmethod
    def from_dir(cls, path: str | Path) -> Site:
        """The site whose directory is ``path`` (``site-configs/<name>``)."""
        path = Path(path).resolve()
        validate_name(path.name, "site directory")
        safe_path(path, "site directory")
        return cls(path.name, path.parent.parent)

    @classmethod
    def of_test(cls, test: Any) -> Site:
        """The site a ReFrame test runs on, from its partition's extras."""
        extras = test.current_partition.extras
        configured = extras.get(SITE_DIR_EXTRA)
        if configured:
            return cls.from_dir(configured)
        raise SiteError(
            f"partition {test.current_partition.fullname!r} has no extras.{SITE_DIR_EXTRA}: "
            "give every partition `extras: partition_extras(SITE_DIR)` in the site config "
            "(docs/adding-a-site.md)")

    @property
    def dir(self) -> Path:
        return self.root / SITE_CONFIGS_DIR / self.name

    @property
    def checks_dir(self) -> Path:
        """The check files ReFrame loads for this site (``reframe-checks/``)."""
        return self.root / CHECKS_DIR

    @property
    def config(self) -> Path:
        return self.dir / CONFIG_FILE

    @property
    def references(self) -> Path:
        return self.dir / REFERENCES_FILE

    @property
    def host_expectations(self) -> Path:
        return self.dir / HOST_EXPECTATIONS_FILE

    @property
    def tuning(self) -> Path:
        return self.dir / TUNING_FILE

    @property
    def judging(self) -> Path:
        return self.dir / JUDGING_FILE

    # -- loading the site's files (each validated; errors name file and key) --

    def reframe_config(self) -> Any:
        """``config.py`` as ReFrame itself loads it
        (:func:`reframe.core.config.load_config`, then its schema check), with
        ReFrame's own definitions after the site's; a :class:`SiteError`
        naming the file when it does not load. The file is read afresh each
        time, as in a new ReFrame process (ReFrame keeps the module it
        imported, so a second load would see the first one's values)."""
        import sys

        from reframe.core.config import load_config

        path = str(self.config)
        for name, module in list(sys.modules.items()):
            if getattr(module, "__file__", None) == path:
                del sys.modules[name]
        try:
            config = load_config(path)
            config.validate()
        except Exception as err:  # noqa: BLE001 - a broken site config: say which file
            fault = _disk_fault(err)
            if fault is not None:  # the config made var/ directories on a full or
                from hpcval.core.fileio import os_fault  # read-only disk: the disk's fault

                raise os_fault(fault.filename or self.var, fault,
                               f"reading the site config {self.config}") from None
            # one line: ReFrame's schema error (jsonschema's) runs over twenty,
            # the schema and the instance printed whole
            said = (str(err).strip().splitlines() or [type(err).__name__])[0]
            cause = err.__cause__
            if cause is not None:
                line = (str(getattr(cause, "message", "") or cause).strip().splitlines()
                        or [""])[0]
                at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                             for p in getattr(cause, "absolute_path", ()) or ())
                if at:
                    said = f"{said} (at {at.lstrip('.')})"
                elif line and line not in said:
                    said = f"{said}: {line}"
            raise SiteError(f"{self.config}: the site config fails to load: {said}") from None
        return config

    def load_references(self, known_checks: Any = None) -> ReferencesFile:
        """``references.yaml``, validated (:func:`hpcval.site.references.load_references`);
        with ``known_checks``, every entry must name one of them."""
        from hpcval.site.references import load_references

        return load_references(self.references, known_checks=known_checks)

    def check_references(self) -> ReferencesFile:
        """``references.yaml`` checked against the check classes under
        :attr:`checks_dir` as a run would check it
        (:func:`hpcval.site.references.check_references`)."""
        from hpcval.site.references import check_references

        return check_references(self.references, self.checks_dir)

    def load_host_expectations(self) -> dict[str, Any] | None:
        """``host-expectations.yaml``, validated; ``None`` where the site has none."""
        from hpcval.node.audit import load_expectations

        return load_expectations(self.host_expectations) \
            if self.host_expectations.exists() else None

    def load_judging(self) -> JudgingSettings:
        """``judging.yaml``, validated; the defaults where the site has none."""
        from hpcval.core.judgingsettings import JudgingSettings

        return JudgingSettings.load(self.judging)

    def load_tuning(self) -> dict[str, Any] | None:
        """``mpi-tuning.yaml`` (``{collective: {setting, ranks, nodes}}``),
        validated; ``None`` where the site has none."""
        from hpcval.node.tuning import load_tuning

        return load_tuning(self.tuning) if self.tuning.exists() else None

    @property
    def checked_files(self) -> tuple[Path, ...]:
        """The site files :meth:`check_files` checks, in its order."""
        return (self.references, self.host_expectations, self.judging, self.tuning)

    def check_files(self) -> dict[Path, Any]:
        """Every site file a run reads, checked as the run would read it,
        before any check runs: ``references.yaml`` against the check classes
        (:meth:`check_references`), then each of ``host-expectations.yaml``,
        ``judging.yaml`` and ``mpi-tuning.yaml`` the site has. The first wrong
        file raises (exit 2, one line naming the file, the key and what to
        do); else ``{file: what it loaded}``, for the files there are."""
        checked: dict[Path, Any] = {self.references: self.check_references()}
        for path, load in ((self.host_expectations, self.load_host_expectations),
                           (self.judging, self.load_judging),
                           (self.tuning, self.load_tuning)):
            if path.exists():
                checked[path] = load()
        return checked

    @property
    def spack_env(self) -> Path:
        """The site's Spack environment, ``environments/<name>/``."""
        return self.root / ENVIRONMENTS_DIR / self.name

    @property
    def var(self) -> Path:
        return var_base(self.root) / self.name

    @property
    def reports_dir(self) -> Path:
        return self.var / "reports"

    @property
    def html_dir(self) -> Path:
        return self.var / "html"

    @property
    def history_db(self) -> Path:
        return self.var / "history.sqlite"

    def report_path(self, run_id: str) -> Path:
        return self.reports_dir / f"run-report-{run_id}.json"

    def find_report(self, given: str | Path) -> Path:
        """A run report named on the command line: a path, else a file name in
        ``reports/`` (``run-report-<run id>.json``, with or without ``.json``)
        or a bare run id; what matches nothing is returned as given (its
        reader then names it)."""
        path = Path(given)
        if path.is_file() or path.name != str(given):
            return path
        for candidate in (self.reports_dir / path.name,
                          self.reports_dir / f"{path.name}.json",
                          self.report_path(path.name)):
            if candidate.is_file():
                return candidate
        return path

    def stage_dir(self, run_id: str) -> Path:
        """ReFrame's stage directory of one run (its jobs' working directories)."""
        return self.var / "stage" / run_id

    def output_dir(self, run_id: str) -> Path:
        """ReFrame's output directory of one run."""
        return self.var / "output" / run_id

    def run_log(self, run_id: str) -> Path:
        """ReFrame's console output of one run, as hpcval kept it."""
        return self.var / "logs" / f"{run_id}.out"

    @property
    def lock_file(self) -> Path:
        """The site lock: validations and store rebuilds of one site take turns."""
        return self.var / "validate.lock"

    @property
    def topology_dir(self) -> Path:
        """Where ReFrame keeps the processor topology it detected per partition."""
        return self.var / "topology"

    @property
    def perflogs_dir(self) -> Path:
        return self.var / "perflogs"

    @property
    def reframe_log(self) -> Path:
        return self.var / "reframe.log"


def _disk_fault(err: BaseException) -> OSError | None:
    """An OSError of a full, read-only or forbidden file system in *err*'s chain."""
    import errno

    seen: BaseException | None = err
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EROFS,
                                                        errno.EACCES, errno.EPERM):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def known_sites(root: Path) -> list[str]:
    base = root / SITE_CONFIGS_DIR
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir()
                  if p.is_dir() and SITE_NAME.fullmatch(p.name) and (p / CONFIG_FILE).is_file())
