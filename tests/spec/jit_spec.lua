-- The hot paths must JIT-compile: a trace that aborts falls back to the interpreter
-- and costs 10x. Each case runs a loop and listens to the trace events of the JIT.
local T = require("tensordict")
local H = require("helpers")
local vmdef = require("jit.vmdef")
local jutil = require("jit.util")
-- The JIT's event handler must not touch globals: busted gives spec files a proxied
-- environment that is not safe to enter from inside a trace event, and a global
-- lookup in a loop under test would trace busted's proxy instead of our code.
local jit, pcall, tostring, concat, check = jit, pcall, tostring, table.concat, assert

-- Runs fn and reports on the traces of the loop under test: those that start in this
-- file, and their side traces. Traces that start inside the library (a hot function's
-- entry) may abort returning to the loop; the loop's own trace then compiles the call
-- inline, which is what matters. A loop whose trace ends in a "stitch" calls something
-- the JIT cannot compile (LuaJIT 2.1 stitches around it); that counts as a failure.
local BENIGN = {
  ["leaving loop in root trace"] = true,
  ["inner loop in root trace"] = true,
  ["symbol not in cache"] = true,
}

-- The one call allowed to stitch: collectgarbage, which LuaJIT does not compile (the GC
-- step a TensorDict handle pays every few hundred handles, the collection the memory
-- pacing forces). A stitching trace's last recorded function is the one it stitches
-- around.
local collectgarbage_fn = collectgarbage

