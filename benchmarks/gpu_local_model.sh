#!/usr/bin/env bash
# A local model served on the GPU by llama.cpp, running examples/local.toml with the cuda verifier (both
# DSLs), from the repo root of a GPU machine:
#     MODEL=/path/to/model.gguf bash benchmarks/gpu_local_model.sh
# Needs there: the DSLs staged (../shared/gpu/README.md), the project's Python dependencies (litellm,
# tenacity, python-dotenv, sqlite-utils, rich), llama-cpp-python[server] built with CUDA
# (CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90"), and a GGUF model at $MODEL.
# The device machine of this workplace has none of the last three and no package registry; a run carries
# 64 MiB: a CUDA build of llama.cpp and any model worth the GPU are larger (Gemma 3 270M alone is 253 MB).
# Writes the store, the server's log and the campaign's output under $OUT.
set -uo pipefail
export PYTHONPATH="$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages" CUDA_PATH=${CUDA_PATH:-/usr/local/cuda}
export PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
OUT=${OUT:-/tmp/mkbsim-gpu-local}
MINUTES=${MINUTES:-10}
PORT=${PORT:-8080}
mkdir -p "$OUT"
[ -f "${MODEL:-}" ] || { echo "MODEL must name a GGUF file"; exit 3; }
python3 -c "import llama_cpp, litellm, tvm, cutlass; assert llama_cpp.llama_supports_gpu_offload(), 'llama-cpp-python without CUDA'" \
  || { echo "needs llama-cpp-python with CUDA, litellm and the staged DSLs"; exit 3; }
nvidia-smi > "$OUT/machine.txt" 2>&1

python3 -m llama_cpp.server --model "$MODEL" --n_gpu_layers -1 --n_ctx 32768 --host 127.0.0.1 --port "$PORT" \
  > "$OUT/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 120); do curl -sf "127.0.0.1:$PORT/v1/models" > /dev/null && break; sleep 1; done

# examples/local.toml with the GPU verifier, the study's submissions, a larger budget and this server
sed -e "s#127.0.0.1:8080#127.0.0.1:$PORT#" -e 's#^backend = "cpu"#backend = "cuda"#' \
    -e "s#^minutes = [0-9]*#minutes = $MINUTES#" -e 's#^submissions = [0-9]*#submissions = 10#' \
    -e 's#^context_tokens = 16384#context_tokens = 32768#' -e "s#runs/sandboxes#$OUT/sandboxes#" \
    examples/local.toml > "$OUT/local.toml"
/usr/bin/time -v python3 -m mkbsim run --campaign "$OUT/local.toml" --store "$OUT/local.sqlite" 2>&1 | tee "$OUT/run.log"
python3 -m mkbsim report --store "$OUT/local.sqlite" 2>&1 | tee "$OUT/report.txt"
