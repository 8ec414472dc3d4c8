#!/usr/bin/env bash
# The verifier's cuda backend on the H200, in one run (about 5 minutes), from the repo root.
#
# First stage the DSLs on the warm machine: here `python3 benchmarks/gpu_pack.py`, then one run per
# part: carry=[".gpu/dsl/pK"], command="bash .gpu/dsl/pK/stage.sh" for K = 1..N. Then, same
# warm machine:
#     run  command="bash benchmarks/gpu_verifier.sh"   (timeout_s=600)
# Everything it prints is also written under $OUT: the GPU tests' log, the verifier-vs-do_bench
# table (JSON + log) and the overhead table for the cuda backend.
set -uo pipefail
export PYTHONPATH="$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages"
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda} PYTHONUNBUFFERED=1 MKBSIM_GPU_TESTS=1
OUT=${OUT:-/tmp/mkbsim-gpu}
mkdir -p "$OUT"
python3 -c "import tvm, cutlass" || { echo "the DSLs are not staged in /opt/dsl: stage them first"; exit 3; }
{ nvidia-smi; python3 -c "import torch, tvm, cutlass; print(torch.__version__, torch.version.cuda, tvm.__version__, cutlass.__version__)"; } \
  > "$OUT/machine.txt" 2>&1
python3 -m pytest tests/verifier/test_gpu.py -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.log"
python3 benchmarks/gpu_verifier.py --json "$OUT/gpu_verifier.json" 2>&1 | tee "$OUT/gpu_verifier.log"
python3 benchmarks/verifier.py --backend cuda --warm-runs 3 --json "$OUT/overhead_cuda.json" 2>&1 \
  | tee "$OUT/overhead_cuda.log"