local function trace_events(fn)
  local loops, problems, ours, log, starts, stitches = 0, {}, {}, {}, {}, {}
  local last_recorded = {}
  -- The callback must never raise: an error inside a JIT event handler hangs LuaJIT.
  local function record(what, tr, func, pc, code, info)
    if what == "record" then -- (tr, func, pc, depth): the bytecode just recorded
      last_recorded[tr] = func
      return
    end
    if what ~= "start" and what ~= "stop" and what ~= "abort" then return end
    local loc = func and jutil.funcinfo(func, pc) or {}
    local reason = what == "abort" and tostring(vmdef.traceerr[code] or code) or ""
    log[#log + 1] = concat({ what, tostring(tr), tostring(loc.loc), reason }, " ")
    if what == "start" then
      starts[tr] = loc
      ours[tr] = (loc.source or ""):find("jit_spec.lua", 1, true) ~= nil
        or (code ~= nil and ours[code] == true)
    elseif what == "stop" then
      local link = jutil.traceinfo(tr).linktype
      local first, last = starts[tr], last_recorded[tr]
      if link == "stitch" and last ~= collectgarbage_fn then
        local at = last and jutil.funcinfo(last) or {}
        local callee = at.loc or (at.ffid and "builtin #" .. at.ffid) or "a C function"
        stitches[#stitches + 1] = "trace " .. tr .. " stitches around " .. callee
          .. " (started at " .. tostring(first and first.loc) .. ")"
        if ours[tr] then problems[#problems + 1] = "trace " .. tr .. " stitches" end
      end
      if link == "loop" and ours[tr] then loops = loops + 1 end
    elseif what == "abort" and ours[tr] then
      -- Benign: leaving the loop ends recording at its exit; a trace that started before
      -- the loop (a hot-counter collision) gives way to the loop's own trace; a C symbol
      -- met for the first time is resolved by the interpreter, and the next try compiles.
      if not BENIGN[reason] then
        problems[#problems + 1] = reason:gsub("%%%a", tostring(info))
      end
    end
  end
  local function on_trace(...) pcall(record, ...) end
  local function on_record(...) pcall(record, "record", ...) end
  -- Finalisers left by earlier specs run inside GC steps, and one that runs while a
  -- trace records aborts it ("error thrown or hook called"); after a few such aborts
  -- LuaJIT blacklists the loop. Collect them first, so the check sees this code only.
  collectgarbage("collect")
  collectgarbage("collect")
  jit.flush()
  jit.attach(on_trace, "trace")
  jit.attach(on_record, "record")
  local ok, err = pcall(fn)
  jit.attach(on_trace)
  jit.attach(on_record)
  assert(ok, err)
  return loops, problems, concat(log, "; "), stitches
end

-- Up to three tries: hot counters are shared by hashed bytecode addresses, so in a long
-- run a callee's counter may fire first and its trace abort at the return ("NYI: return
-- to lower frame") until the loop is blacklisted; a fresh try (jit.flush) then compiles.
-- A loop that never compiles in three tries still fails.
local function assert_compiles(fn)
  local loops, problems, log
  for _ = 1, 3 do
    loops, problems, log = trace_events(fn)
    if #problems == 0 and loops > 0 then return end
  end
  assert.are.same({}, problems, log)
  assert.is_true(loops > 0, "the loop did not compile: " .. log)
end

-- For paths that allocate and run small loops of their own (advanced indexing copies):
-- their traces may end at those loops or at a GC finaliser, but none, in the library
-- either, may stitch around a call the JIT cannot compile (a require, for instance).
local function assert_calls_compile(fn)
  local _, _, log, stitches = trace_events(fn)
  assert.are.same({}, stitches, log)
end

describe("hot paths compile", function()
  local m = T.arange(1, 40000, "float32"):view(200, 200)
  local v = T.arange(1, 100, "float32")

  -- A small function whose last act is a tail call to a builtin or a C function
  -- (`return ffi.istype(Ref, x)`) cannot be compiled as a trace of its own: every try
  -- aborts, and once LuaJIT blacklists its entry, every trace that calls it aborts too,
  -- so every loop using it runs interpreted from then on (values() of a TensorDict went
  -- from 3.6 to 13 us once is_td was blacklisted). Called from interpreted code, its
  -- entry gets hot and is tried again and again; the loop after must still compile.
  it("a helper called from interpreted code stays compilable (T.is_tensordict)", function()
    local td = T.TensorDict({ x = T.zeros(4) }, { 4 })
    local is_td = T.is_tensordict
    local function interpreted(n)
      for _ = 1, n do is_td(td) end
    end
    jit.off(interpreted)
    assert_compiles(function()
      interpreted(2000000)
      local n = 0
      for _ = 1, 20000 do if is_td(td) then n = n + 1 end end
      check(n == 20000)
    end)
  end)

  -- LuaJIT's default room (1000 traces, 512 KiB of machine code) is less than the
  -- library's hot paths take: when it is full, LuaJIT throws every trace away. The
  -- library raises both limits at its first load (lib.lua).
  it("leaves room for the traces of a program: 1500 compiled loops, no flush", function()
    local flushes, traces = 0, 0
    local function on_trace(what)
      if what == "flush" then flushes = flushes + 1 elseif what == "stop" then traces = traces + 1 end
    end
    local loops = {}
    for i = 1, 1500 do
      loops[i] = loadstring(("local s = 0 for j = 1, 200 do s = s + j * %d end return s"):format(i))
    end
    jit.flush()
    jit.attach(on_trace, "trace")
    local ok, err = pcall(function()
      for i = 1, 1500 do check(loops[i]() == 20100 * i) end
    end)
    jit.attach(on_trace)
    assert(ok, err)
    assert.is_true(traces > 1200, ("only %d traces compiled"):format(traces)) -- past the default 1000
    assert.are.equal(0, flushes)
  end)

  -- The same rule over the whole library, read from its source: `return f(...)` where f
  -- is a builtin, an FFI or a C function is written `return (f(...))`, which is not a
  -- tail call. unpack, select, pcall and string.match are left out: their many results
  -- would be cut to one.
  it("no library function ends in a tail call to a builtin or a C function", function()
    local NONLUA = { "^tonumber$", "^tostring$", "^setmetatable$", "^getmetatable$", "^type$",
      "^rawget$", "^rawequal$", "^table%.concat$", "^ffi%.[%w_]+$", "^ffi_string$", "^ffi_new$",
      "^C%.[%w_]+$", "^lib%.C%.[%w_]+$", "^lib%.rl_[%w_]+$", "^MPI%.[%w_]+$", "^CU%.[%w_]+$",
      "^math%.[%w_]+$", "^string%.format$", "^[%w_]+:format$", "^bit%.[%w_]+$", "^istype$" }
    local found = {}
    for _, path in ipairs(H.output_lines("find lua/tensordict -name '*.lua' | sort")) do
      local n = 0
      for line in io.lines(path) do
        n = n + 1
        local code = line:gsub("%-%-.*$", "")
        local _, e, callee = code:find("return%s+([%w_%.:]+)%b()")
        if e and (code:sub(e + 1):match("^%s*$") or code:sub(e + 1):match("^%s*end%s*$")) then
          for _, pattern in ipairs(NONLUA) do
            if callee:match(pattern) then found[#found + 1] = path .. ":" .. n .. ": " .. line end
          end
        end
      end
    end
    assert.are.same({}, found)
  end)

  it("t:size(d) and t:dim()", function()
    assert_compiles(function()
      local s = 0
      for _ = 1, 20000 do s = s + m:size(1) + m:dim() end
      check(s == 20000 * 202)
    end)
  end)

  it("t[i] element reads of a 1-D tensor", function()
    assert_compiles(function()
      local s = 0
      for i = 1, 20000 do s = s + v[i % 100 + 1] end
      check(s > 0)
    end)
  end)

  it("t[i] row views of a 2-D tensor", function()
    assert_compiles(function()
      for i = 1, 20000 do
        local row = m[i % 200 + 1]
        check(row ~= nil)
      end
    end)
  end)

  it("t[{{a, b}}] range views", function()
    assert_compiles(function()
      for i = 1, 20000 do
        local r = m[{ { 1, i % 100 + 1 } }]
        check(r ~= nil)
      end
    end)
  end)

  -- Advanced indexing copies through gather.lua: the metamethods' call into it must
  -- compile (it once went through require, which LuaJIT cannot compile).
  local idx = T.tensor({ 3, 1, 2 }, "int64")
  local mask = v:gt(50)

  it("t[idx_tensor] reads", function()
    assert_calls_compile(function()
      local n = 0
      for _ = 1, 2000 do n = n + v[idx]:size(1) end
      check(n == 2000 * 3)
    end)
  end)

  it("t[mask] reads", function()
    local selected = mask:sum()
    assert_calls_compile(function()
      local n = 0
      for _ = 1, 2000 do n = n + v[mask]:size(1) end
      check(n == 2000 * selected)
    end)
  end)

  it("t[idx_tensor] = x writes", function()
    local w = T.zeros(100, "float32")
    assert_calls_compile(function()
      for i = 1, 2000 do w[idx] = i end
      check(w[1] == 2000)
    end)
  end)

  local src = {}
  for i = 1, 16 do src["k" .. i] = T.zeros(32, 4) end
  local td = T.TensorDict(src, { 32 })

  it("td:get(key) and td.key", function()
    assert_compiles(function()
      local n = 0
      for _ = 1, 20000 do
        if td:get("k3") ~= nil and td.k5 ~= nil then n = n + 1 end
      end
      check(n == 20000)
    end)
  end)

  it("td[i] and #td", function()
    assert_compiles(function()
      local n = 0
      for i = 1, 20000 do
        local row = td[i % 32 + 1]
        n = n + #td + row:batch_dims()
      end
      check(n == 20000 * 32)
    end)
  end)

  it("td[idx_tensor] reads", function()
    local rows = T.tensor({ 2, 5, 7 }, "int64")
    assert_calls_compile(function()
      local n = 0
      for _ = 1, 2000 do n = n + #td[rows] end
      check(n == 2000 * 3)
    end)
  end)

  it("td:set of an existing key", function()
    local x = T.zeros(32, 4)
    assert_compiles(function()
      for _ = 1, 20000 do td:set("k1", x) end
    end)
  end)
end)
