-- flow_signals_spec.lua: a script that calls flow.run stops cleanly on SIGINT, SIGTERM
-- and SIGHUP (flow/interrupt.lua): the nodes closed (Map's workers gone), the sink
-- aborted (no output, no hidden temporary beside it); SIGTERM and SIGHUP then end the
-- process as they would have (status 143, 129) after one line, SIGINT raises at the
-- script's line. The signals come from the pipeline itself (a node that sends one to
-- its own process at a given batch), so nothing here waits on a clock; one run is also
-- stopped from outside while its workers compute.
local H = require("helpers")

local root = H.pwd()

-- The script's head: T, flow, ffi's kill and getpid, the output folder `out` (arg 1),
-- a source of 40 batches, and send(signo, at) a node that sends signo to this process
-- when batch `at` passes (at 0: never).
local HEAD = [[
local T = require("tensordict")
local flow = T.flow
local ffi = require("ffi")
ffi.cdef("int kill(int pid, int sig); int getpid(void);")
local out = arg[1]
local function source()
  return flow.TensorSource { td = T.TensorDict({ x = T.arange(1, 40) }, { 40 }), batch_size = 1 }
end
local function send(signo, at)
  local n = 0
  return flow.Apply { keys = "x", fn = function(x)
    n = n + 1
    if n == at then ffi.C.kill(ffi.C.getpid(), signo) end
    return x
  end }
end
]]

local HEAD_LINES = select(2, HEAD:gsub("\n", ""))

-- "<dir>/s.lua:<n>:", n counted from the body's first line.
local function at(dir, n) return ("%s/s.lua:%d:"):format(dir, HEAD_LINES + n) end

-- Runs HEAD .. body with luajit in a fresh folder (output: <dir>/out); returns stdout
-- and stderr together, the exit status the shell saw and the folder. The line a shell
-- adds for a child a signal ended ("Terminated", "Hangup") is not the script's.
local function script(body)
  local dir = H.tmpdir()
  local path = H.write(dir .. "/s.lua", HEAD .. body)
  local p = io.popen(("cd '%s' && LUA_PATH='lua/?.lua;lua/?/init.lua;;' luajit '%s' '%s/out' > '%s/log' 2>&1; echo $?")
    :format(root, path, dir, dir))
  local status = p:read("*a")
  p:close()
  local output = H.read(dir .. "/log"):gsub("\n?Terminated\n$", "\n"):gsub("\n?Hangup\n$", "\n"):gsub("^\n$", "")
  os.remove(dir .. "/log")
  return output, tonumber(status:match("%d+")), dir
end

