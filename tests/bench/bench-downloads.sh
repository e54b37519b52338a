#!/usr/bin/env bash
# bench-downloads.sh BUILD_DIR [WORK_DIR] — download and verify throughput
# (docs/benchmarks.md, "Downloads and verification").
#
# Makes a 1 GiB file (1 MiB random, the rest sparse: quick to create, and
# hashing costs the same) and four 256 MiB files under WORK_DIR (default
# /dev/shm/moedesk-bench, so the disk does not dominate; give a disk folder
# to include it), serves them with the fixture hub on 127.0.0.1, and times
# five alternating runs of curl to a file (plus fsync) and `moedesk-cli pull`
# (listing, hash while streaming, fsync, rename), then three each of
# `moedesk-cli verify --threads 1` and `--threads $(nproc)` (warm cache).
set -euo pipefail
build=$(cd "$1" && pwd)
work=${2:-/dev/shm/moedesk-bench}
cli=$build/app/moedesk-cli
hub=$build/tests/fixture-hub
rm -rf "$work"
mkdir -p "$work/root/bench-org/big"
python3 - "$work/root/bench-org/big" <<'PY'
import os, sys
d = sys.argv[1]
def make(name, size):
    with open(os.path.join(d, name), "wb") as f:
        f.write(os.urandom(1 << 20))
        f.truncate(size)
make("big.bin", 1 << 30)
for k in range(4):
    make("part-%d.bin" % k, 256 << 20)
PY

# The hub exits when its stdin closes: keep a pipe open on fd 3.
exec 3> >(exec "$hub" --root "$work/root" >"$work/ports" 2>"$work/hub.err")
for _ in $(seq 50); do [ -s "$work/ports" ] && break; sleep 0.1; done
port=$(cut -d' ' -f1 "$work/ports")
base=http://127.0.0.1:$port
url=$base/bench-org/big/resolve/main/big.bin
curl -s --noproxy '*' "$base/api/models/bench-org/big/tree/main?recursive=true" >/dev/null # hashes once

now() { date +%s.%N; }
mbps() { python3 -c "print('%.0f MB/s (%.2f s)' % ($1 / 1e6 / ($3 - $2), $3 - $2))"; }
size=$((1 << 30))
export MOEDESK_DATA_DIR=$work/data HF_ENDPOINT=$base MOEDESK_PROGRESS=plain \
       MOEDESK_PROGRESS_INTERVAL_MS=1000000 no_proxy=127.0.0.1
# Alternate the two so that load from other jobs on a shared machine hits
# both alike; report each run and the median ratio.
ratios=()
for i in 1 2 3 4 5; do
  rm -f "$work/out.bin"; sync
  t0=$(now); curl -s --noproxy '*' -o "$work/out.bin" "$url"; t1=$(now); sync "$work/out.bin"; t2=$(now)
  rm -f "$work/out.bin"; rm -rf "$work/data"; sync
  t3=$(now); "$cli" pull bench-org/big:big.bin >/dev/null 2>&1; t4=$(now)
  echo "run $i: curl $(mbps $size $t0 $t1), curl+fsync $(mbps $size $t0 $t2);" \
       "moedesk-cli pull $(mbps $size $t3 $t4)"
  ratios+=("$(python3 -c "print(($t2 - $t0) / ($t4 - $t3))")")
done
python3 -c "import statistics, sys; r = sorted(map(float, sys.argv[1:])); \
print('median moedesk/curl+fsync throughput: %.0f%% (runs: %s)' % (100 * statistics.median(r), \
', '.join('%.0f%%' % (100 * x) for x in r)))" "${ratios[@]}"
rm -rf "$work/data"
for k in 0 1 2 3; do "$cli" pull "bench-org/big:part-$k.bin" >/dev/null 2>&1; done
for t in 1 "$(nproc)"; do
  for i in 1 2 3; do
    echo "verify --threads $t run $i: $("$cli" verify --threads "$t" bench-org/big 2>/dev/null | tail -n 1)"
  done
done
exec 3>&-
rm -rf "$work"
