#!/bin/bash
# scratch: server on the 1M SQLite seed with extra node args; wrk 32c first page; loop max + GC pauses
ARGS="$1"; PORT=3999
D=${DB:-sqlite}; KEY=$(python3 -c "import json;print(json.load(open('data/scale-$D/scale.json'))['privateKey'])")
URL=''; [ $D = postgres ] && URL=postgres://postgres@127.0.0.1:5432/stowage_scale
DATABASE_URL=$URL STOWAGE_DATA_DIR=data/scale-$D HOST=127.0.0.1 PORT=$PORT LOG_LEVEL=error STOWAGE_RATE_LIMIT_API=off STOWAGE_RATE_LIMIT_UPLOAD=off STOWAGE_MAX_CONCURRENT_UPLOADS=0 STOWAGE_METRICS_LOOP_RESOLUTION_MS=1 \
  node --max-semi-space-size=64 $ARGS --import tsx src/main.ts > /tmp/probe-server.log 2>&1 &
PID=$!
for i in $(seq 1 100); do curl -sf http://127.0.0.1:$PORT/healthz >/dev/null && break; sleep 0.2; done
for i in 1 2 3; do curl -s -o /dev/null -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/api/v1/files?limit=100"; done
wrk -t1 -c32 -d5s -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/api/v1/files?limit=100" > /dev/null
curl -s http://127.0.0.1:$PORT/metrics > /dev/null; sleep 0.1; : > /tmp/probe-server.log.mark; LINES=$(wc -l < /tmp/probe-server.log)
wrk -t1 -c32 -d10s --latency -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/api/v1/files?limit=100" | grep -E "Requests/sec|99%"
curl -s http://127.0.0.1:$PORT/metrics | grep -E "^stowage_nodejs_eventloop_lag_(max|p99|p90|p50)_seconds"
grep -E "VmHWM|VmRSS" /proc/$PID/status | tr "\n" " "; kill $PID; wait $PID 2>/dev/null
tail -n +$((LINES+1)) /tmp/probe-server.log > /tmp/probe-gc.log
