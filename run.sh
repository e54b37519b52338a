#!/usr/bin/env bash
# run.sh — set up, build and start MoeDesk on Debian 12, then chat in the
# terminal. Installs the build packages (apt-get; as root or through sudo),
# builds into build/, picks the model — MOEDESK_MODEL if set, else the first
# installed model under the data directory, else the demo model the build
# generated (RANDOM WEIGHTS: it only shows that everything works, what it
# says is noise) — and starts an interactive chat with it.
#   usage: bash run.sh [extra moedesk-cli chat options]
set -eu
cd "$(dirname "$0")"

if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
need=()
for p in build-essential pkg-config meson ninja-build libglib2.0-dev libjson-glib-dev \
         libsoup-3.0-dev libsqlite3-dev glib-networking python3; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "run.sh: installing ${need[*]}"
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

[ -f build/build.ninja ] || meson setup build -Dapp=enabled >/dev/null
ninja -C build >/dev/null

data=${XDG_DATA_HOME:-$HOME/.local/share}/moedesk
model=${MOEDESK_MODEL:-}
if [ -z "$model" ]; then
  model=$(find "$data/models" -name '*.gguf' 2>/dev/null | sort | head -n 1 || true)
fi
if [ -z "$model" ] && [ -t 0 ] && [ -z "${MOEDESK_OFFLINE:-}" ] &&
   timeout 5 bash -c 'exec 3<>/dev/tcp/huggingface.co/443' 2>/dev/null; then
  # Online and interactive: offer the catalog model the planner picks for
  # this machine (pull chooses the quantisation that fits).
  pick=$(build/app/moedesk-cli plan qwen3-30b-a3b-instruct-2507 --json 2>/dev/null |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["chosen"]["variant"])' 2>/dev/null || true)
  echo "run.sh: no model installed. Qwen3-30B-A3B-Instruct-2507 ${pick:+($pick) }fits this machine per the planner."
  read -r -p "Download it now (about 17-32 GB)? [y/N] " yes
  if [ "$yes" = y ] || [ "$yes" = Y ]; then
    build/app/moedesk-cli pull qwen3-30b-a3b-instruct-2507 &&
      model=$(find "$data/models" -name '*.gguf' 2>/dev/null | sort | head -n 1 || true)
  fi
fi
if [ -z "$model" ]; then
  model=build/app/moedesk-demo-random.gguf
  echo "run.sh: no model installed; using the DEMO MODEL: random weights, its replies are noise."
fi
build/app/moedesk-cli inspect "$model"
echo

# Start the service (OpenAI/Ollama/llama.cpp-compatible REST port for editor
# plugins, usage log for the weekly report) on its default port 11435, or
# any free port when that one is taken; stop it when the chat ends.
logdir=$(mktemp -d)
start_service() {
  build/app/service/moedesk-service --model "$model" "$@" >"$logdir/out" 2>"$logdir/err" &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q 'listening on' "$logdir/out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
if ! start_service && ! start_service --port 0; then
  echo "run.sh: the service did not start:" >&2
  cat "$logdir/err" >&2
  exit 1
fi
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$logdir"' EXIT
url=$(sed -n 's/.*listening on //p' "$logdir/out" | head -n 1)
echo "MoeDesk service: $url  (OpenAI: $url/v1  Ollama: $url  llama.cpp: $url/completion)"
echo "Editor plugins can use it while you chat; usage is logged for 'moedesk-cli report weekly'."
echo
build/app/moedesk-cli chat --service "$url" --model "$model" "$@"
