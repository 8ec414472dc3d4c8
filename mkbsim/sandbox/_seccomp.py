"""A small seccomp filter for every sandbox: no new user namespaces and none of the kernel interfaces that
serve mostly as exploit primitives (DESIGN §4).

Why: a sandbox started by root runs as an unprivileged uid without a user namespace of its own, and
unprivileged user namespaces are enabled on most machines, so without a filter a command could create one,
become "root" there and reach kernel code (mounts, netfilter, ...) that is otherwise closed to it; bubblewrap's
``--disable-userns`` needs a user namespace of its own and cannot be used there. Blocked:

* ``unshare`` (EPERM) and ``clone`` with ``CLONE_NEWUSER`` (EPERM); ``clone3`` answers ENOSYS, since its
  flags are out of a filter's reach, and the C library then falls back to ``clone``;
* ``io_uring_setup`` and ``userfaultfd`` (EPERM): nothing an agent or a kernel build needs;
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

# (audit arch, unshare, clone, clone3, io_uring_setup, userfaultfd) per machine
_ABIS = {
    "x86_64": (0xC000003E, 272, 56, 435, 425, 323),
    "aarch64": (0xC00000B7, 97, 220, 435, 425, 282),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or None where there is none."""
    abi = _ABIS.get(machine or platform.machine())
    if abi is None:
        return None
    arch, unshare, clone, clone3, io_uring, userfaultfd = abi
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    ops = [
        _op(_LD_ABS, _ARCH),
        _op(_JEQ, arch, jt=1),  # this machine's ABI: go on; any other: ENOSYS
        _op(_RET, enosys),
        _op(_LD_ABS, _NR),
        _op(_JGE, _X32_BIT, jt=0, jf=1),  # x32 system calls (x86_64's bit 30): ENOSYS
        _op(_RET, enosys),
        _op(_JEQ, clone3, jt=0, jf=1),
        _op(_RET, enosys),
        _op(_JEQ, clone, jt=0, jf=3),
        _op(_LD_ABS, _ARG0),
        _op(_JSET, _CLONE_NEWUSER, jt=0, jf=5),  # clone without a new user namespace: allowed
        _op(_RET, eperm),
        _op(_JEQ, unshare, jt=2),
        _op(_JEQ, io_uring, jt=1),
        _op(_JEQ, userfaultfd, jt=0, jf=1),
        _op(_RET, eperm),
        _op(_RET, _ALLOW),
    ]
    return b"".join(ops)