-- The names in dir other than the script: no output, no temporary beside it.
local function left(dir)
  local names = {}
  for _, name in ipairs(H.output_lines("ls -A '" .. dir .. "'")) do
    if name ~= "s.lua" then names[#names + 1] = name end
  end
  return names
end

local STOPPED = "the nodes were closed and the sink aborted (nothing was committed)"

describe("flow.run and SIGTERM, SIGHUP, SIGINT", function()
  for _, case in ipairs({ { "SIGTERM", 15, 143 }, { "SIGHUP", 1, 129 } }) do
    local name, signo, status = case[1], case[2], case[3]
    it(("stops on %s: workers stopped, sink aborted, one line, then status %d"):format(name, status), function()
      local output, code, dir = script(([[
flow.run(source(), { send(%d, 5), flow.Map { fn = function(td) return td end, workers = 2 } },
  flow.MemmapSink { path = out })
print("not reached")
]]):format(signo))
      assert.are.equal(("tensordict: run: interrupted by %s: %s\n"):format(name, STOPPED), output)
      assert.are.equal(status, code)
      assert.are.same({}, left(dir))
      H.rmtree(dir)
    end)
  end

  it("raises on SIGINT at the script's line (a pcall catches it) with the workers stopped", function()
    local output, code, dir = script([[
local ok, err = pcall(flow.run, source(), { send(2, 5), flow.Map { fn = function(td) return td end, workers = 2 } },
  flow.MemmapSink { path = out })
print(ok, err)
local me = ffi.C.getpid()
local kids = io.open(("/proc/%d/task/%d/children"):format(me, me)):read("*a")
print("children: [" .. kids .. "]")
]])
    assert.are.equal(("false\t%s tensordict: run: interrupted by SIGINT: %s\nchildren: []\n")
      :format(at(dir, 1), STOPPED), output)
    assert.are.equal(0, code)
    assert.are.same({}, left(dir))
    H.rmtree(dir)
  end)

  it("leaves a signal its host counts to the host: the run raises, the process goes on", function()
    local output, code, dir = script([[
require("tensordict.signals").watch(15)
local ok, err = pcall(flow.run, source(), send(15, 3), flow.MemmapSink { path = out })
print(ok, err)
]])
    assert.are.equal(("false\t%s tensordict: run: interrupted by SIGTERM: %s\n"):format(at(dir, 2), STOPPED), output)
    assert.are.equal(0, code)
    assert.are.same({}, left(dir))
    H.rmtree(dir)
  end)

  it("leaves an ignored signal ignored (nohup): the run completes", function()
    local output, code, dir = script([[
ffi.cdef("typedef void (*td_spec_handler)(int); td_spec_handler signal(int sig, td_spec_handler h);")
ffi.C.signal(1, ffi.cast("td_spec_handler", 1)) -- SIG_IGN
local td = flow.run(source(), send(1, 3), flow.MemmapSink { path = out })
print(#td)
]])
    assert.are.equal("40\n", output)
    assert.are.equal(0, code)
    assert.are.same({ "out" }, left(dir))
    H.rmtree(dir)
  end)

  it("with signals = false leaves the signals alone: SIGTERM ends the process at once", function()
    local output, code, dir = script([[
flow.run(source(), send(15, 3), flow.Collect {}, { signals = false })
print("not reached")
]])
    assert.are.equal("", output)
    assert.are.equal(143, code)
    H.rmtree(dir)
  end)

  it("passes on a signal that comes after the commit: the output is whole, then the process ends", function()
    local output, code, dir = script([[
local sink = flow.MemmapSink { path = out }
local finish = sink.finish
sink.finish = function(self)
  local r = finish(self)
  ffi.C.kill(ffi.C.getpid(), 15)
  return r
end
flow.run(source(), nil, sink)
print("not reached")
]])
    assert.are.equal("", output)
    assert.are.equal(143, code)
    assert.are.same({ "out" }, left(dir))
    local T = require("tensordict")
    assert.are.equal(40, #T.load_memmap(dir .. "/out"))
    H.rmtree(dir)
  end)

  it("restores the actions it took once the run is over", function()
    local output, code, dir = script([[
flow.run(source(), nil, flow.Collect {})
ffi.C.kill(ffi.C.getpid(), 15)
print("not reached")
]])
    assert.are.equal("", output)
    assert.are.equal(143, code)
    H.rmtree(dir)
  end)

  it("stops a run killed from outside while its workers compute, leaving nothing behind", function()
    local dir = H.tmpdir()
    local path = H.write(dir .. "/s.lua", HEAD .. [[
local mark = arg[2]
flow.run(flow.TensorSource { td = T.TensorDict({ x = T.arange(1, 1000) }, { 1000 }), batch_size = 1 },
  flow.Map { workers = 2, fn = function(td)
    io.open(mark, "w"):close()
    local t = os.clock() + 0.05
    while os.clock() < t do end
    return td
  end }, flow.MemmapSink { path = out })
]])
    local cmd = ("cd '%s' && { LUA_PATH='lua/?.lua;lua/?/init.lua;;' luajit '%s' '%s/out' '%s/started' "
      .. "> '%s/log' 2>&1 & "
      .. "pid=$!; while [ ! -f '%s/started' ]; do sleep 0.05; done; kill -TERM $pid; wait $pid; echo $?; } 2>/dev/null")
      :format(root, path, dir, dir, dir, dir)
    local p = io.popen(cmd)
    local status = p:read("*a")
    p:close()
    assert.are.equal("143", status:match("%d+"))
    assert.are.equal(("tensordict: run: interrupted by SIGTERM: %s\n"):format(STOPPED), H.read(dir .. "/log"))
    local names = {}
    for _, name in ipairs(H.output_lines("ls -A '" .. dir .. "'")) do names[#names + 1] = name end
    assert.are.same({ "log", "s.lua", "started" }, names)
    H.rmtree(dir)
  end)
end)
