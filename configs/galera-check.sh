#!/bin/sh
# HAProxy's health check of a Galera node (configs/haproxy.cfg; install as
# /etc/haproxy/galera-check.sh, executable): healthy when the node answers SQL and is Synced.
# HAProxy passes the server's address as $3 and its port as $4. The check user needs no
# privilege: CREATE USER 'haproxy_check'@'<haproxy host>' IDENTIFIED BY '…'; its password goes in
# /etc/haproxy/galera-check.cnf ([client] user=haproxy_check password=…), readable by HAProxy only.
state=$(mysql --defaults-extra-file=/etc/haproxy/galera-check.cnf --protocol=tcp -h"$3" -P"$4" \
  --connect-timeout=1 -N -B -e "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2)
[ "$state" = Synced ]
