#!/usr/bin/env bash
# Starts OpenStack Swift with its S3 layer (s3api + tempauth) on loopback, for the S3 tests.
# Swift checks SigV4 signatures, part sizes and ListParts like S3. Idempotent: does nothing
# when it already answers with this configuration; a proxy started by an older version of this
# script is reloaded seamlessly (SIGUSR1: it re-executes itself, requests in flight finish).
# Prints the environment the tests read.
#
#   S3 endpoint  http://127.0.0.1:${SWIFT_PORT:-18080}
#   access key   test:tester     secret key  testing     region us-east-1
#
# Browser CORS (test instance only). Swift's s3api answers GetBucketCors/PutBucketCors with 501
# NotImplemented, so a bucket's CORS cannot be set through the S3 API. Two Swift settings make
# cross-origin PUTs to presigned part URLs work (test/s3-cors.test.ts checks both):
#   [filter:s3api]    cors_preflight_allow_origin: s3api answers the OPTIONS preflight of a
#                     presigned URL itself (without it the preflight is treated as a request
#                     signed for PUT and refused 403 SignatureDoesNotMatch);
#   [app:proxy-server] cors_allow_origin: the PUT answer carries Access-Control-Allow-Origin
#                     and Access-Control-Expose-Headers (etag among Swift's defaults), so the
#                     page can read the part's ETag (without it strict_cors_mode adds neither).
# SWIFT_CORS_ORIGINS (comma-separated, default *) chooses the origins.
set -euo pipefail
PORT=${SWIFT_PORT:-18080}
DIR=${SWIFT_DIR:-/tmp/stowage-swift}
CORS_ORIGINS=${SWIFT_CORS_ORIGINS:-*}
PY=/usr/bin/python3
MEMCACHE_PORT=$((PORT + 10))

proxy_conf() {
  cat <<CONF
[DEFAULT]
bind_ip = 127.0.0.1
devices = $DIR/devices
mount_check = false
swift_dir = $DIR
user = root
workers = 1
log_level = WARNING

bind_port = $PORT

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
cors_allow_origin = $CORS_ORIGINS

[filter:s3api]
use = egg:swift#s3api
location = us-east-1
s3_acl = false
check_bucket_owner = false
min_segment_size = 5242880
cors_preflight_allow_origin = $CORS_ORIGINS

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
}

wait_healthy() {
  for _ in $(seq 1 60); do
    curl -fsS "http://127.0.0.1:${PORT}/healthcheck" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

if curl -fsS "http://127.0.0.1:${PORT}/healthcheck" >/dev/null 2>&1; then
  echo "swift already running on ${PORT}" >&2
  # An instance started by an older version of this script: bring its proxy up to date.
  if [ -f "$DIR/proxy-server.conf" ] && ! proxy_conf | cmp -s - "$DIR/proxy-server.conf"; then
    proxy_conf > "$DIR/proxy-server.conf"
    if [ -f "$DIR/run/proxy.pid" ] && kill -0 "$(cat "$DIR/run/proxy.pid")" 2>/dev/null; then
      echo "proxy configuration changed; reloading the proxy" >&2
      kill -USR1 "$(cat "$DIR/run/proxy.pid")"
      # The healthcheck answers throughout a seamless reload; give the new process time to bind.
      sleep 3
      wait_healthy || { echo "swift proxy did not come back; see $DIR/run/proxy.log" >&2; exit 1; }
    else
      echo "proxy configuration changed, but $DIR/run/proxy.pid names no running proxy: restart swift to apply it" >&2
    fi
  fi
else
  if ! $PY -c 'import swift' 2>/dev/null || ! command -v memcached >/dev/null; then
    echo "installing OpenStack Swift from Debian packages" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      swift-proxy swift-account swift-container swift-object memcached curl) >/dev/null
  fi
  mkdir -p "$DIR/devices/d1" "$DIR/run" /etc/swift
  # tempauth keeps its tokens in memcache.
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
  proxy_conf > "$DIR/proxy-server.conf"
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
  wait_healthy || { echo "swift did not start; see $DIR/run/*.log" >&2; tail -n 20 "$DIR"/run/*.log >&2; exit 1; }
fi
echo "STOWAGE_TEST_S3_ENDPOINT=http://127.0.0.1:${PORT}"
echo "STOWAGE_TEST_S3_ACCESS_KEY_ID=test:tester"
echo "STOWAGE_TEST_S3_SECRET_ACCESS_KEY=testing"
echo "STOWAGE_TEST_S3_REGION=us-east-1"
