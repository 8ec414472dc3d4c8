#!/usr/bin/env bash
# Verifier slots on a machine with several GPUs (the device tool's nvidia-h200-x2), in one run, from the
# repo root. Stage the DSLs (benchmarks/gpu_pack.py: carry .gpu/dsl/p1..pN) and Ray, which is not on the GPU
# image (here `bash benchmarks/pack_ray.sh`, then carry .gpu/r1 and .gpu/r2 with their stage.sh), then:
#     run  kind="nvidia-h200-x2"  command="bash benchmarks/gpu_slots.sh"
# Runs tests/agents/test_gpu_slots.py and tests/verifier/test_gpu.py, then benchmarks/gpu_slots.py; logs under $OUT.
set -uo pipefail
export PYTHONPATH="$PWD:/opt/ray:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages" PATH="/opt/ray/bin:$PATH"
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda} PYTHONUNBUFFERED=1 MKBSIM_GPU_TESTS=1 RAY_USAGE_STATS_ENABLED=0
OUT=${OUT:-/tmp/mkbsim-gpu}
mkdir -p "$OUT"
python3 -c "import tvm, cutlass, ray" || { echo "stage the DSLs and Ray first"; exit 3; }
{ nvidia-smi; python3 -c "import torch, tvm, cutlass, ray; print(torch.__version__, torch.version.cuda, tvm.__version__, cutlass.__version__, ray.__version__)"; } \
  > "$OUT/machine.txt" 2>&1
python3 -m pytest tests/agents/test_gpu_slots.py tests/verifier/test_gpu.py -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.log"
python3 benchmarks/gpu_slots.py --out "$OUT" 2>&1 | tee "$OUT/gpu_slots.log"
