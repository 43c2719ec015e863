#!/usr/bin/env bash
# Sourced by scripts/run.sh and scripts/test.sh: makes sure a C toolchain and Rust are present
# on a fresh Debian/Ubuntu machine, installing them when missing.

_sudo() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_apt() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    printf '==> installing %s\n' "${missing[*]}"
    _sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive _sudo apt-get install -y -qq "${missing[@]}"
  fi
}

ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    printf '==> installing the Rust toolchain (rustup, stable)\n'
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
}

ensure_build_deps() {
  # protobuf-compiler: the etcd client crate compiles etcd's protos when it builds.
  command -v dpkg >/dev/null 2>&1 && ensure_apt build-essential curl ca-certificates pkg-config protobuf-compiler
  ensure_rust
}
