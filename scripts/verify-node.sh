#!/usr/bin/env bash
# Checks the Node binary of the `node` package in the node_modules folder given ($1) against
# scripts/node-checksums.txt, with sha256sum: never with that binary, which is what is checked.
# Exit 0 when it matches; else one line on stderr and exit 1 (docs/development.md, which Node runs what).
set -euo pipefail
modules="$1"
sums="$(dirname "$0")/node-checksums.txt"
case "$(uname -s)" in Linux) platform=linux ;; Darwin) platform=darwin ;; *) platform="$(uname -s)" ;; esac
case "$(uname -m)" in x86_64) arch=x64 ;; aarch64 | arm64) arch=arm64 ;; *) arch="$(uname -m)" ;; esac
version="$(sed -n 's/^  "version": "\([^"]*\)",$/\1/p' "$modules/node/package.json")"
name="node-$platform-$arch@$version"
expected="$(awk -v name="$name" '$2 == name { print $1 }' "$sums")"
if [ -z "$expected" ]; then
  echo "verify-node: no checksum for $name in $sums" >&2
  exit 1
fi
if ! printf '%s  %s\n' "$expected" "$modules/node/bin/node" | sha256sum --check --status -; then
  echo "verify-node: $modules/node/bin/node is not the $name binary of $sums" >&2
  exit 1
fi
echo "verify-node: $name matches $sums"
