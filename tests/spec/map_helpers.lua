-- map_helpers.lua: what td_map_spec and flow_map_spec share about worker processes:
-- raw tensor bytes (determinism checks), this process's children (none may outlive a
-- map) and a child LuaJIT interrupted with SIGINT while its workers run.
-- Requiring it declares getpid and kill, which the specs' fns call through ffi.C.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local H = require("helpers")

pcall(ffi.cdef, [[
int getpid(void);
int kill(int pid, int sig);
]])

local M = {}

-- The raw bytes of a tensor (C order).
function M.bytes(t)
  t = t:contiguous()
  local n = 1
  for _, s in ipairs(t:shape()) do n = n * s end
  return ffi.string(C.td_tensor_data_borrow(t.h), n * C.td_dtype_itemsize(t.h.dtype))
end

-- Children of this process (pids), from /proc: none should outlive a map.
function M.children()
  -- /proc, not pgrep: a tool run under the sanitizers' LD_PRELOAD may hang
  local pid = ffi.C.getpid()
  local f = io.open(("/proc/%d/task/%d/children"):format(pid, pid))
  local out = {}
  for w in f:read("*a"):gmatch("%d+") do out[#out + 1] = tonumber(w) end
  f:close()
  return out
end

-- The child's first and last lines around the body M.interrupt is given: T, ffi and dir
-- (the folder) in scope, spin as the workers' fn (it marks the folder with
-- started-<pid>, then never returns); after the body, err (which the body sets from its
-- pcall) and this process's children, none once the workers were stopped.
local PRELUDE = [[
local T = require("tensordict")
local ffi = require("ffi")
ffi.cdef("int getpid(void);")
local dir = ...
local function spin()
  local mark = io.open(dir .. "/started-" .. ffi.C.getpid(), "w")
  mark:close()
  while true do end
end
]]
local EPILOGUE = [[
io.write("error: ", tostring(err), "\n")
local pid = ffi.C.getpid()
local kids = io.open(("/proc/%d/task/%d/children"):format(pid, pid))
io.write("children:", kids:read("*a"), "\n")
kids:close()
]]

-- Runs PRELUDE .. body .. EPILOGUE with luajit from the repository root in a fresh folder;
-- body starts two workers running spin and sets err. When both have marked the folder,
-- the parent gets SIGINT. Returns the parent's output (stdout and stderr), what the shell
-- printed (the parent's exit status) and the folder, which the caller removes with
-- H.rmtree.
function M.interrupt(body)
  local dir = H.tmpdir()
  local path = H.write(dir .. "/child.lua", PRELUDE .. body .. EPILOGUE)
  -- Wait until both workers run fn, then interrupt the parent.
  local cmd = ("cd '%s' && LUA_PATH='lua/?.lua;lua/?/init.lua;;' luajit '%s' '%s' > '%s/out' 2>&1 & pid=$!; "
    .. "for i in $(seq 1 200); do [ $(ls '%s' | grep -c started) -ge 2 ] && break; sleep 0.05; done; "
    .. "kill -INT $pid; wait $pid; echo $?")
    :format(os.getenv("PWD") or ".", path, dir, dir, dir)
  local p = io.popen(cmd)
  local status = p:read("*a")
  p:close()
  return H.read(dir .. "/out"), status, dir
end

-- The pids of the workers that marked dir (see M.interrupt).
function M.started(dir)
  local pids = {}
  for _, name in ipairs(H.output_lines("ls '" .. dir .. "'")) do
    local pid = name:match("^started%-(%d+)$")
    if pid then pids[#pids + 1] = pid end
  end
  return pids
end

-- Waits until the child pid has died, every thread of it (a zombie its parent has not
-- reaped yet, or gone): a signal is delivered asynchronously, and a worker's main
-- thread shows as a zombie while its other threads, and its open files, are still
-- going away.
function M.wait_dead(pid)
  for _ = 1, 1000 do
    local f = io.open(("/proc/%d/status"):format(pid))
    if not f then return end
    local status = f:read("*a")
    f:close()
    if status:match("\nState:%s*Z") and status:match("\nThreads:%s*1\n") then return end
    os.execute("sleep 0.01")
  end
  error("process " .. pid .. " did not die")
end

-- Whether a process with this pid exists (kill -0).
function M.alive(pid)
  return os.execute("kill -0 " .. pid .. " 2>/dev/null") == 0
end

return M
