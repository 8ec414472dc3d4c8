"""A small seccomp filter for every sandbox: no new user namespaces, no keyrings, no change of cores, and none
of the kernel interfaces that serve mostly as exploit primitives (DESIGN §4).

Why: a sandbox started by root runs as an unprivileged uid without a user namespace of its own, and
unprivileged user namespaces are enabled on most machines, so without a filter a command could create one,
become "root" there and reach kernel code (mounts, netfilter, ...) that is otherwise closed to it; bubblewrap's
``--disable-userns`` needs a user namespace of its own and cannot be used there. Blocked:

* ``unshare`` (EPERM) and ``clone`` with ``CLONE_NEWUSER`` (EPERM); ``clone3`` answers ENOSYS, since its
  flags are out of a filter's reach, and the C library then falls back to ``clone``;
* ``io_uring_setup`` and ``userfaultfd`` (EPERM): nothing an agent or a kernel build needs;
* ``keyctl``, ``add_key`` and ``request_key`` (EPERM): the sandbox inherits its parent's session keyring, and
  a key's possessor may read it whatever its uid (``/proc/keys``, which lists them, is hidden: ``_policy``);
* ``sched_setaffinity`` (EPERM): the sandbox's cores are set before bubblewrap starts (``_process``), and a
  command may not widen them to the cores other attempts hold (the mask is out of a filter's reach, so
  narrowing is refused too; thread pools that pin their threads carry on unpinned);
* ``fallocate`` (EOPNOTSUPP): it reserves gigabytes of disk in a moment, long before the once-a-second quota
  check sees them; the C library's ``posix_fallocate`` then writes the zeros itself, at the disk's speed;
* every system call of another ABI (i386 ``int 0x80``, x32): their numbers differ and would dodge the rules.

The filter is classic BPF (``struct sock_filter``) built here for x86_64 and aarch64; on other machines
there is none (``program`` returns None) and the probe says so.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low word on little-endian machines)
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000


class _Abi:
    """A machine's audit architecture and the numbers of the system calls the filter looks at."""

    def __init__(self, arch: int, clone: int, clone3: int, fallocate: int, refused: dict[str, int]) -> None:
        self.arch, self.clone, self.clone3, self.fallocate, self.refused = arch, clone, clone3, fallocate, refused


#: System calls refused with EPERM outright, by name (the names say what the numbers are).
_ABIS = {
    "x86_64": _Abi(0xC000003E, clone=56, clone3=435, fallocate=285, refused={
        "unshare": 272, "io_uring_setup": 425, "userfaultfd": 323, "add_key": 248, "request_key": 249,
        "keyctl": 250, "sched_setaffinity": 203,
    }),
    "aarch64": _Abi(0xC00000B7, clone=220, clone3=435, fallocate=47, refused={
        "unshare": 97, "io_uring_setup": 425, "userfaultfd": 282, "add_key": 217, "request_key": 218,
        "keyctl": 219, "sched_setaffinity": 122,
    }),
}  # fmt: skip


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or None where there is none."""
    abi = _ABIS.get(machine or platform.machine())
    if abi is None:
        return None
    eperm, enosys, unsupported = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS, _ERRNO | errno.EOPNOTSUPP
    refused = list(abi.refused.values())
    ops = [
        _op(_LD_ABS, _ARCH),
        _op(_JEQ, abi.arch, jt=1),  # this machine's ABI: go on; any other: ENOSYS
        _op(_RET, enosys),
        _op(_LD_ABS, _NR),
        _op(_JGE, _X32_BIT, jt=0, jf=1),  # x32 system calls (x86_64's bit 30): ENOSYS
        _op(_RET, enosys),
        _op(_JEQ, abi.clone3, jt=0, jf=1),
        _op(_RET, enosys),
        _op(_JEQ, abi.fallocate, jt=0, jf=1),
        _op(_RET, unsupported),
        _op(_JEQ, abi.clone, jt=0, jf=3),
        _op(_LD_ABS, _ARG0),
        _op(_JSET, _CLONE_NEWUSER, jt=0, jf=len(refused) + 1),  # clone without a new user namespace: allowed
        _op(_RET, eperm),
        # each refused number jumps to the EPERM after the list; none of them falls through to ALLOW
        *(_op(_JEQ, nr, jt=len(refused) - i) for i, nr in enumerate(refused)),
        _op(_RET, _ALLOW),
        _op(_RET, eperm),
    ]
    return b"".join(ops)
