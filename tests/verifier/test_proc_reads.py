"""What a submission may read of /proc (verifier README, "Guards"): its own process's resource use, by any name
(``/proc/self``, ``/proc/thread-self``, its pid, its threads' folders), and nothing else: another process's files
(init's, the zygote's), its own memory and memory map (every caller), its own descriptors and links out of /proc,
each also through a link walked on the way (``/proc/self/fd/N``, ``/proc/self/root/...``) and when listed."""

from __future__ import annotations

from pathlib import Path

from mkbsim.verifier import VerifierSession

ADVERSARIAL = Path(__file__).with_name("adversarial")
OTHER = "reading other processes is forbidden"
MEMORY = "the process's memory is off limits"
OWN = "of its own process, only its resource use and limits are readable"
#: (how the submission reaches the path, the path, the reason it is refused, what the refusal names)
REFUSED = (
    ("open", '"/proc/1/status"', OTHER, "'/proc/1/status'"),
    ("open", 'f"/proc/{os.getppid()}/cmdline"', OTHER, "/cmdline'"),  # the zygote
    ("open", '"/proc/self/mem"', MEMORY, "/mem'"),
    ("open", '"/proc/self/environ"', MEMORY, "/environ'"),
    ("open", 'f"/proc/self/task/{threading.get_native_id()}/maps"', MEMORY, "/maps'"),
    ("open", '"/proc/thread-self/pagemap"', MEMORY, "/pagemap'"),
    ("open", '"/proc/self/fd/0"', OWN, "/fd/0'"),  # the link walked, not /dev/null where it leads
    ("open", '"/proc/self/root/etc/hostname"', OWN, "/root'"),
    ("open", '"/proc/self/mountinfo"', OWN, "/mountinfo'"),
    ("listdir", '"/proc/self/map_files"', MEMORY, "/map_files'"),
    ("listdir", '"/proc/self/fd"', OWN, "/fd'"),
    ("listdir", '"/proc/1"', OTHER, "'/proc/1'"),
    ("scandir", 'f"/proc/{os.getppid()}/task"', OTHER, "/task'"),
)


def _submission(tmp_path: Path) -> Path:
    """A correct kernel whose run() first tries every read of ``REFUSED``, each refusal caught."""
    kernel = (ADVERSARIAL / "proc_maps_runtime.py").read_text().split("def run(")[0]
    calls = {"open": "open({}).close()", "listdir": "os.listdir({})", "scandir": "list(os.scandir({}))"}
    attempts = "".join(
        f"    with contextlib.suppress(OSError):\n        {calls[how].format(path)}\n" for how, path, _, _ in REFUSED
    )
    source = (
        kernel.replace("import os\n", "import contextlib\nimport os\nimport threading\n")
        + "def run(hidden_states, weight):\n"
        + attempts
        + "    out = torch.empty_like(hidden_states)\n    _kernel(hidden_states, weight, out)\n    return out\n"
    )
    path = tmp_path / "reads_proc.py"
    path.write_text(source)
    return path


def test_each_read_but_its_own_usage_is_refused(cpu_session: VerifierSession, tmp_path: Path) -> None:
    report = cpu_session.verify(_submission(tmp_path), "p36", "tirx", static_scan=False)
    assert report.failure == "forbidden_api", report.feedback
    # every call of the draw's block tries them all: the first call's refusals, in order, then the same again
    first = report.forbidden[: len(REFUSED)]
    assert set(report.forbidden) == set(first), report.forbidden
    for (how, path, reason, shown), found in zip(REFUSED, first, strict=True):
        verb = "open(" if how == "open" else f"os.{how}("
        assert f"({reason})" in found and verb in found and shown in found, (path, found)
