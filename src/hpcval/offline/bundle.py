"""``hpcval offline bundle``: one folder a machine without network installs hpcval and
builds an environment's Spack stack from (docs/spack.md, section 1).

The folder holds

* ``spack-<commit>.tar.gz`` and ``spack-packages-<commit>.tar.gz``: ``git archive | gzip -n``
  of clones of Spack and its builtin packages at the commits of
  ``environments/SPACK_VERSION``;
* ``wheels/``: hpcval's whole Python stack and clingo for the target platform and Python
  (:mod:`hpcval.offline.wheels`);
* ``debs/``: the Debian packages of ``make system-deps`` with their dependencies and a
  ``Packages`` index (:mod:`hpcval.offline.debs`);
* ``mirror/``: the source mirror of the environment made by ``hpcval spack mirror``'s
  recipes (STREAM at a pinned commit), the published archives (OSU, HPCG) where this
  machine can fetch them, and ``mirror/SHA256SUMS``, the sha256 of every archive;
* ``BUNDLE.json``: what was asked for, what was made, what is missing and why;
* ``SHA256SUMS``: the sha256 of every file above (``sha256sum -c`` checks it).

Each part is made on its own: one that cannot be made is named in one line and the others
are still written (exit 3); nothing already in the folder is removed.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpcval.core.errors import EnvironmentFault, HpcvalError, InputError
from hpcval.core.paths import project_root
from hpcval.offline import debs, wheels
from hpcval.spack import mirror as spackmirror

#: The file that marks a folder as a bundle (and says what it holds).
BUNDLE_FILE = "BUNDLE.json"
SUMS = "SHA256SUMS"
#: How long one published archive may take to fetch before it is named as not fetched.
FETCH_TIMEOUT_S = 20.0


@dataclass
class BundleResult:
    """What :func:`make_bundle` made (one line each) and what it could not."""

    made: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    optional_missing: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def spack_pins(root: Path) -> tuple[str, str]:
    """(Spack commit, spack-packages commit) of ``environments/SPACK_VERSION``."""
    text = (root / "environments" / "SPACK_VERSION").read_text()
    spack = re.search(r"^spack: \S+ ([0-9a-f]{40})", text, re.M)
    builtin = re.search(r"^builtin: \S+ ([0-9a-f]{40})", text, re.M)
    if not spack or not builtin:
        raise InputError(f"{root}/environments/SPACK_VERSION: no `spack: <version> <commit>` "
                         "or `builtin: <repo> <commit>` line")
    return spack.group(1), builtin.group(1)


def check_out_dir(out: Path) -> None:
    """A new or empty folder, or one a bundle made (it has :data:`BUNDLE_FILE`)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: a file, not a folder: give a new or empty folder")
    if out.is_dir() and any(out.iterdir()) and not (out / BUNDLE_FILE).is_file():
        raise InputError(f"--out {out}: not empty and not a bundle (no {BUNDLE_FILE}): give a "
                         "new or empty folder; nothing was changed")


def git_tarball(clone: Path, commit: str, prefix: str, into: Path) -> None:
    """``git archive --prefix=<prefix>/ <commit> | gzip -n`` of *clone* into *into*."""
    if not clone.is_dir():
        raise InputError(f"{clone}: no such clone: give a git clone of {prefix} holding "
                         f"{commit}")
    spackmirror.git_archive(clone, commit, f"{prefix}/", into)


def published_archives(sources: list[spackmirror.Source], mirror: Path,
                       result: BundleResult) -> dict[str, str]:
    """Fetch every source no recipe reproduces (OSU, HPCG and its patch) into *mirror*,
    keeping only what has its package's sha256; returns the manifest lines of those kept."""
    sums: dict[str, str] = {}
    for src in sources:
        if src.package in spackmirror.RECIPES and src.kind == "archive":
            continue
        target = mirror / src.mirror_path()
        if not src.sha256 or "://" not in src.url:
            result.optional_missing.append(f"{src.label}: no URL with a checksum to fetch")
            continue
        if target.is_file() and spackmirror.sha256_of(target) == src.sha256:
            sums[src.mirror_path()] = src.sha256
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f".part-{target.name}")
        try:
            with urllib.request.urlopen(src.url, timeout=FETCH_TIMEOUT_S) as answer, \
                    open(part, "wb") as out:
                out.write(answer.read())
        except (OSError, ValueError) as err:
            part.unlink(missing_ok=True)
            result.optional_missing.append(f"{src.label}: not fetched from {src.url} ({err}): "
                                           f"put it at mirror/{src.mirror_path()}")
            continue
        problem = spackmirror.archive_problem(part, src.sha256)
        if problem:
            part.unlink(missing_ok=True)
            result.optional_missing.append(f"{src.label}: {src.url} is not the archive Spack "
                                           f"checks ({problem.split(': ', 1)[1]})")
            continue
        os.replace(part, target)
        sums[src.mirror_path()] = src.sha256
        result.made.append(f"published: {src.label}: mirror/{src.mirror_path()}")
    return sums


