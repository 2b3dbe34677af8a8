-- memory.lua: tells the Lua GC about C bytes it cannot see.
-- A tensor handle is a few bytes to the collector however much storage it pins, so a
-- loop making big temporaries would grow without bound. After each allocation we
-- compare the bytes libtensordict holds with a threshold; past it we run a full
-- collection. The threshold is twice the bytes that survived the last collection (the
-- GC's own pace), at least MIN_THRESHOLD, and it is set again after every GC cycle,
-- the collector's own included: a large tensor alive at one collection and freed by a
-- later cycle must not leave the threshold where it put it (a replay buffer built from
-- a 1 GiB tensor let 2 GiB of 256 KiB samples pile up before the next collection, each
-- faulting its pages in afresh: buf[idx] ran 5x slower than with the samples freed).
local ffi = require("ffi")
local C = require("tensordict.lib").C

local M = {}
local MIN_THRESHOLD = 32 * 1024 * 1024
local threshold = MIN_THRESHOLD
local cycle_ended = false

local function live() return tonumber(C.td_live_bytes()) end

-- A sentinel whose finaliser runs at the end of each GC cycle. Finalisers run in no set
-- order, and the storages other finalisers release this cycle are not counted yet, so
-- the threshold is set at the next allocation, when they are.
local function on_cycle()
  cycle_ended = true
  ffi.gc(ffi.new("char[1]"), on_cycle)
end
ffi.gc(ffi.new("char[1]"), on_cycle)

function M.after_alloc()
  local bytes = live()
  if cycle_ended then
    cycle_ended = false
    threshold = math.max(MIN_THRESHOLD, 2 * bytes)
  end
  if bytes > threshold then
    collectgarbage("collect")
    cycle_ended = false
    threshold = math.max(MIN_THRESHOLD, 2 * live())
  end
end

function M.live_bytes() return live() end

return M
