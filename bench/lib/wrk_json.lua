-- wrk script for bench/rest.py: method, body and token from the environment; prints one
-- JSON line with the totals and latency percentiles (microseconds) when the run ends.
wrk.method = os.getenv("WRK_METHOD") or "GET"
local body = os.getenv("WRK_BODY")
if body ~= nil and body ~= "" then
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
end
local token = os.getenv("WRK_TOKEN")
if token ~= nil and token ~= "" then
  wrk.headers["Authorization"] = "Token " .. token
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "errors": %d, "status_errors": %d, ' ..
    '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