def pinned_sources(env_dir: Path, builtin: Path) -> list[spackmirror.Source]:
    """The sources of an environment without a lock (``local``, ``lab``: locked on the
    target): every package ``pins.yaml`` pins that the environment's manifest names, at
    its pinned version, plus Spack's compiler-wrapper at its newest version, with every
    URL patch of those packages."""
    import yaml

    root = env_dir.parent
    pins = yaml.safe_load((root / "common" / "pins.yaml").read_text()) or {}
    manifest = (env_dir / "spack.yaml").read_text()
    wanted = {name: str(rule.get("require", "")).lstrip("@").split()[0]
              for name, rule in (pins.get("packages") or {}).items()
              if isinstance(rule, dict) and re.search(rf"\b{re.escape(name)}\b", manifest)}
    wrapper = spackmirror.package_facts(builtin / "packages" / "compiler_wrapper" / "package.py")
    wanted["compiler-wrapper"] = max(wrapper.versions, key=_version_key)
    found = []
    for name, version in sorted(wanted.items()):
        package_py = builtin / "packages" / name.replace("-", "_") / "package.py"
        facts = spackmirror.package_facts(package_py)
        kwargs = facts.versions.get(version, {})
        url = facts.git if not kwargs.get("sha256") and facts.git else \
            spackmirror.version_url(facts, version)
        found.append(spackmirror.Source(name, version, kwargs.get("sha256") or None, url,
                                        package_py))
        found += [spackmirror.Source(name, version, digest, patch_url, package_py, "patch")
                  for digest, patch_url in sorted(facts.patches.items())
                  if any(_may_apply(when, version) for when in facts.patch_when[digest])]
    return found


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _may_apply(when: str, version: str) -> bool:
    """Whether a patch's ``when=`` can hold for *version*: False only when its version
    range (``@A``, ``@A:``, ``@:B``, ``@A:B``) excludes it; compilers and variants are
    not known before the lock, so they never exclude."""
    found = re.search(r"(?:^|\s)@([\w.]*)(:?)([\w.]*)", when)
    if not found:
        return True
    low, colon, high = found.groups()
    have = _version_key(version)
    if not colon:
        return have[:len(_version_key(low))] == _version_key(low)
    below = not high or have[:len(_version_key(high))] <= _version_key(high)
    return (not low or have >= _version_key(low)) and below


def write_sums(out: Path) -> Path:
    """:data:`SUMS` of every file of the bundle but itself, sorted, ``sha256sum`` format."""
    lines = []
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p != out / SUMS):
        lines.append(f"{spackmirror.sha256_of(path)}  {path.relative_to(out).as_posix()}\n")
    (out / SUMS).write_text("".join(lines))
    return out / SUMS


