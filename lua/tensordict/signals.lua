-- signals.lua: the signals that stop a run (SIGINT, SIGTERM, SIGHUP), counted, not
-- handled in Lua (core/src/signals.c). watch(signo) installs the library's handler for
-- good (a host: tdflow, tdrepl); take(signo) for the length of a run, and restore(signo)
-- puts back what it replaced (flow.run). The handler only counts deliveries (no
-- SA_RESTART: blocking waits return EINTR), so code compares counts to learn that a
-- signal came in between: snapshot() now, arrived(snap) later names the first one.
local C = require("tensordict.lib").C
local util = require("tensordict.util")

local M = { SIGHUP = 1, SIGINT = 2, SIGTERM = 15 }

-- The signals that stop a run, in the order arrived() looks at them.
M.STOPPING = { M.SIGINT, M.SIGTERM, M.SIGHUP }
local NAMES = { [M.SIGHUP] = "SIGHUP", [M.SIGINT] = "SIGINT", [M.SIGTERM] = "SIGTERM" }

function M.name(signo) return NAMES[signo] or ("signal " .. tostring(signo)) end

-- The exit status a shell shows for a process the signal ended: 130, 143, 129.
function M.exit_code(signo) return 128 + signo end

function M.watch(signo)
  if C.td_signal_watch(signo) ~= 0 then util.c_fail() end
end

function M.count(signo) return (tonumber(C.td_signal_count(signo))) end

-- Counts signo for now: "default" or "handler" (what it replaced), or nil when it left
-- the action alone (the signal is ignored, or counted already by a host).
function M.take(signo)
  local r = C.td_signal_take(signo)
  if r < 0 then util.c_fail() end
  return r == C.TD_SIGNAL_FROM_DEFAULT and "default" or r == C.TD_SIGNAL_FROM_HANDLER and "handler" or nil
end

function M.restore(signo)
  if C.td_signal_restore(signo) ~= 0 then util.c_fail() end
end

-- Sends signo to this process (after restore, its replaced action takes it).
function M.raise(signo)
  if C.td_signal_raise(signo) ~= 0 then util.c_fail() end
end

-- Takes every stopping signal (take); returns {[signo] = "default" | "handler" | nil}.
function M.take_stopping()
  local taken = {}
  for _, s in ipairs(M.STOPPING) do taken[s] = M.take(s) end
  return taken
end

-- Puts back what take_stopping replaced.
function M.restore_taken(taken)
  for s, how in pairs(taken) do
    if how then M.restore(s) end
  end
end

-- The counts of the stopping signals now.
function M.snapshot()
  local snap = {}
  for _, s in ipairs(M.STOPPING) do snap[s] = M.count(s) end
  return snap
end

-- The first stopping signal delivered since snap (a signal number), or nil.
function M.arrived(snap)
  for _, s in ipairs(M.STOPPING) do
    if C.td_signal_count(s) ~= snap[s] then return s end
  end
  return nil
end

return M
