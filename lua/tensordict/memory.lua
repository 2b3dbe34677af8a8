-- memory.lua: tells the Lua GC about C bytes it cannot see.
-- A tensor handle is a few bytes to the collector however much storage it pins, so a
-- loop making big temporaries would grow without bound. After each allocation we
-- compare the bytes libtensordict holds with a threshold; past it we run a full
-- collection, then move the threshold to twice what survived (the GC's own pace).
local C = require("tensordict.lib").C

local M = {}
local MIN_THRESHOLD = 32 * 1024 * 1024
local threshold = MIN_THRESHOLD

function M.after_alloc()
  if tonumber(C.td_live_bytes()) > threshold then
    collectgarbage("collect")
    threshold = math.max(MIN_THRESHOLD, 2 * tonumber(C.td_live_bytes()))
  end
end

function M.live_bytes() return tonumber(C.td_live_bytes()) end

return M
