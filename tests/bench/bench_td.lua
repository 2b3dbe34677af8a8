-- bench_td.lua: the TensorDict figures of issue 4, in ns per call, with Python
-- tensordict's time for the same workload where it is installed (TD_PYTHON, default
-- python3; tests/bench/bench_td_python.py) and memcpy for the collector-style write.
-- Run by 'make bench'; never by the tests.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local ffi = require("ffi")
local T = require("tensordict")

ffi.cdef [[ void *memcpy(void *dst, const void *src, size_t n); ]]

local ns_per_call = require("timing") -- best of 5, ns per call

-- Python tensordict's figures (seconds per call), when it runs here.
local python = {}
do
  local py = os.getenv("TD_PYTHON") or "python3"
  local pipe = io.popen(py .. " tests/bench/bench_td_python.py 2>/dev/null")
  if pipe then
    for line in pipe:lines() do
      local name, value = line:match("^(%S+)%s+(%S+)$")
      if name and tonumber(value) then python[name] = tonumber(value) end
    end
    pipe:close()
  end
end

local function report(name, ns, target, pyname)
  local py = python[pyname]
  local vs = py and ("python %9.1f ns, ours/python %.3f"):format(py * 1e9, ns / (py * 1e9))
    or "python tensordict not installed"
  print(("%-40s %9.1f ns/call (target <= %s)  %s"):format(name, ns, target, vs))
end

local function leaves(n, shape)
  local src = {}
  for i = 1, n do src["k" .. i] = T.zeros(shape) end
  return src
end

local src16, src256 = leaves(16, { 32, 4 }), leaves(256, { 32, 4 })
report("construct 16 leaves, batch {32}", ns_per_call(100000, function(n)
  for _ = 1, n do local _ = T.TensorDict(src16, { 32 }) end
end), "1500", "construct16")
report("construct 256 leaves, batch {32}", ns_per_call(5000, function(n)
  for _ = 1, n do local _ = T.TensorDict(src256, { 32 }) end
end), "15000", "construct256")

local td = T.TensorDict(src16, { 32 })
report("td[i], 16 leaves", ns_per_call(200000, function(n)
  for i = 1, n do local _ = td[i % 32 + 1] end
end), "1000", "index_int16")
report("td[{{1,16}}], 16 leaves", ns_per_call(200000, function(n)
  local r = { 1, 16 }
  local key = { r }
  for _ = 1, n do local _ = td[key] end
end), "1500", "index_range16")
report("td:get(\"k1\")", ns_per_call(2000000, function(n)
  local s = 0
  for _ = 1, n do s = s + (td:get("k1") and 1 or 0) end
  return s
end), "50", "get")
local same = T.zeros(32, 4)
report("td:set existing key", ns_per_call(1000000, function(n)
  for _ = 1, n do td:set("k1", same) end
end), "150", "set_existing")
local other = T.TensorDict(leaves(16, { 32, 4 }), { 32 })
report("td:update_(other), 16 leaves", ns_per_call(200000, function(n)
  for _ = 1, n do td:update_(other) end
end), "1000", "update_16")

if T.stack then
  local tds = {}
  for j = 1, 8 do tds[j] = T.TensorDict(leaves(20, { 64 })) end
  local ok = pcall(T.stack, tds, 1)
  if ok then
    report("T.stack 8 x 20 leaves of [64]", ns_per_call(20000, function(n)
      for _ = 1, n do local _ = T.stack(tds, 1) end
    end), "10000", "stack8x20")
  end
end

-- Collector-style write: out[{{t, t}}] = step, batch 4096, T = 8, 25 leaves of [16].
do
  local steps, B = 8, 4096
  local out_src, step_src = {}, {}
  for i = 1, 25 do
    out_src["k" .. i] = T.zeros(steps, B, 16)
    step_src["k" .. i] = T.rand(1, B, 16)
  end
  local out = T.TensorDict(out_src, { steps, B })
  local step = T.TensorDict(step_src, { 1, B })
  local keys = {}
  for t = 1, steps do keys[t] = { { t, t } } end
  local write_ns = ns_per_call(200, function(n)
    for i = 1, n do out[keys[(i - 1) % steps + 1]] = step end
  end)
  -- The reference: memcpy of the same bytes into a buffer of the same size as `out`,
  -- cycling through the same 8 slots (both buffers from the library's allocator, as
  -- the leaves are), so both sides pay the same cache and TLB misses.
  local bytes = 25 * B * 16 * 4
  local dst, src = T.empty({ steps * bytes }, "uint8"), T.empty({ bytes }, "uint8")
  dst:fill_(1)
  src:fill_(2)
  local C = require("tensordict.lib").C
  local dp = ffi.cast("uint8_t *", C.td_tensor_data_borrow(dst.h))
  local sp = C.td_tensor_data_borrow(src.h)
  local copy_ns = ns_per_call(200, function(n)
    for i = 1, n do ffi.C.memcpy(dp + ((i - 1) % steps) * bytes, sp, bytes) end
  end)
  local py = python.collector_write
  print(("%-40s %9.1f us, memcpy %9.1f us, memcpy/ours %.2f (target >= 0.8)%s"):format(
    "out[{{t,t}}] = step (25 x [4096,16])", write_ns / 1e3, copy_ns / 1e3, copy_ns / write_ns,
    py and ("  python %.1f us, ours/python %.3f"):format(py * 1e6, write_ns / (py * 1e9)) or ""))
end
