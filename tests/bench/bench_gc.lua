-- bench_gc.lua: GC and allocation over long loops (issue 11): 1M small ops with no
-- collectgarbage() from us, sampling resident memory (/proc/self/statm) and the time of
-- each block of 100k iterations. Goals: resident memory flat (within +-5% of its value
-- after warm-up, the first two blocks) and no slowdown (the last block's time within
-- 10% of the first one after warm-up; times are wall clock on a shared machine, read
-- the trend, not one figure). TD_BENCH_QUICK=1 runs 200k iterations (CI-sized).
-- Run by 'make bench'; never by tests (memory_spec checks a loose bound on memory).
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local now = require("clock")

local quick = os.getenv("TD_BENCH_QUICK") == "1"
local ITERS, BLOCK, WARM = quick and 200000 or 1000000, quick and 20000 or 100000, 2

local function resident_mib()
  local f = assert(io.open("/proc/self/statm"))
  local _, pages = f:read("*n", "*n")
  f:close()
  return pages * 4096 / 1048576
end

local function run(name, body)
  local rss, times = {}, {}
  for b = 1, ITERS / BLOCK do
    local t0 = now()
    body(BLOCK)
    times[b] = now() - t0
    rss[b] = resident_mib()
  end
  local lo, hi = math.huge, 0
  for b = WARM + 1, #rss do lo, hi = math.min(lo, rss[b]), math.max(hi, rss[b]) end
  local ref = rss[WARM]
  local slow = times[#times] / times[WARM + 1]
  local rss_txt, ms_txt = {}, {}
  for b = 1, #rss do
    rss_txt[b] = ("%.0f"):format(rss[b])
    ms_txt[b] = ("%.0f"):format(times[b] * 1e3)
  end
  print(("%-40s RSS after warm-up %.1f MiB, then %.1f..%.1f (%+.1f%%..%+.1f%%, goal +-5%%); "
    .. "last block / first after warm-up %.2f (goal <= 1.10)"):format(name, ref, lo, hi,
    (lo / ref - 1) * 100, (hi / ref - 1) * 100, slow))
  print(("  per %dk: RSS MiB %s"):format(BLOCK / 1000, table.concat(rss_txt, " ")))
  print(("  per %dk: ms      %s"):format(BLOCK / 1000, table.concat(ms_txt, " ")))
end

for _, threads in ipairs({ 1, 2 }) do
  T.set_num_threads(threads)
  print(("-- %d thread%s, %d iterations"):format(threads, threads > 1 and "s" or "", ITERS))
  local a, b = T.rand(100), T.rand(100)
  run("(a + b):mul_(2), 100 float32", function(n)
    for _ = 1, n do (a + b):mul_(2) end
  end)
  local td = T.TensorDict({ obs = T.rand(32, 4), action = T.rand(32, 2), reward = T.rand(32),
    done = T.zeros({ 32 }, "bool") }, { 32 })
  run("td[i], 4 leaves of batch [32]", function(n)
    for i = 1, n do local _ = td[i % 32 + 1] end
  end)
  run("td[i].obs + 1, 4 leaves", function(n)
    for i = 1, n do local _ = td[i % 32 + 1].obs + 1 end
  end)
end

-- Mid-size results (issue 29): resident memory against the loop's working set, what it
-- would hold with every result freed at once (its inputs and one result). A dropped
-- result waits for the next collection, and collections come every 32-64 MiB of garbage
-- (tensor/memory.lua: a full collection costs ~0.2 ms with the library loaded, so
-- sooner ones cost more time than the colder memory they save), so the loop holds up
-- to that much garbage on top: flat, but well above 2x its working set.
do
  T.set_num_threads(1)
  local n_mid = quick and 4000 or 40000
  local a, b = T.rand(100000), T.rand(100000)
  collectgarbage()
  collectgarbage()
  local start = resident_mib()
  local working = 3 * 100000 * 4 / 1048576
  local peak = start
  local t0 = now()
  for i = 1, n_mid do
    local _ = (a + b):exp()
    if i % 500 == 0 then peak = math.max(peak, resident_mib()) end
  end
  local per_op = (now() - t0) / n_mid * 1e6
  print(("(a + b):exp(), 100k float32, %d iterations, dropped: %.1f us each; resident above the start "
    .. "%.1f MiB at most, %.0fx the working set (a, b and one result, %.1f MiB; goal 2x)")
    :format(n_mid, per_op, peak - start, (peak - start) / working, working))
end
