-- bench_memmap_sample.lua: replay-buffer sampling (issue 11): buf[idx] of 1024 random
-- rows from a 4M-row memmap, next to its reference measured in the same run: the same
-- rows copied one by one with memcpy from the mapping. Target: memcpy/ours >= 0.5.
-- Three cases, at 1 and 2 threads:
--   1 leaf, the same idx every call   (rows cache-hot: the overheads show)
--   1 leaf, a fresh idx every call    (rows from memory: what a replay buffer pays)
--   4 leaves, obs [64] f32, action [8] f32, reward f32, done bool, the same idx
-- "ours" drops each sample to the GC, as user code does; "freed" calls :free() on it
-- (the cost without the collector). Writes ~1.2 GiB under TD_BENCH_DIR (default /tmp) and
-- needs ~2.5 GiB of memory.
-- TD_BENCH_QUICK=1 uses 256k rows. Run by 'make bench'; never by tests.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local ffi = require("ffi")
local T = require("tensordict")
local C = require("tensordict.lib").C
local now = require("clock")

ffi.cdef [[ void *memcpy(void *dst, const void *src, size_t n); ]]
local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/td-bench-memmap-sample"
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")

local ROWS = os.getenv("TD_BENCH_QUICK") == "1" and 262144 or 4194304
local PICK, CALLS, RUNS = 1024, 200, 9
-- Made as users make one, from an in-memory TensorDict saved with memmap_like (its 1.2 GiB
-- are garbage once saved: the GC's pace after freeing them is part of what is measured).
local buffer = T.TensorDict({ obs = T.empty(ROWS, 64), action = T.empty(ROWS, 8), reward = T.empty(ROWS),
  done = T.empty({ ROWS }, "bool") }, { ROWS }):memmap_like(dir .. "/buf")
for _, k in ipairs({ "obs", "action", "reward", "done" }) do buffer[k]:fill_(1) end -- resident
local one = buffer:select("obs")

-- Median over RUNS of CALLS calls each, in us per call; fn(i) is call i of a run.
local function median_us(fn)
  for i = 1, CALLS do fn(i) end -- warm-up (the JIT, the block cache)
  local times = {}
  for r = 1, RUNS do
    local t0 = now()
    for i = 1, CALLS do fn(i) end
    times[r] = (now() - t0) / CALLS * 1e6
  end
  table.sort(times)
  return times[(RUNS + 1) / 2]
end

-- 16 index tensors, reused in turn by both sides of the fresh-idx case.
local idxs, picks = {}, {}
for j = 1, 16 do
  idxs[j] = T.randint(1, ROWS, { PICK }, "int64")
  picks[j] = idxs[j]:totable()
end

-- The reference: the chosen rows of each leaf memcpy'd one by one into one buffer.
local out = T.empty(PICK, 64)
local dst = ffi.cast("char *", C.td_tensor_data_borrow(out.h))
local leaf_rows = {}
for _, k in ipairs({ "obs", "action", "reward", "done" }) do
  local x = buffer[k]
  leaf_rows[#leaf_rows + 1] = { ffi.cast("const char *", C.td_tensor_data_borrow(x.h)),
    x:numel() / ROWS * x.h.itemsize }
end
local function memcpy_rows(p, leaves)
  for l = 1, leaves do
    local src, row = leaf_rows[l][1], leaf_rows[l][2]
    for r = 1, PICK do ffi.C.memcpy(dst + (r - 1) * row, src + (p[r] - 1) * row, row) end
  end
end

local function report(name, ours, freed, ref)
  print(("%-46s ours %7.1f us (freed %7.1f), memcpy rows %7.1f us, memcpy/ours %.2f (target >= 0.5)")
    :format(name, ours, freed, ref, ref / ours))
end

for _, threads in ipairs({ 1, 2 }) do
  T.set_num_threads(threads)
  print(("-- %d thread%s, %d rows of [64] float32 (%d MiB)"):format(threads, threads > 1 and "s" or "",
    ROWS, ROWS * 256 / 1048576))
  local idx, p = idxs[1], picks[1]
  report("1 leaf, the same idx",
    median_us(function() local _ = one[idx] end),
    median_us(function() one[idx]:free() end),
    median_us(function() memcpy_rows(p, 1) end))
  report("1 leaf, a fresh idx per call",
    median_us(function(i) local _ = one[idxs[i % 16 + 1]] end),
    median_us(function(i) one[idxs[i % 16 + 1]]:free() end),
    median_us(function(i) memcpy_rows(picks[i % 16 + 1], 1) end))
  report("4 leaves (obs, action, reward, done)",
    median_us(function() local _ = buffer[idx] end),
    median_us(function() buffer[idx]:free() end),
    median_us(function() memcpy_rows(p, 4) end))
end
os.execute("rm -rf '" .. dir .. "'")
