#!/usr/bin/env bash
# Every reference DSL solution through `mkbsim verify --backend cuda --protocol paper` on the
# production WORKLOAD, on the H200 (DSLs staged in /opt/dsl by benchmarks/gpu_pack.py).
# Writes one JSON verdict per solution and a summary table under $OUT.
set -uo pipefail
export PYTHONPATH="$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages"
export CUDA_PATH=${CUDA_PATH:-/usr/local/cuda} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/mkbsim-gpu}
mkdir -p "$OUT/verdicts"
for file in ${SOLUTIONS:-problems/*/solutions/[0-9]*_*.py}; do  # SOLUTIONS: a subset (glob)
  name=$(basename "$file" .py)
  id="p${name%%_*}"
  dsl=${name##*_}
  python3 -m mkbsim verify "$file" --problem "$id" --dsl "$dsl" --backend cuda --protocol "${PROTOCOL:-paper}" \
    --workload production --json > "$OUT/verdicts/$name.json" 2> "$OUT/verdicts/$name.err"
  echo "$name exit=$?"
done
python3 - "$OUT/verdicts" <<'PY' | tee "$OUT/solutions_table.md"
import json, pathlib, sys
print("| solution | passed | failure | runtime ms | eager ms | speedup | SOL fraction |")
print("|---|---|---|---|---|---|---|")
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    try:
        r = json.loads(f.read_text())
    except ValueError:
        print(f"| {f.stem} | error | see {f.stem}.err | | | | |")
        continue
    sol = (r.get("details") or {}).get("sol") or {}
    fmt = lambda v, p=4: "" if v is None else f"{v:.{p}g}"
    print(f"| {f.stem} | {r['passed']} | {r.get('failure') or ''} | {fmt(r['runtime_ms'])} | {fmt(r['eager_ms'])} "
          f"| {fmt(r['speedup'], 3)} | {fmt(sol.get('fraction'), 2)} |")
PY
