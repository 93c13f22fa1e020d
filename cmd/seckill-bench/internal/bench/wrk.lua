-- claims.lua: wrk script of seckill-bench. Every request carries the next
-- user's token and address (X-Real-IP), read from a file the bench writes
-- (one "token address" line per request, in the order of the sale); thread k of n sends lines k+1, k+1+n, ... A
-- thread prints "started" before its first request; once it has sent its
-- share and read every answer it prints "drained"
-- and its connections idle, so the bench can end wrk (SIGINT) the moment
-- the sale is over instead of at -d. done() writes the counts, latency and
-- the order ids answered to $SECKILL_BENCH_WRK_OUT for the bench to check
-- against MySQL.

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local reqs, sent, answered = {}, 0, 0
-- Globals, so done() can read them from each thread.
success, sold_out, dup = 0, 0, 0
won, kinds = {}, {}
local said = false

local function drained()
  if not said and sent >= #reqs and answered >= sent then
    said = true
    io.write("drained\n")
    io.flush()
  end
end

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  local n = 0
  for line in io.lines(file) do
    if n % nthreads == id then
      -- The token may hold a space ("Bearer <JWT>"): the address is the last field.
      local tok, addr = line:match("^(.+) (%S+)$")
      reqs[#reqs + 1] = wrk.format("POST", nil, { ["Authorization"] = tok, ["X-Real-IP"] = addr })
    end
    n = n + 1
  end
  drained()
end

-- delay runs before every request a connection sends; it grants that
-- request a credit while the share lasts, and once it is handed out makes
-- the connection wait (a day) instead. request() without a credit is wrk
-- checking the script once before the run (thread 0): it gets a request but
-- spends nothing of the share, and is never sent.
local credits = 0

local began = false

function delay()
  if sent + credits < #reqs then
    if not began then
      -- The bench times the sale from the first "started" to the last
      -- "drained": wrk's own duration ends on a 100 ms tick.
      began = true
      io.write("started\n")
      io.flush()
    end
    credits = credits + 1
    return 0
  end
  return 86400000
end

function request()
  if credits == 0 then
    return reqs[1] or wrk.format("POST", nil, {})
  end
  credits = credits - 1
  sent = sent + 1
  return reqs[sent]
end

function response(status, headers, body)
  answered = answered + 1
  if status == 200 and body:find('"success":true', 1, true) then
    local id = body:match('"data":"(%d+)"')
    if id then
      success = success + 1
      won[#won + 1] = id
    else
      kinds["http 200: success without an order id"] = (kinds["http 200: success without an order id"] or 0) + 1
    end
  elseif status == 200 and body:find('"code":"sold_out"', 1, true) then
    sold_out = sold_out + 1
  elseif status == 200 and body:find('"code":"duplicate"', 1, true) then
    dup = dup + 1
  else
    local code = body:match('"code":"([%w_]+)"') or ""
    local k = "http " .. status .. " " .. code
    kinds[k] = (kinds[k] or 0) + 1
  end
  drained()
end

function done(summary, latency, requests)
  local out = assert(io.open(os.getenv("SECKILL_BENCH_WRK_OUT"), "w"))
  local e = summary.errors
  out:write(string.format("summary %d %d %d %d %d %d %d\n", summary.duration, summary.requests,
    e.connect, e.read, e.write, e.status, e.timeout))
  out:write(string.format("latency %d %d %d %d %d %.1f\n", latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean))
  for _, t in ipairs(threads) do
    out:write(string.format("counts %d %d %d\n", t:get("success"), t:get("sold_out"), t:get("dup")))
    for k, n in pairs(t:get("kinds") or {}) do
      out:write(string.format("kind %d %s\n", n, k))
    end
    for _, id in ipairs(t:get("won") or {}) do
      out:write("won " .. id .. "\n")
    end
  end
  out:close()
end
