#!/usr/bin/env bash
# tests/gpu/run.sh — what MoeDesk checks on a lent NVIDIA machine, in one
# short run (the device tool copies the working tree; `build-gpu-slim/` is built
# here first with tests/gpu/prepare.sh and carried along, since the device
# has no build tools or network). There is no CUDA backend yet, so today this
# checks what the GPU machine can tell us about the CPU/engine side:
#   1. the hardware probe through the real NVIDIA driver (NVML loaded at run
#      time) against nvidia-smi — name, total VRAM, driver, free memory,
#      power draw;
#   2. the engine's unit tests on that machine's CPU (another CPU model and
#      kernel set than the CI machine), incl. bit-exact batch invariance;
#   3. the CPU decode/prefill benchmark on the demo model with 1..N threads.
# Output goes to stdout and $OUT/gpu-report.txt.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}/gpu-report.txt
exec > >(tee "$out") 2>&1
b=build-gpu-slim
echo "== machine"; date -u; uname -a; nvidia-smi || echo "nvidia-smi failed"
lscpu | sed -n '1,20p'
echo "== 1. hardware probe vs nvidia-smi"
mapfile -t lines < <(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits)
"$b/tests/bench/hw-check" "${lines[@]}"; rc1=$?
echo "== 2. engine unit tests on this CPU"
export MOE_SOURCE_ROOT=$PWD MOE_SHARED_DATA=$PWD/$b/shared-data MOE_FAKE_NVML=$PWD/$b/tests/fake-nvml.so
fail=0; pass=0
for t in "$b"/tests/test-*; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  if (cd "$b" && timeout 300 "../$t" >"/tmp/$n.log" 2>&1); then pass=$((pass+1)); echo "ok   $n"
  else fail=$((fail+1)); echo "FAIL $n"; tail -n 15 "/tmp/$n.log"; fi
done
echo "engine tests: $pass passed, $fail failed"
echo "== 3. CPU bench (demo model)"
for th in 1 4 16; do
  "$b/tests/bench/bench-cpu" "$b/demo.gguf" "$th" || true
  [ -f "$b/bench.gguf" ] && { "$b/tests/bench/bench-cpu" "$b/bench.gguf" "$th" || true; }
done
echo "== summary: probe rc=$rc1, engine tests $pass passed / $fail failed"
