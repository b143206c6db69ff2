"""Running as root safely: what root executes or trusts must be writable by
root (or the person who ran ``sudo``) alone.

The per-node gate runs as root from Slurm (``HealthCheckProgram``, a prolog)
and scheduled validations often do too. Root then runs the virtual
environment's interpreter and scripts, imports hpcval and the site's ReFrame
configuration (``config.py`` is Python), executes the checks, builds and runs
proxies, and trusts the site's references, expectations and its results
store (``var/<site>/``: the vettings the gate judges against, the ``cfdio``
it built, the history baselines). A user who can write any of these would run
code as root or make the gate drain nodes.

So, as sshd's ``StrictModes`` does for ``authorized_keys``, hpcval running as
root refuses (exit 3, :class:`UntrustedPath`, naming the path, its owner and
its mode) a path it would execute or trust when the path, or any directory
above it, is

- owned by someone other than root or the invoking user (``$SUDO_UID``, the
  person who ran ``sudo hpcval ...``), or
- group- or world-writable (``g+w``, ``o+w``),

with one exception: a directory *above* the path (never the path itself, nor
a directory hpcval reads whole) that is owned by root and has the sticky bit
(``/tmp``, mode 1777). There nobody but root and an entry's owner can rename
or remove the entry, so a root-owned directory inside stays root's. A
symbolic link is followed: the link's owner is checked, then everything on
the way to its target. Without root (``euid != 0``) nothing is checked.

What hpcval creates as root is root's: :func:`harden_umask` keeps the group
and others from writing what it creates, whatever umask slurmd gave it.
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from hpcval.core.errors import EnvironmentFault
from hpcval.core.paths import CHECKS_DIR

#: Where the how-to is (the message says it).
HOW_TO = "docs/scheduling.md, 'Running as root'"

#: Symbolic links followed in a row before the path is refused (the kernel's own limit).
MAX_LINKS = 40


class UntrustedPath(EnvironmentFault):
    """A path root would execute or trust that someone else can write (exit 3)."""


def as_root() -> bool:
    """Whether this process runs with root's rights."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def trusted_uids() -> frozenset[int]:
    """Root, and the person who ran ``sudo`` (``$SUDO_UID``) where one did."""
    uids = {0}
    sudo = os.environ.get("SUDO_UID", "")
    if sudo.isdigit():
        uids.add(int(sudo))
    return frozenset(uids)


