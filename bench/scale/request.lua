-- bench/scale's requests for wrk. SCALE_KIND says what to send: "get" (each line of the file
-- SCALE_PATHS is a path, taken in turn), "rename" (lines "folder_no<TAB>name": the folder is
-- renamed to a new name each time; the bench renames it back afterwards) or "upload" (a 1 KB
-- file of a new name and content each time into the folder path on the line). Each wrk thread
-- starts at another place in the list. At the end it prints one line, SCALE_RESULT {json},
-- with latencies in microseconds.
local kind = os.getenv("SCALE_KIND") or "get"
local key = os.getenv("SCALE_KEY") or ""
local run = os.getenv("SCALE_RUN") or "0"
local threads = {}
local lines = {}
local counter = 0

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(os.getenv("SCALE_PATHS")) do
    lines[#lines + 1] = line
  end
  counter = (tid - 1) * 7919
end

local function headers(contentType)
  local h = { ["Authorization"] = "Bearer " .. key }
  if contentType then h["Content-Type"] = contentType end
  return h
end

function request()
  counter = counter + 1
  local line = lines[(counter % #lines) + 1]
  if kind == "rename" then
    local folderNo, name = line:match("^([^\t]+)\t(.*)$")
    local body = '{"name":"' .. name .. " r" .. run .. "-" .. tid .. "-" .. counter .. '"}'
    return wrk.format("POST", "/api/v1/folders/rename/" .. folderNo, headers("application/json"), body)
  elseif kind == "upload" then
    local name = "bench-" .. run .. "-" .. tid .. "-" .. counter .. ".txt"
    local content = name .. string.rep("x", 1024 - #name)
    local body = "--SCALE\r\nContent-Disposition: form-data; name=\"file_name\"\r\n\r\n" .. name ..
      "\r\n--SCALE\r\nContent-Disposition: form-data; name=\"folder\"\r\n\r\n" .. line ..
      "\r\n--SCALE\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" .. name ..
      "\"\r\nContent-Type: text/plain\r\n\r\n" .. content .. "\r\n--SCALE--\r\n"
    return wrk.format("POST", "/api/v1/uploads", headers("multipart/form-data; boundary=SCALE"), body)
  end
  return wrk.format("GET", line, headers(nil))
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'SCALE_RESULT {"requests":%d,"p50":%d,"p99":%d,"max":%d,"status_errors":%d,"socket_errors":%d,"duration_us":%d}\n',
    summary.requests, latency:percentile(50), latency:percentile(99), latency.max, e.status,
    e.connect + e.read + e.write + e.timeout, summary.duration))
end
