-- bench/delivery's wrk script: every request is the URL given on the command line; at the end
-- one line, WRK_RESULT {json}, with the bytes read and latencies in microseconds.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"bytes":%d,"p50":%d,"p99":%d,"status_errors":%d,"socket_errors":%d,"duration_us":%d}\n',
    summary.requests, summary.bytes, latency:percentile(50), latency:percentile(99), e.status,
    e.connect + e.read + e.write + e.timeout, summary.duration))
end
