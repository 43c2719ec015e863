#!/usr/bin/env bash
# Runs the whole kapi test suite on a fresh Debian/Ubuntu machine, installing what it needs.
# Usage: scripts/test.sh            (CI calls exactly this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/kapi-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

log() { printf '==> %s\n' "$*"; }

# --- toolchain and system packages the tests drive (real processes, never mocks) ----------
# shellcheck source=scripts/ensure-toolchain.sh
. scripts/ensure-toolchain.sh
ensure_build_deps
command -v dpkg >/dev/null 2>&1 && ensure_apt python3 python3-pip openssl

# --- Python client used as a real Kubernetes client (pinned) --------------------------------
if ! python3 -c 'import kubernetes' 2>/dev/null; then
  log "installing the Python kubernetes client"
  python3 -m pip install --quiet 'kubernetes==37.*' 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages 'kubernetes==37.*'
fi

# --- kubectl: the e2e tests use the default kubectl and kubectl.1.27 --------------------------
command -v kubectl >/dev/null || { echo "kubectl is required (kubectl and kubectl.1.27 next to it)"; exit 1; }

# --- build once, then run every test --------------------------------------------------------
log "building (target dir $CARGO_TARGET_DIR)"
cargo build --workspace --tests --bins --quiet
log "clippy (warnings are errors)"
cargo clippy --workspace --tests --quiet -- -D warnings

if cargo nextest --version >/dev/null 2>&1; then
  log "running tests with cargo-nextest"
  cargo nextest run --workspace --profile ci
else
  log "cargo-nextest not found; running cargo test"
  cargo test --workspace
fi
