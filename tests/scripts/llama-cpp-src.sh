#!/usr/bin/env bash
# Unpacks the llama.cpp source tree that the node-llama-cpp npm package
# ships (as a git bundle) into DEST, once. Tests read data from it (the
# vocabulary GGUF files under models/, gguf-py as a reference to run); none
# of it is copied into this repository.
#   usage: llama-cpp-src.sh DEST
set -eu
dest=$1
here=$(cd "$(dirname "$0")/.." && pwd)
bundle=$here/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
if [ -f "$dest/.moedesk-unpacked" ]; then exit 0; fi
[ -f "$bundle" ] || { echo "llama-cpp-src: $bundle missing: run 'npm ci' in tests/node" >&2; exit 1; }
rm -rf "$dest.tmp"
git clone -q "$bundle" "$dest.tmp" 2>/dev/null
rm -rf "$dest"; mv "$dest.tmp" "$dest"
touch "$dest/.moedesk-unpacked"
