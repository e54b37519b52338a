#!/usr/bin/env bash
# tests/gpu/prepare.sh — builds what tests/gpu/run.sh runs on the lent GPU
# machine (which has no compiler, meson or network): the engine, its unit
# tests and the two GPU-machine tools into build-gpu/, plus the demo model.
# Then: run tool with carry ["build-gpu-slim"] and command "bash tests/gpu/run.sh".
set -eu
cd "$(dirname "$0")/../.."
[ -f build-gpu/build.ninja ] || meson setup build-gpu -Dapp=disabled -Dnode_tests=disabled >/dev/null
ninja -C build-gpu
if [ -f build/app/moedesk-demo-random.gguf ]; then
  cp build/app/moedesk-demo-random.gguf build-gpu/demo.gguf
else
  echo "prepare.sh: build the app first (ninja -C build) for the demo model" >&2
  exit 1
fi
du -sh build-gpu
# The device tool carries at most 64 MiB: only the executables and the
# demo model go, in build-gpu-slim/ (the same layout under tests/).
rm -rf build-gpu-slim
mkdir -p build-gpu-slim/tests/bench
find build-gpu/tests -maxdepth 1 -type f \( -name "test-*" -o -name fake-nvml.so \) -exec cp {} build-gpu-slim/tests/ \;
rm -f build-gpu-slim/tests/test-plan-fit   # needs a 136 MiB generated model
cp build-gpu/tests/bench/hw-check build-gpu/tests/bench/bench-cpu build-gpu-slim/tests/bench/
cp build-gpu/demo.gguf build-gpu-slim/
strip build-gpu-slim/tests/test-* build-gpu-slim/tests/bench/* 2>/dev/null || true
du -sh build-gpu-slim
# The shared tokenizer vocabularies and chat templates the unit tests read.
if [ -d ../shared/data ]; then
  cp -r ../shared/data build-gpu-slim/shared-data
fi
du -sh build-gpu-slim
