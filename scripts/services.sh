#!/usr/bin/env bash
# Makes sure MariaDB (127.0.0.1:3306, root without password) and Redis (127.0.0.1:6379) answer.
# Starts them when they are installed but stopped; installs them with apt when missing.
# Shared by `make run`, `make test` and .ci/run.
set -euo pipefail

log() { printf 'services: %s\n' "$*" >&2; }

mariadb_up() { mysqladmin --protocol=tcp -h127.0.0.1 -P3306 -uroot ping >/dev/null 2>&1; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

apt_install() {
  log "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq >/dev/null; APT_UPDATED=1; fi
  apt-get install -y -qq "$@" >/dev/null
}

wait_for() { # name, check function
  for _ in $(seq 1 60); do
    if "$2"; then return 0; fi
    sleep 0.5 # no readiness signal to wait on; poll the port
  done
  log "$1 did not answer within 30s"; return 1
}

ensure_mariadb() {
  command -v mysqladmin >/dev/null || apt_install mariadb-client
  if mariadb_up; then return 0; fi
  command -v mariadbd >/dev/null || apt_install mariadb-server mariadb-client
  log "starting MariaDB"
  service mariadb start >/dev/null 2>&1 || {
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
    (mysqld_safe --user=mysql >/dev/null 2>&1 &)
  }
  wait_for MariaDB mariadb_up
  # A fresh Debian install authenticates root through the unix socket only; the desk and the
  # tests connect over TCP as root without a password.
  if ! mysql --protocol=tcp -h127.0.0.1 -uroot -e 'SELECT 1' >/dev/null 2>&1; then
    mysql -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD(''); FLUSH PRIVILEGES;" || true
  fi
}

ensure_redis() {
  command -v redis-cli >/dev/null || apt_install redis-tools
  if redis_up; then return 0; fi
  command -v redis-server >/dev/null || apt_install redis-server
  log "starting Redis"
  service redis-server start >/dev/null 2>&1 || redis-server --bind 127.0.0.1 --port 6379 --daemonize yes >/dev/null
  wait_for Redis redis_up
}

ensure_mariadb
ensure_redis
# The operations-doc test pastes curl commands, as an operator would.
command -v curl >/dev/null || apt_install curl
log "MariaDB and Redis answer on 127.0.0.1"
