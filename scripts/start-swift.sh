#!/usr/bin/env bash
# Starts OpenStack Swift with its S3 layer (s3api + tempauth) on loopback, for the S3 tests.
# Swift checks SigV4 signatures, part sizes and ListParts like S3. Idempotent: does nothing
# when it already answers. Prints the environment the tests read.
#
#   S3 endpoint  http://127.0.0.1:${SWIFT_PORT:-18080}
#   access key   test:tester     secret key  testing     region us-east-1
set -euo pipefail
PORT=${SWIFT_PORT:-18080}
DIR=${SWIFT_DIR:-/tmp/stowage-swift}
PY=/usr/bin/python3

if curl -fsS "http://127.0.0.1:${PORT}/healthcheck" >/dev/null 2>&1; then
  echo "swift already running on ${PORT}" >&2
else
  if ! $PY -c 'import swift' 2>/dev/null || ! command -v memcached >/dev/null; then
    echo "installing OpenStack Swift from Debian packages" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      swift-proxy swift-account swift-container swift-object memcached curl) >/dev/null
  fi
  mkdir -p "$DIR/devices/d1" "$DIR/run" /etc/swift
  # tempauth keeps its tokens in memcache.
  MEMCACHE_PORT=$((PORT + 10))
  memcached -d -u root -l 127.0.0.1 -p "$MEMCACHE_PORT" -m 64 -P "$DIR/run/memcached.pid" || true
  # Swift reads its hash prefix/suffix from this fixed path.
  if [ ! -f /etc/swift/swift.conf ]; then
    printf '[swift-hash]\nswift_hash_path_prefix = stowage-test\nswift_hash_path_suffix = stowage-test\n\n[storage-policy:0]\nname = gold\ndefault = yes\n' > /etc/swift/swift.conf
  fi
  common="[DEFAULT]
bind_ip = 127.0.0.1
devices = $DIR/devices
mount_check = false
swift_dir = $DIR
user = root
workers = 1
log_level = WARNING
"
  printf '%s\nbind_port = %s\n\n[pipeline:main]\npipeline = account-server\n\n[app:account-server]\nuse = egg:swift#account\n' "$common" $((PORT + 2)) > "$DIR/account-server.conf"
  printf '%s\nbind_port = %s\n\n[pipeline:main]\npipeline = container-server\n\n[app:container-server]\nuse = egg:swift#container\n' "$common" $((PORT + 1)) > "$DIR/container-server.conf"
  printf '%s\nbind_port = %s\n\n[pipeline:main]\npipeline = object-server\n\n[app:object-server]\nuse = egg:swift#object\n' "$common" $((PORT + 3)) > "$DIR/object-server.conf"
  cat > "$DIR/proxy-server.conf" <<CONF
$common
bind_port = $PORT

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:s3api]
use = egg:swift#s3api
location = us-east-1
s3_acl = false
check_bucket_owner = false
min_segment_size = 5242880

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
user_other_user = otherpass .admin

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$MEMCACHE_PORT

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
CONF
  if [ ! -f "$DIR/object.ring.gz" ]; then
    for pair in "account:$((PORT + 2))" "container:$((PORT + 1))" "object:$((PORT + 3))"; do
      ring=${pair%%:*}; port=${pair##*:}
      (cd "$DIR" && $PY /usr/bin/swift-ring-builder "$ring.builder" create 10 1 1 >/dev/null \
        && $PY /usr/bin/swift-ring-builder "$ring.builder" add "r1z1-127.0.0.1:${port}/d1" 100 >/dev/null \
        && $PY /usr/bin/swift-ring-builder "$ring.builder" rebalance >/dev/null) || true
    done
  fi
  for server in account container object proxy; do
    nohup $PY "/usr/bin/swift-${server}-server" "$DIR/${server}-server.conf" > "$DIR/run/${server}.log" 2>&1 &
    echo $! > "$DIR/run/${server}.pid"
  done
  for _ in $(seq 1 60); do
    curl -fsS "http://127.0.0.1:${PORT}/healthcheck" >/dev/null 2>&1 && break
    sleep 0.5
  done
  curl -fsS "http://127.0.0.1:${PORT}/healthcheck" >/dev/null || { echo "swift did not start; see $DIR/run/*.log" >&2; tail -n 20 "$DIR"/run/*.log >&2; exit 1; }
fi
echo "STOWAGE_TEST_S3_ENDPOINT=http://127.0.0.1:${PORT}"
echo "STOWAGE_TEST_S3_ACCESS_KEY_ID=test:tester"
echo "STOWAGE_TEST_S3_SECRET_ACCESS_KEY=testing"
echo "STOWAGE_TEST_S3_REGION=us-east-1"
