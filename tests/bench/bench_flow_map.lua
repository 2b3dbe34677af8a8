-- bench_flow_map.lua: flow.Map's figures (issue 9), each against its reference measured
-- in the same run:
--   1. Map with 2 workers vs 1 on a CPU-bound function over 1M rows (goal >= 1.8x;
--      needs 2 free cores: kernels run single-threaded here so workers are the only
--      parallelism).
--   2. shipping a 4 MiB batch to a worker and back with the identity function vs
--      memcpy of the same bytes twice (goal >= 0.5x).
-- Usage: luajit tests/bench/bench_flow_map.lua  (TENSORDICT_LIB selects the build)
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local ffi = require("ffi")
local Map = require("tensordict.flow.map").Map
local best_of = require("best")

T.set_num_threads(1)

-- Best of reps runs, each after a full collection (not timed).
local function best(reps, body) return best_of(reps, body, collectgarbage) end

-- Pushes every batch through an opened Map and drains it; returns the seconds.
local function through(node, batches)
  local n = 0
  local function emit() n = n + 1 end
  node:open({ seed = 0 })
  -- one warm-up batch per worker: regions are sized and faulted in once
  for i = 1, 2 do node:push(batches[i], emit) end
  node:drain(emit)
  local t = best(3, function()
    for i = 1, #batches do node:push(batches[i], emit) end
    node:drain(emit)
  end)
  node:close()
  return t
end

-------------------------------------------------------- 1. CPU-bound, 2 workers vs 1
do
  local ROWS, BATCH = 1000000, 50000
  local td = T.TensorDict({ x = T.rand(ROWS, 4) }, { ROWS })
  local batches = {}
  for i = 1, ROWS / BATCH do batches[i] = td[{ { (i - 1) * BATCH + 1, i * BATCH } }] end
  local function heavy(b)
    local x = b.x
    for _ = 1, 12 do x = (x:sin() + 1.5):sqrt():exp():log() end
    return T.TensorDict({ y = x:sum(2) }, b:batch_size())
  end
  local one = through(Map { fn = heavy, workers = 1 }, batches)
  local two = through(Map { fn = heavy, workers = 2 }, batches)
  print(("Map CPU-bound, 1M rows: 1 worker %8.1f ms  2 workers %8.1f ms  speedup %5.2fx (goal >= 1.8)")
    :format(one * 1e3, two * 1e3, one / two))
end

------------------------------------------- 2. shipping 4 MiB there and back, identity
do
  local N = 40
  local batch = T.TensorDict({ x = T.rand(131072, 4), y = T.rand(131072, 4) }, { 131072 }) -- 4 MiB
  local bytes = 131072 * 4 * 4 * 2
  local batches = {}
  for i = 1, N do batches[i] = batch end
  local map = through(Map { fn = function(b) return b end, workers = 1 }, batches) / N
  local src = ffi.new("char[?]", bytes)
  local a, b = ffi.new("char[?]", bytes), ffi.new("char[?]", bytes)
  ffi.fill(src, bytes, 1)
  ffi.copy(a, src, bytes)
  ffi.copy(b, a, bytes)
  local copy = best(5, function()
    for _ = 1, N do
      ffi.copy(a, src, bytes)
      ffi.copy(b, a, bytes)
    end
  end) / N
  print(("Map shipping 4 MiB, identity: %7.3f ms per batch  memcpy x2 %7.3f ms  ratio %5.2fx (goal >= 0.5)")
    :format(map * 1e3, copy * 1e3, copy / map))
end
