#!/usr/bin/env bash
# scripts/cluster.sh up DIR | down DIR | status DIR
#
# Starts, on loopback and inside DIR, the clusters the desk is tested on (docs/cluster.md):
#   - a three-node MariaDB Galera cluster: node N answers MySQL on 127.0.0.1:2306N (23061-23063),
#     talks group communication on 2(4+N)567, IST on 2(4+N)568, SST (rsync) on 2(4+N)569 (25567,
#     26567, 27567 and one and two above); node 1 bootstraps;
#   - HAProxy in front: 127.0.0.1:23060 sends every connection to node 1 while it is Synced, and
#     to node 2, then node 3 (backup servers) when it is not;
#   - Redis: a primary on 6380, a replica on 6381 and three Sentinels on 26379-26381 watching the
#     primary under the name `fxdesk`.
# Every port is below the kernel's ephemeral range (32768 and up by default): a port a
# process nearby was handed for an outgoing connection or a port-0 listener — another test's —
# cannot take a node's IST port while it rejoins. Ports can be moved with CLUSTER_PORT_SHIFT
# (added to every port). It never touches the shared
# MariaDB on 3306 or Redis on 6379. Missing packages are installed with apt. `up` on a running
# cluster starts only what is down; `down` stops only the processes whose pid files are in DIR
# and removes their data, so the next `up` starts fresh.
set -euo pipefail

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ $# -eq 2 ] || die "usage: $0 up|down|status DIR"
CMD=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
SHIFT=${CLUSTER_PORT_SHIFT:-0}

HOST=127.0.0.1
HAPROXY_PORT=$((23060 + SHIFT))
NODES=(1 2 3)
mysql_port() { echo $((23060 + $1 + SHIFT)); }
gcomm_port() { echo $((24567 + $1 * 1000 + SHIFT)); }
REDIS_PRIMARY=$((6380 + SHIFT))
REDIS_REPLICA=$((6381 + SHIFT))
SENTINELS=($((26379 + SHIFT)) $((26380 + SHIFT)) $((26381 + SHIFT)))
MASTER=fxdesk
GALERA_LIB=/usr/lib/galera/libgalera_smm.so
# As root, the nodes run as mysql: the rsync daemon that receives an SST runs as nobody when
# started by root, and could not write a root-owned datadir.
RUN_AS=$(id -un)
[ "$(id -u)" = 0 ] && RUN_AS=mysql

apt_install() {
  log "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq >/dev/null; APT_UPDATED=1; fi
  apt-get install -y -qq "$@" >/dev/null
}

