-- bench_inspect_stats.lua: issue 31's figure for `tdflow inspect --stats`: the statistics of
-- a 1 GiB memmap folder (8 float32 leaves of [4194304, 8]) with a warm page cache, next to
-- references over the same mapped bytes measured in the same run: memcpy of them, and
-- NumPy's min, max, mean and std over np.memmap of the same files where TD_PYTHON (default
-- python3) has numpy. Writes 1 GiB under TD_BENCH_DIR (default /tmp). Never run by tests.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local ffi = require("ffi")
local T = require("tensordict")
local best = require("best")
local C = require("tensordict.lib").C
local inspect_stats = require("tensordict.host.inspect_stats")

ffi.cdef [[ void *memcpy(void *dst, const void *src, size_t n); ]]
local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/td-bench-inspect"
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")

local ROWS, LEAVES = 4194304, 8
do -- the leaves are on disk afterwards and freed before timing
  local src = {}
  for i = 1, LEAVES do src["leaf" .. i] = T.randn(ROWS, 8):mul(100):add(1e4) end
  T.TensorDict(src, { ROWS }):memmap(dir .. "/td"):free()
end
collectgarbage()
local bytes = ROWS * 8 * 4 * LEAVES

local td = T.load_memmap(dir .. "/td")
local buf = T.empty(ROWS * 8):float()
local copy = best(5, function()
  for _, k in ipairs(td:keys()) do
    ffi.C.memcpy(C.td_tensor_data_borrow(buf.h), C.td_tensor_data_borrow(td:get(k).h), ROWS * 8 * 4)
  end
end)
local text
local stats = best(5, function() text = inspect_stats.text(dir .. "/td") end)
print(text)
print(("%-46s %7.3f s (%.2f GiB/s), memcpy of the same bytes %7.3f s, ours/memcpy %.2f (target <= 1 s)")
  :format(("inspect --stats of %d MiB (%d threads)"):format(bytes / 2 ^ 20, T.get_num_threads()), stats,
    bytes / 2 ^ 30 / stats, copy, stats / copy))

local py = os.getenv("TD_PYTHON") or "python3"
local p = io.popen(py .. [[ -c "
import sys, time, glob, numpy as np
files = sorted(glob.glob(sys.argv[1] + '/*.memmap'))
best = 1e9
for _ in range(3):
    t0 = time.perf_counter()
    for f in files:
        a = np.memmap(f, dtype=np.float32, mode='r')
        a.min(); a.max(); a.mean(); a.std()
    best = min(best, time.perf_counter() - t0)
print(best)
" ']] .. dir .. "/td' 2>/dev/null")
local np_seconds = tonumber(p:read("*a"))
p:close()
if np_seconds then
  print(("%-46s %7.3f s, ours/numpy %.2f"):format("numpy min/max/mean/std over np.memmap", np_seconds,
    stats / np_seconds))
else
  print("numpy: not available where TD_PYTHON points (no comparison)")
end
-- integers: 1 GiB of int64 labels (10 values: the bitmap road for distinct values), then
-- of ids (all distinct: every chunk stops counting at 1000)
for _, case in ipairs({ { "labels", function(t) return t:remainder(10) end }, { "ids", function(t) return t end } }) do
  local path = dir .. "/" .. case[1]
  T.TensorDict({ v = case[2](T.arange(0, 134217727)) }, { 134217728 }):memmap(path):free()
  collectgarbage()
  local int_td = T.load_memmap(path)
  local v = int_td:get("v")
  local int_copy = best(3, function()
    local from = ffi.cast("char *", C.td_tensor_data_borrow(v.h))
    for k = 0, 7 do ffi.C.memcpy(C.td_tensor_data_borrow(buf.h), from + k * 2 ^ 27, 2 ^ 27) end -- buf: 128 MiB
  end)
  local d
  local int_stats = best(3, function() d = T.describe(int_td) end)
  print(("%-46s %7.3f s, memcpy %7.3f s, ours/memcpy %.2f (distinct %s)"):format("describe of 1 GiB of int64 "
    .. case[1], int_stats, int_copy, int_stats / int_copy, tostring(d.v.distinct)))
end
os.execute("rm -rf '" .. dir .. "'")
