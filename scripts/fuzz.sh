#!/usr/bin/env bash
# Runs kapi's fuzz targets (fuzz/targets, built as libFuzzer binaries from fuzz/libfuzzer) on
# the kept corpus, one target at a time, each for SECONDS, at the lowest CPU priority.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 10 s, every target)
#   FUZZ_TARGET_DIR   build directory (default /var/tmp/kapi-fuzz-target, outside the clone)
#   FUZZ_KEEP=1       copy the inputs that found something and the new coverage-increasing
#                     inputs into fuzz/corpus/<target>/ (the first become regression tests
#                     once fixed; keep the corpus small: minimize with `-merge=1` first)
#   FUZZ_SUMMARY=FILE also append the summary table to FILE
#
# Stable Rust only: cargo-fuzz's instrumentation flags are stable rustc options, the ASan
# runtime is not needed (`--sanitizer none`: kapi forbids unsafe code, and ASan halves the
# executions per second); with it, cargo-fuzz passes no -Z flag, so no nightly is needed.
# Debug assertions and overflow checks are on (cargo-fuzz's default), so an overflow panics.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${1:-10}"
shift || true
FUZZ_TARGET_DIR="${FUZZ_TARGET_DIR:-/var/tmp/kapi-fuzz-target}"
CARGO_FUZZ_VERSION=0.13.2

log() { printf '==> %s\n' "$*"; }

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  log "installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" --quiet
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/libfuzzer/Cargo.toml | grep -v '^kapi-fuzz$')
fi

log "building ${#targets[@]} fuzz targets (target dir $FUZZ_TARGET_DIR)"
nice -n 19 cargo fuzz build --fuzz-dir fuzz/libfuzzer --sanitizer none \
  --target-dir "$FUZZ_TARGET_DIR" --codegen-units 16 >/dev/null
bin_dir="$FUZZ_TARGET_DIR/x86_64-unknown-linux-gnu/release"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
summary="$work/summary"
printf '%-22s %6s %10s %8s %6s %7s %5s %s\n' target seconds execs exec/s cov ft new result >"$summary"
failed=()
for t in "${targets[@]}"; do
  mkdir -p "$work/$t/new" "$work/$t/found"
  log "fuzzing $t for ${SECONDS_PER_TARGET}s"
  # New inputs go to the first folder (a scratch one); the kept corpus is only read.
  # -timeout: an input that takes 10 s is a finding (a hang); -rss_limit_mb: so is 2 GiB.
  rc=0
  nice -n 19 "$bin_dir/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/$t/found/" "$work/$t/new" "fuzz/corpus/$t" \
    >"$work/$t/log" 2>&1 || rc=$?
  stat() { sed -n "s/^stat::$1: *\([0-9]*\).*/\1/p" "$work/$t/log" | tail -1; }
  # The last status line carries the coverage: `#N DONE cov: C ft: F corp: ...`.
  last="$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$work/$t/log" | tail -1 || true)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
  result=ok
  if [ "$rc" -ne 0 ]; then
    result="FINDING"
    failed+=("$t")
    tail -40 "$work/$t/log"
    for f in "$work/$t/found"/*; do
      [ -e "$f" ] || continue
      log "$t: finding $(basename "$f") (base64): $(base64 -w0 "$f")"
      if [ "${FUZZ_KEEP:-0}" = 1 ]; then cp "$f" "fuzz/corpus/$t/"; fi
    done
  fi
  if [ "${FUZZ_KEEP:-0}" = 1 ]; then cp -n "$work/$t/new"/* "fuzz/corpus/$t/" 2>/dev/null || true; fi
  printf '%-22s %6s %10s %8s %6s %7s %5s %s\n' "$t" "$SECONDS_PER_TARGET" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "$(stat new_units_added)" "$result" >>"$summary"
done

log "fuzzing summary"
cat "$summary"
if [ -n "${FUZZ_SUMMARY:-}" ]; then cat "$summary" >>"$FUZZ_SUMMARY"; fi
if [ ${#failed[@]} -gt 0 ]; then
  log "fuzz targets with findings: ${failed[*]} (reproduce: $bin_dir/<target> <file>)"
  exit 1
fi