ensure_packages() {
  local want=()
  command -v mariadbd >/dev/null || want+=(mariadb-server)
  command -v mysql >/dev/null || want+=(mariadb-client)
  [ -f "$GALERA_LIB" ] || want+=(galera-4)
  command -v rsync >/dev/null || want+=(rsync)
  command -v haproxy >/dev/null || want+=(haproxy)
  command -v redis-server >/dev/null || want+=(redis-server)
  command -v redis-cli >/dev/null || want+=(redis-tools)
  # Sentinel is redis-server --sentinel; the package brings its own unit and config only.
  if [ ${#want[@]} -gt 0 ]; then apt_install "${want[@]}"; fi
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_until() { # seconds, description, command...
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    # Nothing signals readiness but the port answering; poll it.
    [ $SECONDS -lt $deadline ] || { log "$what: not ready within ${secs}s"; return 1; }
    sleep 0.2
  done
}

node_dir() { echo "$DIR/galera/n$1"; }
node_sql() { mysql --protocol=tcp -h$HOST -P"$(mysql_port "$1")" -uroot -N -B -e "$2"; }
node_synced() { [ "$(node_sql "$1" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2)" = Synced ]; }

write_node_cnf() {
  local n=$1 d; d=$(node_dir "$n")
  local members=() m
  for m in "${NODES[@]}"; do members+=("$HOST:$(gcomm_port "$m")"); done
  local gp; gp=$(gcomm_port "$n")
  cat >"$d/my.cnf" <<EOF
[mysqld]
datadir=$d/data
socket=$d/mysqld.sock
pid-file=$d/mysqld.pid
log-error=$d/error.log
port=$(mysql_port "$n")
bind-address=$HOST
skip-name-resolve=OFF
user=$RUN_AS
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=2
max_connections=200
wsrep_on=ON
wsrep_provider=$GALERA_LIB
wsrep_cluster_name=fxdesk-test
wsrep_cluster_address=gcomm://$(IFS=,; echo "${members[*]}")
wsrep_node_name=n$n
wsrep_node_address=$HOST:$gp
wsrep_provider_options="base_host=$HOST;base_port=$gp;ist.recv_addr=$HOST:$((gp + 1));gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S"
wsrep_sst_method=rsync
wsrep_sst_receive_address=$HOST:$((gp + 2))
wsrep_slave_threads=1
EOF
}

start_node() { # n, extra args...
  local n=$1; shift
  local d; d=$(node_dir "$n")
  if alive "$d/mysqld.pid"; then return 0; fi
  mkdir -p "$d/data"
  write_node_cnf "$n"
  [ "$RUN_AS" = "$(id -un)" ] || chown -R "$RUN_AS": "$d"
  if [ ! -d "$d/data/mysql" ]; then
    # root over TCP without a password, as the desk's tests connect to the shared server.
    mariadb-install-db --defaults-file="$d/my.cnf" --auth-root-authentication-method=normal \
      --skip-test-db >"$d/install.log" 2>&1 || { cat "$d/install.log" >&2; die "install node $n"; }
  fi
  log "starting Galera node $n on $HOST:$(mysql_port "$n") $*"
  (setsid mariadbd --defaults-file="$d/my.cnf" "$@" >>"$d/stdout.log" 2>&1 &)
  wait_until 120 "Galera node $n" node_synced "$n" || { tail -30 "$d/error.log" >&2; return 1; }
}

start_galera() {
  local running=0 n
  for n in "${NODES[@]}"; do alive "$(node_dir "$n")/mysqld.pid" && running=1; done
  if [ $running = 0 ]; then
    rm -rf "$DIR/galera"
    mkdir -p "$(node_dir 1)"
    start_node 1 --wsrep-new-cluster
    # HAProxy's check logs in as this user; it needs no password and no privilege.
    node_sql 1 "CREATE USER IF NOT EXISTS 'haproxy_check'@'%'; CREATE USER IF NOT EXISTS 'haproxy_check'@'localhost'"
  fi
  for n in "${NODES[@]}"; do
    mkdir -p "$(node_dir "$n")"
    start_node "$n"
  done
}

start_haproxy() {
  local d=$DIR/haproxy
  mkdir -p "$d"
  if alive "$d/haproxy.pid"; then return 0; fi
  # A node is healthy when it answers SQL and is Synced: a node cut off from the others keeps
  # answering logins (so mysql-check alone would keep sending writes there) but refuses statements.
  cat >"$d/check.sh" <<'EOF'
#!/bin/sh
# HAProxy external check: $3 is the server's address, $4 its port.
state=$(mysql --protocol=tcp -h"$3" -P"$4" -uhaproxy_check --connect-timeout=1 -N -B \
  -e "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2)
[ "$state" = Synced ]
EOF
  chmod +x "$d/check.sh"
  cat >"$d/haproxy.cfg" <<EOF
global
  daemon
  pidfile $d/haproxy.pid
  maxconn 512
  external-check
  insecure-fork-wanted
  # `echo "show stat" | socat stdio unix-connect:$d/haproxy.sock` shows each node's check.
  stats socket $d/haproxy.sock mode 600 level admin

defaults
  mode tcp
  timeout connect 2s
  timeout client 1h
  timeout server 1h
  timeout check 2s

# One writer at a time: node 1 while it is healthy, else node 2, else node 3. Connections to a
# node marked down are cut, so the desk reconnects to the next one instead of writing on. The
# one-entry stick table keeps the writer where it is when a failed node comes back (no fail-back
# while old connections still write on the other node).
listen galera-write
  bind $HOST:$HAPROXY_PORT
  stick-table type integer size 1
  stick on int(1)
  option external-check
  external-check path "/usr/bin:/bin"
  external-check command $d/check.sh
  default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions
  server n1 $HOST:$(mysql_port 1) check
  server n2 $HOST:$(mysql_port 2) check backup
  server n3 $HOST:$(mysql_port 3) check backup
EOF
  log "starting HAProxy on $HOST:$HAPROXY_PORT"
  haproxy -f "$d/haproxy.cfg" >"$d/haproxy.log" 2>&1
  wait_until 30 "HAProxy" mysql --protocol=tcp -h$HOST -P"$HAPROXY_PORT" -uroot -e 'SELECT 1'
}

start_redis() {
  local d=$DIR/redis port role
  mkdir -p "$d"
  for port in "$REDIS_PRIMARY" "$REDIS_REPLICA"; do
    alive "$d/redis-$port.pid" && continue
    role=""
    [ "$port" = "$REDIS_REPLICA" ] && role="replicaof $HOST $REDIS_PRIMARY"
    mkdir -p "$d/$port"
    cat >"$d/redis-$port.conf" <<EOF
bind $HOST
port $port
daemonize yes
pidfile $d/redis-$port.pid
logfile $d/redis-$port.log
dir $d/$port
save ""
appendonly no
$role
EOF
    log "starting Redis on $HOST:$port${role:+ (replica)}"
    redis-server "$d/redis-$port.conf"
  done
  for port in "${SENTINELS[@]}"; do
    alive "$d/sentinel-$port.pid" && continue
    # Sentinel rewrites its own config file as it learns the topology.
    cat >"$d/sentinel-$port.conf" <<EOF
bind $HOST
port $port
daemonize yes
pidfile $d/sentinel-$port.pid
logfile $d/sentinel-$port.log
dir $d
sentinel resolve-hostnames no
sentinel monitor $MASTER $HOST $REDIS_PRIMARY 2
sentinel down-after-milliseconds $MASTER 2000
sentinel failover-timeout $MASTER 10000
sentinel parallel-syncs $MASTER 1
EOF
    log "starting Sentinel on $HOST:$port"
    redis-server "$d/sentinel-$port.conf" --sentinel
  done
  # After a Sentinel failover the replica is on the other port: either one's link being up will do.
  wait_until 30 "Redis replica" sh -c "redis-cli -h $HOST -p $REDIS_REPLICA info replication | grep -q 'master_link_status:up' ||
    redis-cli -h $HOST -p $REDIS_PRIMARY info replication | grep -q 'master_link_status:up'"
  wait_until 30 "Sentinels" sh -c "redis-cli -h $HOST -p ${SENTINELS[0]} sentinel sentinels $MASTER | grep -c '^ip$' | grep -q 2"
}

print_endpoints() {
  local s
  s=$(printf "$HOST:%s," "${SENTINELS[@]}")
  cat <<EOF
# Galera nodes: $HOST:$(mysql_port 1) $HOST:$(mysql_port 2) $HOST:$(mysql_port 3) (root, no password)
# HAProxy write endpoint: $HOST:$HAPROXY_PORT
# Redis primary $HOST:$REDIS_PRIMARY, replica $HOST:$REDIS_REPLICA, Sentinels ${s%,} (master $MASTER)
export FXDESK_GALERA=$HOST:$(mysql_port 1),$HOST:$(mysql_port 2),$HOST:$(mysql_port 3)
export FXDESK_GALERA_WRITE=$HOST:$HAPROXY_PORT
export FXDESK_SENTINEL_URL='redis-sentinel://${s%,}/0?master=$MASTER'
export FXDESK_MYSQL_DSN='root@tcp($HOST:$HAPROXY_PORT)/fxdesk'
export FXDESK_REDIS_URL='redis-sentinel://${s%,}/0?master=$MASTER'
EOF
}

stop_pidfile() { # pid file, name
  local pidfile=$1 pid i
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $2 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    # The data is thrown away below, so a slow shutdown is not waited for.
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

down() {
  local n port
  stop_pidfile "$DIR/haproxy/haproxy.pid" HAProxy
  for port in "${SENTINELS[@]}"; do stop_pidfile "$DIR/redis/sentinel-$port.pid" "Sentinel $port"; done
  for port in "$REDIS_REPLICA" "$REDIS_PRIMARY"; do stop_pidfile "$DIR/redis/redis-$port.pid" "Redis $port"; done
  for n in 3 2 1; do stop_pidfile "$(node_dir "$n")/mysqld.pid" "Galera node $n"; done
  rm -rf "$DIR/galera" "$DIR/redis" "$DIR/haproxy"
  log "down"
}

status() {
  local n port
  for n in "${NODES[@]}"; do
    printf 'galera n%s %s:%s %s\n' "$n" $HOST "$(mysql_port "$n")" "$(node_sql "$n" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2 || true)"
  done
  alive "$DIR/haproxy/haproxy.pid" && echo "haproxy $HOST:$HAPROXY_PORT up" || echo "haproxy down"
  for port in "$REDIS_PRIMARY" "$REDIS_REPLICA"; do
    printf 'redis %s:%s %s\n' $HOST "$port" "$(redis-cli -h $HOST -p "$port" role 2>/dev/null | head -1 || true)"
  done
  printf 'sentinel master %s\n' "$(redis-cli -h $HOST -p "${SENTINELS[0]}" sentinel get-master-addr-by-name $MASTER 2>/dev/null | paste -sd: || true)"
}

case $CMD in
up)
  ensure_packages
  start_galera
  start_haproxy
  start_redis
  print_endpoints
  ;;
down) down ;;
status) status ;;
*) die "usage: $0 up|down|status DIR" ;;
esac
