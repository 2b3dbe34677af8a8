-- tensor/memory.lua: tells the Lua GC about C bytes it cannot see.
-- A tensor handle is a few bytes to the collector however much storage it pins, so a
-- loop making big temporaries would grow without bound. After each allocation we
-- compare the bytes libtensordict holds with a threshold; past it we run a full
-- collection. The threshold is the bytes alive after the last collection plus an
-- allowance for garbage, set again after every GC cycle, the collector's own included:
-- a large tensor alive at one collection and freed by a later cycle must not leave the
-- threshold where it put it (a replay buffer built from a 1 GiB tensor let 2 GiB of
-- 256 KiB samples pile up before the next collection, each faulting its pages in
-- afresh: buf[idx] ran 5x slower than with the samples freed).
local ffi = require("ffi")
local C = require("tensordict.lib").C

local M = {}
local MIB = 1024 * 1024
-- The garbage allowed between collections: what survived (the GC's own doubling pace),
-- at least MIN_GARBAGE, and at most MAX_GARBAGE or 64 times the Lua heap, whichever is
-- more. A full collection costs about the Lua heap's size, not the C bytes it frees,
-- so with a small Lua heap there is no gain in letting a big live set's worth of
-- garbage pile up (samples from a 1 GiB buffer: 1 GiB of them, caches long cold).
local MIN_GARBAGE, MAX_GARBAGE = 32 * MIB, 64 * MIB
local threshold = MIN_GARBAGE
local cycle_ended = false

local function live() return (tonumber(C.td_live_bytes())) end

local function set_threshold(survived)
  local cap = math.max(MAX_GARBAGE, 64 * 1024 * collectgarbage("count"))
  threshold = survived + math.max(MIN_GARBAGE, math.min(survived, cap))
end

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
    set_threshold(bytes)
  end
  if bytes > threshold then
    collectgarbage("collect")
    cycle_ended = false
    set_threshold(live())
  end
end

function M.live_bytes() return live() end

-- Bytes of physical memory (0 when the system does not say): what size checks compare
-- a request with (flow's node checks: core.memory_problem).
function M.physical() return (tonumber(C.td_physical_memory())) end

return M