def make_bundle(env_dir: Path, platform: str, python_version: str, out: Path, *,
                spack_clone: Path | None, packages_clone: Path | None, sources: Path | None,
                release: str | None, with_debs: bool = True) -> BundleResult:
    """Make the bundle (module docstring) in *out*; returns what was made and missing."""
    root = project_root()
    wheels.platforms(platform)  # a bad tag or version is exit 2 before anything is made
    wheels.version_tuple(python_version)
    check_out_dir(out)
    here = debs.host_release()
    if with_debs and release and release != here:
        mine = here or "not a Debian release"
        raise InputError(f"--release {release}: this machine's apt sources are {mine}'s: make "
                         f"the bundle on (or in a container of) {release}, or give --no-debs")
    spack_commit, packages_commit = spack_pins(root)
    out.mkdir(parents=True, exist_ok=True)
    result = BundleResult()
    asked = {"environment": env_dir.name, "platform": platform,
             "python_version": python_version, "release": here if with_debs else None,
             "spack": spack_commit, "spack_packages": packages_commit,
             "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def part(name: str, job: Callable[[], None]) -> None:
        start = time.monotonic()
        try:
            job()
        except HpcvalError as err:
            result.missing.append(f"{name}: {err}")
        result.seconds[name] = round(time.monotonic() - start, 1)

    def spack_tarball(clone: Path | None, commit: str, prefix: str) -> None:
        if clone is None:
            raise EnvironmentFault(f"no clone of {prefix} given (--{prefix} CLONE, holding "
                                   f"{commit})")
        into = out / f"{prefix}-{commit}.tar.gz"
        if not into.is_file():
            git_tarball(clone, commit, prefix, into)
        result.made.append(f"{into.name}")

    def python_wheels() -> None:
        reqs = wheels.requirements(root / "pyproject.toml")
        names = wheels.download(reqs, out / "wheels", platform, python_version)
        foreign = wheels.foreign_wheels(out / "wheels", platform, python_version)
        if foreign:
            raise EnvironmentFault(f"wheels/ holds {len(foreign)} wheels the target cannot "
                                   f"install: {foreign[0]}")
        result.made.append(f"wheels/: {len(names)} wheels for Python {python_version} on "
                           f"{platform}")

    def system_debs() -> None:
        arch = debs.deb_arch(platform)
        wanted = debs.closure(debs.system_packages(root / "Makefile"), arch)
        files = debs.download(wanted, out / "debs", arch)
        debs.write_index(out / "debs")
        result.made.append(f"debs/: {len(files)} Debian packages ({here}, {arch}) and their "
                           "Packages index")

    def source_mirror() -> None:
        tarball = out / f"spack-packages-{packages_commit}.tar.gz"
        if not tarball.is_file():
            raise EnvironmentFault(f"no {tarball.name} (above): the packages' sha256 are read "
                                   "from it")
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(tarball) as tar:
                members = [m for m in tar.getmembers()
                           if "/repos/spack_repo/builtin/packages/" in m.name
                           and m.name.endswith("/package.py")]
                # package.py files of a tarball made here; "data" refuses links out of tmp
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(tmp, members=members, **safe)
            builtin = Path(tmp) / "spack-packages" / "repos" / "spack_repo" / "builtin"
            srcs = (spackmirror.environment_sources(env_dir, builtin, root)
                    if (env_dir / "spack.lock").is_file() else pinned_sources(env_dir, builtin))
            clones = sources or Path(os.environ.get(spackmirror.SOURCES_ENV, "sources"))
            made = spackmirror.make_mirror(srcs, out / "mirror", clones)
            sums = {**made.sums, **published_archives(srcs, out / "mirror", result)}
            spackmirror.write_manifest(out / "mirror", sums)
        result.made.append(f"mirror/: {len(sums)} archives, each in mirror/"
                           f"{spackmirror.MANIFEST} with its sha256")
        problems = made.wrong + made.missing_clones
        if problems:
            raise EnvironmentFault(f"{len(problems)} sources not made: {problems[0]}")

    part("spack", lambda: spack_tarball(spack_clone, spack_commit, "spack"))
    part("spack-packages", lambda: spack_tarball(packages_clone, packages_commit,
                                                 "spack-packages"))
    part("wheels", python_wheels)
    if with_debs:
        part("debs", system_debs)
    part("mirror", source_mirror)
    asked["missing"] = result.missing
    asked["optional_missing"] = result.optional_missing
    asked["seconds"] = result.seconds
    (out / BUNDLE_FILE).write_text(json.dumps(asked, indent=1) + "\n")
    write_sums(out)
    return result


def check_sums(folder: Path) -> list[str]:
    """Every line of the bundle's :data:`SUMS` checked: one line per missing or changed
    file (with both sums)."""
    sums = spackmirror.read_manifest(folder) if (folder / SUMS).is_file() else None
    if sums is None:
        return [f"{folder}: no {SUMS}: not a bundle made by `hpcval offline bundle`"]
    problems = []
    for rel, expected in sums.items():
        path = folder / rel
        if not path.is_file():
            problems.append(f"{path}: missing (listed in {folder / SUMS})")
        elif (problem := spackmirror.archive_problem(path, expected)):
            problems.append(problem.split(": remake")[0] + ": copy the bundle again")
    return problems
