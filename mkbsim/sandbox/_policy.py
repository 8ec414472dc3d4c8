"""What a sandbox lets a process see and use, and the bubblewrap command line that enforces it (DESIGN §4).

The sandbox's filesystem is built from nothing: a read-only tmpfs root holding the system's programs and
libraries (``/usr`` and its links), a few files of ``/etc`` that the dynamic loader and the C library read,
the paths the caller names read-only (an interpreter and its packages: ``python_paths``) or writable (an
attempt's directory), a private ``/tmp``, a fresh ``/proc`` of the sandbox's own PID namespace and a minimal
``/dev``. Nothing else of the host exists inside: no home directory, no project tree, no other process.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from mkbsim.sandbox._limiter import ProcessLimits

GIB = 1 << 30

#: Default limits of DESIGN §4.
DEFAULT_MEMORY_BYTES = 8 * GIB
DEFAULT_MAX_PROCESSES = 128  # threads count too (the kernel counts tasks): a DSL build needs a few dozen
DEFAULT_TMP_BYTES = 1 * GIB  # each private tmpfs (/tmp, /dev/shm) where there is no memory budget to share
DEFAULT_DISK_BYTES = 4 * GIB  # the writable folders' quota, and the size of any one file written
#: Each private tmpfs (/tmp, /dev/shm) takes this share of the memory budget (1 GiB of 8): their files are
#: memory, so they come out of it, and the processes' address space is what is left (6 GiB of 8).
TMPFS_SHARE = 8

#: Top-level system folders: bound read-only where they are folders, recreated where they are links
#: (``/bin -> usr/bin`` on merged-/usr systems).
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of /etc programs need: the loader's cache, the alternatives links of /usr/bin, time zone, name
#: service switch. Not passwd/shadow/hosts or anything naming the host's users.
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf")

#: Unprivileged uids handed to sandboxes started by root: far above any real account's.
_UID_BASE, _UID_SPAN = 1 << 30, 1 << 24


def sandbox_uid() -> int | None:
    """The uid a new sandbox runs as: a fresh unprivileged uid when this process is root (so that the
    process limit binds and the host's root-owned files stay closed), None (this process's own uid, in a
    user namespace) otherwise. Random in a span of 16M: two sandboxes sharing one would share a process
    count, nothing else (each sees only its own mounts and PID namespace)."""
    return _UID_BASE + secrets.randbelow(_UID_SPAN) if os.geteuid() == 0 else None


@dataclass(frozen=True)
class Policy:
    """One sandbox's view of the machine and its limits.

    ``ro``/``rw``: host paths bound at the same path, read-only or writable. ``devices``: device nodes
    bound with device access (e.g. ``/dev/nvidia0``; nothing by default). ``env``: the complete
    environment (nothing is inherited). ``cwd``: the working directory (inside a bound path).
    ``cpus``: cores by affinity, set before bubblewrap starts and not changeable inside (None: this
    process's). ``memory_bytes``: the memory budget (None for CUDA processes, which reserve far more address
    space than they use): each private tmpfs takes ``tmp_bytes`` of it (default: an eighth) and every process
    may map the rest (``address_space_bytes``, RLIMIT_AS) — a bound per process, not per sandbox, where no
    cgroup is used (DESIGN §4). ``max_processes``: tasks of the sandbox's uid (RLIMIT_NPROC). ``disk_bytes``:
    the largest file a process may write (RLIMIT_FSIZE) and the quota of the ``rw`` folders, which ``run``
    checks while and after a command runs (None: neither). ``network``: keep the host's network (default: a
    new, empty network namespace). ``share``: namespaces kept from the host ("ipc", "pid"; by default every one
    is new).
    ``uid``: see ``sandbox_uid``; paths the sandbox must write are handed to it with ``hand_over``.
    ``child_uids`` (as root only): the sandbox's first process is not dropped to ``uid`` but stays root
    holding only CAP_SETUID, CAP_SETGID and CAP_KILL, so that it can start each child under a fresh uid of
    its own (``sandbox_uid``; a fork server such as the verifier's zygote, which runs no untrusted code
    itself) and end them; a child that changed uid has no capability left.
    ``isolated`` False: no bubblewrap at all, only the limits and the environment, as this process's user
    (for machines where bubblewrap cannot run and the user said so; ``ro``, ``rw``, ``devices``, ``network``
    and ``uid`` then mean nothing: the process sees what this user sees).
    """

    ro: tuple[Path, ...]
    rw: tuple[Path, ...]
    cwd: Path
    env: Mapping[str, str]
    cpus: tuple[int, ...] | None = None
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES
    max_processes: int | None = DEFAULT_MAX_PROCESSES
    tmp_bytes: int | None = None
    disk_bytes: int | None = DEFAULT_DISK_BYTES
    devices: tuple[str, ...] = ()
    network: bool = False
    share: tuple[str, ...] = ()  # "ipc" and/or "pid": keep the host's namespace (CUDA IPC may need them)
    uid: int | None = field(default_factory=sandbox_uid)
    isolated: bool = True
    child_uids: bool = False

    def __post_init__(self) -> None:
        if not self.isolated:  # outside bubblewrap a uid change would lock it out of root's own files
            object.__setattr__(self, "uid", None)
        if self.uid is None:  # a user namespace maps one uid: children cannot get others
            object.__setattr__(self, "child_uids", False)
        space = self.address_space_bytes()
        if space is not None and space <= 0:
            raise ValueError(f"a memory budget of {self.memory_bytes} bytes leaves nothing to the processes "
                             f"beside two tmpfs of {self.tmpfs_bytes()} bytes")  # fmt: skip

    def tmpfs_bytes(self) -> int:
        """The size of each private tmpfs, ``/tmp`` and ``/dev/shm``."""
        if self.tmp_bytes is not None:
            return self.tmp_bytes
        return DEFAULT_TMP_BYTES if self.memory_bytes is None else self.memory_bytes // TMPFS_SHARE

    def address_space_bytes(self) -> int | None:
        """RLIMIT_AS of every process: the memory budget less what both tmpfs may hold (without bubblewrap
        there is no private tmpfs: all of it)."""
        if self.memory_bytes is None or not self.isolated:
            return self.memory_bytes
        return self.memory_bytes - 2 * self.tmpfs_bytes()

    def limits(self) -> ProcessLimits:
        drop = None if self.child_uids else self.uid
        return ProcessLimits(drop, self.address_space_bytes(), self.max_processes, self.disk_bytes, str(self.cwd))

    def hand_over(self, path: Path, uid: int | None = None) -> None:
        """Give ``path`` (a file, or a folder and everything in it) to the sandbox's uid (or to ``uid``, a
        child's: see ``child_uids``), so that it can write there; nothing to do when the sandbox runs as
        this process's own user. Links are not followed."""
        owner = self.uid if uid is None else uid
        if owner is None:
            return
        os.chown(path, owner, owner, follow_symlinks=False)
        if path.is_dir() and not path.is_symlink():
            for folder, dirs, files in os.walk(path):
                for name in dirs + files:
                    os.chown(os.path.join(folder, name), owner, owner, follow_symlinks=False)

    def bwrap_args(self) -> list[str]:
        """bubblewrap's options for this policy (without the program and the command)."""
        args = ["--die-with-parent", "--new-session", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
        args += [f"--unshare-{ns}" for ns in ("pid", "ipc") if ns not in self.share]
        if not self.network:
            args.append("--unshare-net")
        if self.uid is None:  # unprivileged: a user namespace, and no nested one inside
            args += ["--unshare-user", "--disable-userns"]
        else:  # root: the limiter needs these two capabilities to drop to the sandbox's uid, then has none
            args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            if self.child_uids:  # it ends children that run under other uids
                args += ["--cap-add", "CAP_KILL"]
        # the private /tmp first: a bound path under the host's /tmp (a test's folder) then shows through it
        args += ["--tmpfs", "/", "--perms", "1777", "--size", str(self.tmpfs_bytes()), "--tmpfs", "/tmp"]
        for top in _SYSTEM_DIRS:
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        # bubblewrap makes the folders above a bound path private (0700): the sandbox's uid must pass them
        for folder in _ancestors((*self.ro, *self.rw, Path("/etc/ld.so.cache"))):
            args += ["--perms", "0755", "--dir", str(folder)]
        for name in _ETC:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for path in _outermost(self.ro):
            args += ["--ro-bind", str(path), str(path)]
        for path in self.rw:
            args += ["--bind", str(path), str(path)]
        # /proc/keys lists the keys of the parent's session keyring, which the sandbox possesses (the seccomp
        # filter refuses every keyring call); /dev/shm as its own bounded tmpfs: POSIX semaphores
        # (multiprocessing's locks) live there
        args += ["--proc", "/proc", "--ro-bind", "/dev/null", "/proc/keys", "--dev", "/dev", "--perms", "1777",
                 "--size", str(self.tmpfs_bytes()), "--tmpfs", "/dev/shm"]  # fmt: skip
        for node in self.devices:
            args += ["--dev-bind", node, node]
        # the limiter enters ``cwd`` once it runs as the sandbox's uid (bubblewrap's root, without
        # CAP_DAC_OVERRIDE, may not pass a 0700 folder the sandbox owns)
        args += ["--remount-ro", "/", "--chdir", "/"]
        return args


def _ancestors(paths: tuple[Path, ...]) -> list[str]:
    """The folders above ``paths`` below the root, parents first, each once."""
    found: dict[str, None] = {}
    for path in paths:
        parts = Path(os.path.abspath(path)).parts
        for i in range(2, len(parts)):
            found[os.path.join(*parts[:i])] = None
    return sorted(found, key=lambda f: f.count("/"))


def _outermost(paths: tuple[Path, ...]) -> list[Path]:
    """The paths without those inside another one of them (a bind of a folder already holds them)."""
    unique = sorted({Path(os.path.abspath(p)) for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


@lru_cache(maxsize=8)
def python_paths(python: str = sys.executable) -> tuple[Path, ...]:
    """What ``python`` needs to run its installed packages: its prefix and base prefix (the interpreter and
    the standard library; a virtual environment's folder) and every ``site-packages`` or ``dist-packages``
    folder on its import path. Folders of the import path that are neither (a project tree added by an
    editable install or a ``.pth`` file) are left out: they are not the toolchain. Asked of the interpreter
    itself, once per process."""
    probe = ("import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, "
             "sys.base_exec_prefix, sys.path]))")  # fmt: skip
    out = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    *prefixes, path = json.loads(out.stdout.strip().splitlines()[-1])
    found = [Path(p) for p in prefixes]
    for entry in path:
        parts = Path(entry).parts
        for i in range(len(parts) - 1, 0, -1):
            if parts[i] in ("site-packages", "dist-packages"):
                found.append(Path(*parts[: i + 1]))
                break
    return tuple(p for p in dict.fromkeys(found) if p.is_dir())
