"""Classic BPF seccomp filters' shared parts (stdlib only): the ABIs' numbers, one instruction, and the start and end
every filter of the project has. Two filters use them: every sandbox's (``mkbsim.sandbox._seccomp``) and the verifier's
process filter (``mkbsim.verifier._noprocess``), which a candidate's worker imports in its sandbox before anything of
``mkbsim.sandbox`` could be."""

from __future__ import annotations

import errno
import struct

LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW = 0x7FFF0000
ERRNO = 0x00050000
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low word on little-endian machines)
_X32_BIT = 0x40000000


class Abi:
    """A machine's audit architecture and the numbers of the system calls the filters look at: this sandbox's
    (``refused``) and the verifier's process filter's (``mkbsim.verifier._noprocess``: ``processes``)."""

    def __init__(self, arch: int, seccomp: int, clone: int, clone3: int, fallocate: int, refused: dict[str, int],
                 processes: dict[str, int]) -> None:  # fmt: skip
        self.arch, self.seccomp, self.clone, self.clone3, self.fallocate = arch, seccomp, clone, clone3, fallocate
        self.refused, self.processes = refused, processes


#: System calls refused with EPERM outright, by name (the names say what the numbers are).
ABIS = {
    "x86_64": Abi(0xC000003E, seccomp=317, clone=56, clone3=435, fallocate=285, refused={
        "unshare": 272, "io_uring_setup": 425, "userfaultfd": 323, "add_key": 248, "request_key": 249,
        "keyctl": 250, "sched_setaffinity": 203,
    }, processes={"fork": 57, "vfork": 58, "execve": 59, "execveat": 322}),
    # aarch64 has no fork or vfork system call: the C library forks with clone
    "aarch64": Abi(0xC00000B7, seccomp=277, clone=220, clone3=435, fallocate=47, refused={
        "unshare": 97, "io_uring_setup": 425, "userfaultfd": 282, "add_key": 217, "request_key": 218,
        "keyctl": 219, "sched_setaffinity": 122,
    }, processes={"execve": 221, "execveat": 281}),
}  # fmt: skip


def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def head(abi: Abi) -> list[bytes]:
    """Every filter's start: another ABI's calls (i386, x32) and ``clone3`` (flags out of reach) answer ENOSYS;
    the system call's number is left loaded."""
    enosys = ERRNO | errno.ENOSYS
    return [
        op(LD_ABS, ARCH),
        op(JEQ, abi.arch, jt=1),  # this machine's ABI: go on; any other: ENOSYS
        op(RET, enosys),
        op(LD_ABS, NR),
        op(JGE, _X32_BIT, jt=0, jf=1),  # x32 system calls (x86_64's bit 30): ENOSYS
        op(RET, enosys),
        op(JEQ, abi.clone3, jt=0, jf=1),
        op(RET, enosys),
    ]


def tail(refused: list[int]) -> list[bytes]:
    """Every filter's end, the number loaded: each refused number jumps to the EPERM after the list; none of them
    falls through to ALLOW."""
    return [*(op(JEQ, nr, jt=len(refused) - i) for i, nr in enumerate(refused)), op(RET, ALLOW),
            op(RET, ERRNO | errno.EPERM)]  # fmt: skip
