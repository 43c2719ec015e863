#!/usr/bin/env bash
# Builds and runs kapi, the embedded all-in-one server: one process, SQLite under ./kapi-data,
# a generated CA and an admin kubeconfig (./kapi-data/kubeconfig), listening on 127.0.0.1:6443.
# Usage: scripts/run.sh [kapi flags...]      e.g. scripts/run.sh --secure-port 7443
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/ensure-toolchain.sh
. "$here/ensure-toolchain.sh"
ensure_build_deps
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/kapi-target}"
cd "$here/.."
exec cargo run --release --quiet -p kapi -- "$@"
