-- flow/interrupt.lua: how flow.run stops on SIGINT, SIGTERM and SIGHUP (Ctrl-C,
-- `timeout`, Slurm, systemd, `docker stop`, a closed terminal). Lua cannot run in a
-- signal handler, so for the length of a run the library's counting handler takes each
-- signal whose action is the default or another handler (LuaJIT's Ctrl-C hook); an
-- ignored signal stays ignored, and one a host counts already (tdflow, tdrepl) is left
-- to it. flow.run looks at the counts between batches (a worker's wait returns at once),
-- and on a delivery unwinds as on any error: nodes closed (workers stopped), the sink
-- aborted. Then the actions are put back and:
--   - a signal taken from its default action is sent again: after one line on stderr
--     the process ends as the signal asked (status 128 + signo: 130, 143, 129);
--   - otherwise flow.run raises "tensordict: run: interrupted by SIGINT: ..." at the
--     caller's line (a script's pcall can catch it; a host maps it to its exit code).
-- A signal that comes after the sink committed is passed on the same way, once the run
-- has returned: the output is whole, and the process still does what it was told.
local signals = require("tensordict.signals")
local util = require("tensordict.util")

local M = {}

-- What error() carries out of the run's loop when a signal came (a sentinel, so it is
-- told from any error the nodes raise).
M.STOP = setmetatable({}, { __tostring = function() return "tensordict: run: interrupted" end })

-- The counts now and, unless take is false, the stopping signals taken for the run.
function M.watch(take)
  return { snap = signals.snapshot(), taken = take ~= false and signals.take_stopping() or {} }
end

-- Raises STOP when a stopping signal came since watch.
function M.check(w)
  if signals.arrived(w.snap) then error(M.STOP, 0) end
end

function M.arrived(w) return signals.arrived(w.snap) end

-- Puts back every action watch replaced; returns what was taken ({[signo] = how}).
function M.release(w)
  local taken = w.taken
  signals.restore_taken(taken)
  w.taken = {}
  return taken
end

local function pass_on(signo)
  io.stdout:flush()
  io.stderr:flush()
  signals.raise(signo)
end

-- After the run cleaned up: signo came, taken is what release returned. A run that
-- completed passes it on to the action it replaced (nothing when a host counts it); an
-- interrupted one ends the process when it replaced the default action, else raises at
-- the caller's line.
function M.conclude(taken, signo, completed)
  local how = taken[signo]
  if completed then
    if how then pass_on(signo) end
    return
  end
  local what = ("run: interrupted by %s: the nodes were closed and the sink aborted "
    .. "(nothing was committed)"):format(signals.name(signo))
  if how == "default" then
    io.stderr:write("tensordict: ", what, "\n")
    pass_on(signo)
  end
  util.fail(what)
end

return M
