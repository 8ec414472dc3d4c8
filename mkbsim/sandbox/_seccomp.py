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

from mkbsim._seccomp_bpf import ABIS, ARG0, ERRNO, JEQ, JSET, LD_ABS, RET, head, op, tail

_CLONE_NEWUSER = 0x10000000


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or None where there is none."""
    abi = ABIS.get(machine or platform.machine())
    if abi is None:
        return None
    refused = list(abi.refused.values())
    ops = [
        *head(abi),
        op(JEQ, abi.fallocate, jt=0, jf=1),
        op(RET, ERRNO | errno.EOPNOTSUPP),
        op(JEQ, abi.clone, jt=0, jf=3),
        op(LD_ABS, ARG0),
        op(JSET, _CLONE_NEWUSER, jt=0, jf=len(refused) + 1),  # clone without a new user namespace: allowed
        op(RET, ERRNO | errno.EPERM),
        *tail(refused),
    ]
    return b"".join(ops)
