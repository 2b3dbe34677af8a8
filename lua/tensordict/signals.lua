-- signals.lua: signals counted, not handled in Lua (core/src/signals.c). watch(signo)
-- installs the library's handler, which only counts deliveries (no SA_RESTART: blocking
-- waits return EINTR); count(signo) tells how many came so far, so a host compares two
-- counts to learn that Ctrl-C was pressed in between (tdflow does, between batches).
local C = require("tensordict.lib").C
local util = require("tensordict.util")

local M = { SIGINT = 2, SIGTERM = 15 }

function M.watch(signo)
  if C.td_signal_watch(signo) ~= 0 then util.c_fail() end
end

function M.count(signo) return tonumber(C.td_signal_count(signo)) end

return M