def harden_umask() -> None:
    """As root: what hpcval creates is never group- or world-writable."""
    if as_root():
        old = os.umask(0o022)
        os.umask(old | 0o022)


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class _Checker:
    """Checks paths for one command, each at most once."""

    def __init__(self) -> None:
        self.uids = trusted_uids()
        self.ok: set[str] = set()

    def _refuse(self, path: str, st: os.stat_result, why: str, what: str) -> UntrustedPath:
        mode = stat.filemode(st.st_mode)
        return UntrustedPath(
            f"running as root, refusing {what}: {path} {why} (owner {_owner(st.st_uid)}, "
            f"mode {mode} {stat.S_IMODE(st.st_mode):04o}); root executes or trusts it, so "
            "it must be owned by root (or the user who ran sudo) and writable by its owner "
            f"alone: chown root and chmod go-w it ({HOW_TO}); exit 3")

    def _judge(self, path: str, st: os.stat_result, what: str, above: bool) -> bool:
        """Refuse ``path`` (:class:`UntrustedPath`); True where it is trusted as any
        path, False where only as a directory above one (sticky, root's)."""
        if stat.S_ISLNK(st.st_mode):  # a link's own mode says nothing; its owner does
            if st.st_uid not in self.uids:
                raise self._refuse(path, st, "is a symbolic link owned by someone else", what)
            return True
        if st.st_uid not in self.uids:
            raise self._refuse(path, st, "is owned by someone else", what)
        if st.st_mode & 0o022:
            sticky = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and st.st_uid == 0
            if above and sticky:
                return False  # /tmp-like: entries are their owners' alone
            who = "group- and world-writable" if st.st_mode & 0o022 == 0o022 else (
                "group-writable" if st.st_mode & 0o020 else "world-writable")
            raise self._refuse(path, st, f"is {who}", what)
        return True

    def path(self, path: Path | str, what: str, depth: int = 0) -> Path | None:
        """Check ``path`` and every directory above it; follow links. The real
        path, or None where it does not exist (nothing to trust yet: what is
        above it is checked)."""
        if depth > MAX_LINKS:
            raise UntrustedPath(f"running as root, refusing {what}: {path}: more than "
                                f"{MAX_LINKS} symbolic links in a row; exit 3")
        parts = Path(os.path.abspath(path)).parts
        cur = Path(parts[0])
        self._component(cur, what, above=len(parts) > 1)
        for i, name in enumerate(parts[1:], start=2):
            nxt = cur / name
            last = i == len(parts)
            try:
                st = os.lstat(nxt)
            except FileNotFoundError:
                return None
            except OSError as err:
                raise UntrustedPath(f"running as root, refusing {what}: {nxt}: cannot be "
                                    f"read ({err.strerror}); exit 3") from None
            key = str(nxt)
            if stat.S_ISLNK(st.st_mode):
                self._judge(key, st, what, above=not last)
                target = os.path.normpath(cur / os.readlink(nxt))
                resolved = self.path(target, what, depth + 1)
                if resolved is None:
                    return None
                cur = resolved
                continue
            if key not in self.ok and self._judge(key, st, what, above=not last):
                self.ok.add(key)  # trusted as any path: never judged again
            cur = nxt
        return cur

    def _component(self, p: Path, what: str, above: bool) -> None:
        key = str(p)
        if key not in self.ok and self._judge(key, os.lstat(p), what, above):
            self.ok.add(key)

    def tree(self, top: Path, what: str, skip: Iterable[str] = ()) -> None:
        """``top``, what is above it and everything below it (links followed one step:
        the link's owner and its target's way)."""
        real = self.path(top, what)
        if real is None:
            return
        skipped = set(skip)
        for dirpath, dirnames, filenames in os.walk(real):
            dirnames[:] = [d for d in dirnames if d not in skipped]
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                try:
                    st = os.lstat(p)
                except FileNotFoundError:
                    continue
                self._judge(p, st, what, above=False)
                if stat.S_ISLNK(st.st_mode) and os.path.exists(p):
                    self.path(p, what)


def check_paths(paths: Iterable[Path | str], what: str) -> None:
    """As root: refuse (:class:`UntrustedPath`) any of ``paths`` someone else can write."""
    if not as_root():
        return
    checker = _Checker()
    for p in paths:
        checker.path(p, what)


def check_code() -> None:
    """As root: the interpreter, the virtual environment and hpcval's package
    (each whole), every directory on ``sys.path`` (itself, not below) and the
    working directory."""
    if not as_root():
        return
    checker = _Checker()
    what = "the code it runs"
    checker.path(sys.executable, what)
    if sys.prefix != sys.base_prefix:
        checker.tree(Path(sys.prefix), what)
    checker.tree(Path(__file__).resolve().parent.parent, what)  # hpcval's package
    for p in sys.path:
        if p and os.path.isdir(p):
            checker.path(p, what)
    # hpcval starts `python -m hpcval.vet.probe` (the gate, vetting): such a child
    # imports from its working directory first
    checker.path(os.getcwd(), "the working directory (`python -m` imports from it)")


def check_site(checkout: Path, site_dir: Path | None, var_site: Path | None) -> None:
    """As root: what a command about a site trusts besides the code.

    - the checks and hpcval's proxies (``reframe-checks/``, ``proxies/``: ReFrame
      imports the one, vetting builds the other), and the site's directory
      (``config.py`` is Python; references, host expectations, judging), each whole;
    - its results store ``var/<site>/``: the directory, every entry in it (not
      below: a directory only root can write holds only what root put there),
      ``history.sqlite`` (the baselines) and ``vet/bin/`` (the ``cfdio`` the gate
      runs) whole; the stored vettings are checked as they are read.
    """
    if not as_root():
        return
    checker = _Checker()
    for tree, what in ((checkout / CHECKS_DIR, "the checks ReFrame imports"),
                       (checkout / "proxies", "the proxies it builds"),
                       *(((site_dir, "the site's configuration"),) if site_dir else ())):
        checker.tree(tree, what)
    if var_site is None:
        return
    what = "the site's results store"
    if checker.path(var_site, what) is None:
        return
    for entry in sorted(os.listdir(var_site)):
        checker.path(var_site / entry, what)
    checker.tree(var_site / "vet" / "bin", "a program the gate runs")
