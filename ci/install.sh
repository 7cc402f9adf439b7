#!/usr/bin/env bash
# Puts guard on a CI job's PATH, for action.yml (and any runner): a prebuilt binary from
# GUARD_URL, checked against GUARD_SHA256 when that is set, or else built with cargo from
# GUARD_SOURCE, the action's own checkout, which is the version the workflow pinned with
# `uses: OWNER/guard@REF`. Installs into $RUNNER_TEMP/guard/bin (or $GUARD_INSTALL_ROOT/bin) and
# adds that directory to $GITHUB_PATH when it is set.
set -euo pipefail

root="${GUARD_INSTALL_ROOT:-${RUNNER_TEMP:-/tmp}/guard}"
bin="$root/bin"
mkdir -p "$bin"

if [ -n "${GUARD_URL:-}" ]; then
  tmp="$bin/.guard.download"
  curl -fsSL --retry 3 -o "$tmp" "$GUARD_URL"
  if [ -n "${GUARD_SHA256:-}" ]; then
    if ! echo "$GUARD_SHA256  $tmp" | sha256sum -c --status -; then
      rm -f "$tmp"
      echo "::error title=guard::the binary at $GUARD_URL does not have the sha256 given in guard-sha256"
      exit 1
    fi
  fi
  chmod 0755 "$tmp"
  mv "$tmp" "$bin/guard"
else
  source_dir="${GUARD_SOURCE:-$(cd "$(dirname "$0")/.." && pwd)}"
  if ! command -v cargo >/dev/null 2>&1; then
    echo "::error title=guard::cargo is needed to build guard from source; give guard-url for a prebuilt binary, or set up Rust first"
    exit 1
  fi
  commit="$(git -C "$source_dir" rev-parse --short=12 HEAD 2>/dev/null || true)"
  GUARD_COMMIT="$commit" cargo install --locked --quiet --path "$source_dir" --root "$root" --bin guard
fi

if [ -n "${GITHUB_PATH:-}" ]; then
  echo "$bin" >> "$GITHUB_PATH"
fi
"$bin/guard" --version
