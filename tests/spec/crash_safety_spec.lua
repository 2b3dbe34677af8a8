-- Crash safety: a process SIGKILLed at random moments while it saves with td:memmap,
-- td:consolidate or a MemmapSink append, 50 times each. Every survivor on disk loads as
-- a whole generation (the old state or the new one, never a mix), and the next save
-- removes the temporaries the killed ones left. Data are small so 150 kills stay well
-- under a minute; the children loop, so kills land anywhere in a save.
local T = require("tensordict")
local H = require("helpers")

local KILLS = 50
-- random sleeps of 10..200 ms: LuaJIT starts in ~60 ms, a save takes a few ms
local MIN_US, MAX_US = 10000, 200000

-- Temporaries of the save target `name` (".<name>.tmp..." siblings) left in dir.
local function temporaries(dir, name)
  local left = {}
  local pattern = "^%." .. name:gsub("%p", "%%%0") .. "%.tmp"
  for entry in H.ls_a(dir):gmatch("[^\n]+") do
    if entry:find(pattern) then left[#left + 1] = entry end
  end
  return left
end

-- Runs child (a Lua file taking <target> <first generation>) KILLS times, each killed at
-- a random moment; check(round) then judges what is on disk. Prints the seed it uses.
local function kill_rounds(child, target, check)
  local seed = os.time()
  math.randomseed(seed)
  local loads = 0
  for round = 1, KILLS do
    H.kill_at_random(("luajit '%s' '%s' %d"):format(child, target, round * 1000), MIN_US, MAX_US)
    if check(round, seed) then loads = loads + 1 end
  end
  assert.is_true(loads > 0, "no save ever completed: raise the sleep range (seed " .. seed .. ")")
end

local CHILD_HEAD = [[
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
local T = require("tensordict")
local target, g = arg[1], tonumber(arg[2])
]]

describe("SIGKILL during a save", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("td:memmap leaves the old or the new folder, and the next save removes temporaries", function()
    local prefix = dir .. "/crash"
    local child = H.write(dir .. "/saver.lua", CHILD_HEAD .. [[
local td = T.TensorDict({ a = T.zeros(64, 1024), b = T.zeros(64, "int64"),
  nested = { c = T.zeros(64, 64, "float64") }, tag = "generation" }, { 64 })
while true do
  td:apply_(function(x) return x:fill_(g) end)
  td:set("tag", ("generation %d"):format(g))
  td:memmap(target, { existsok = true })
  g = g + 1
end
]])
    kill_rounds(child, prefix, function(round, seed)
      local ok, td = pcall(T.load_memmap, prefix)
      if not ok then
        assert.is_truthy(tostring(td):find("load_memmap", 1, true), tostring(td))
        return false
      end
      local g = td.b[1]
      assert.are.equal(("generation %d"):format(g), td.tag, "seed " .. seed)
      assert.is_true(td.a:eq(g):all() and td.b:eq(g):all() and td.nested.c:eq(g):all(),
        ("torn folder after kill %d (seed %d)"):format(round, seed))
      td:free()
      return true
    end)
    T.TensorDict({ z = T.zeros(1) }, { 1 }):memmap(prefix)
    assert.are.same({}, temporaries(dir, "crash"))
  end)

  it("td:consolidate leaves the old or the new file, and the next save removes temporaries", function()
    local file = dir .. "/td.bin"
    local child = H.write(dir .. "/saver.lua", CHILD_HEAD .. [[
while true do
  T.TensorDict({ g = T.full({ 4 }, g), big = T.full({ 4, 65536 }, g) }, { 4 }):consolidate(target)
  g = g + 1
end
]])
    T.TensorDict({ g = T.full({ 4 }, 0), big = T.full({ 4, 65536 }, 0) }, { 4 }):consolidate(file)
    local last = 0
    kill_rounds(child, file, function(round, seed)
      -- the first save happened above: a file is always there, whole
      local td = T.from_consolidated(file)
      local g = td.g[1]
      assert.is_true(g == 0 or (g >= 1000 and g < (round + 1) * 1000),
        ("generation %s after kill %d (seed %d)"):format(tostring(g), round, seed))
      assert.is_true(td.g:eq(g):all() and td.big:eq(g):all(),
        ("torn file after kill %d (seed %d)"):format(round, seed))
      td:free()
      local changed = g ~= last
      last = g
      return changed
    end)
    -- a save now (this process alive, the killed ones gone) leaves no temporary behind
    T.TensorDict({ g = T.full({ 4 }, 99), big = T.zeros(4, 10) }, { 4 }):consolidate(file)
    assert.are.same({}, temporaries(dir, "td.bin"))
    assert.are.equal(99, T.from_consolidated(file).g[2])
    -- and deterministically: a temporary of a process that is gone goes, a live one's stays
    local p = io.popen("sh -c 'echo $$'")
    local dead = tonumber(p:read("*l"))
    p:close()
    H.write(("%s/.td.bin.tmp-%d-0"):format(dir, dead), "stale")
    H.write(("%s/.td.bin.tmp-1-0"):format(dir), "init is alive")
    T.TensorDict({ g = T.full({ 4 }, 5) }, { 4 }):consolidate(file)
    assert.is_nil(H.read(("%s/.td.bin.tmp-%d-0"):format(dir, dead)))
    assert.are.equal("init is alive", H.read(dir .. "/.td.bin.tmp-1-0"))
  end)

  it("a MemmapSink append leaves the old folder or a whole new one, and the next run removes temporaries", function()
    local prefix = dir .. "/crash"
    -- generation g: 8 batches of 16 rows whose every element is g; commit; next g
    local child = H.write(dir .. "/appender.lua", CHILD_HEAD .. [[
local flow = require("tensordict.flow")
local nodes = require("tensordict.flow.memmap")
local Sink = flow.MemmapSink or nodes.MemmapSink
while true do
  local sink = Sink({ path = target, existsok = true })
  sink:open({})
  for _ = 1, 8 do
    sink:write(T.TensorDict({ a = T.full({ 16, 1024 }, g), b = T.full({ 16 }, g, "int64"),
      nested = { c = T.full({ 16, 16 }, g, "float64") } }, { 16 }))
  end
  sink:finish()
  g = g + 1
end
]])
    kill_rounds(child, prefix, function(round, seed)
      local ok, td = pcall(T.load_memmap, prefix)
      if not ok then
        assert.is_false(H.sh(("test -e '%s'"):format(prefix)), "a folder that does not load: " .. tostring(td))
        return false
      end
      local g = td.b[1]
      assert.are.same({ 128 }, td:batch_size(), "seed " .. seed)
      assert.is_true(td.a:eq(g):all() and td.b:eq(g):all() and td.nested.c:eq(g):all(),
        ("torn folder after kill %d (seed %d)"):format(round, seed))
      td:free()
      return true
    end)
    local nodes = require("tensordict.flow.memmap")
    local sink = (require("tensordict.flow").MemmapSink or nodes.MemmapSink)({ path = prefix, existsok = true })
    sink:open({})
    sink:abort()
    assert.are.same({}, temporaries(dir, "crash"))
  end)
end)
