-- flow_kit_spec.lua: the plugin API (flow.kit, docs/flow.md "The plugin kit"): errors
-- that blame the plugin's user, key access with the built-in nodes' messages, name
-- hints, the run helpers, and files written whole through the library's commit (no
-- partial file, no temporary left, the old content kept when anything fails).
local T = require("tensordict")
local H = require("helpers")
local flow = T.flow

local dir = H.tmpdir()

-- A plugin file outside the library's folder, as TDFLOW_PLUGIN_PATH's are: a function
-- that checks its argument with kit.fail and one with util.fail (which would blame the
-- plugin's own line), and a node type reading its key with kit.get.
local PLUGIN = [[
local T = require("tensordict")
local flow = T.flow
local kit = flow.kit.new()
local util = require("tensordict.util")
local M = {}
local function check(x)
  if type(x) ~= "number" then kit.fail("demo.double", "x must be a number, got %s", kit.describe(x)) end
end
function M.double(x) check(x); return 2 * x end
function M.internal(x) if type(x) ~= "number" then util.fail("demo.internal: x must be a number") end end
M.Pick = flow.registry["demo.Pick"] or flow.define("demo.Pick", {
  doc = "Keeps the leaf key under the name picked.",
  params = { { "key", "key", required = true, doc = "the leaf" } },
})
function M.Pick:init() self.in_keys, self.out_keys = { self.p.key }, { "picked" } end
function M.Pick:forward(td)
  td = kit.writable(td)
  td:set("picked", kit.get(self, td, self.p.key))
  return td
end
M.kit = kit
return M
]]
local plugin_path = H.write(dir .. "/demo_plugin.lua", PLUGIN)
local demo = dofile(plugin_path)
local kit = demo.kit

-- The "file:line" an error blames.
local function blamed(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  return tostring(err):match("^(.-:%d+): "), tostring(err)
end

-- "file:line" of the caller's line, or of the line n below it.
local function here(n)
  local info = debug.getinfo(2, "Sl")
  return info.short_src .. ":" .. (info.currentline + (n or 0))
end

-- The names in dir (without . and ..), sorted.
local function names(d)
  local out = {}
  for n in H.ls_a(d):gmatch("[^\n]+") do
    if n ~= "." and n ~= ".." then out[#out + 1] = n end
  end
  table.sort(out)
  return out
end

describe("flow.kit: errors", function()
  it("kit.fail raises 'tensordict: <who>: <message>' at the line that called the plugin", function()
    local where, err
    local line = here(); where, err = blamed(function() demo.double("two") end)
    assert.are.equal(line, where)
    assert.are.equal(line .. ": tensordict: demo.double: x must be a number, got 'two'", err)
    -- util.fail, the library's own, would blame the plugin's line instead
    where = blamed(function() demo.internal("two") end)
    assert.is_truthy(where:find("demo_plugin.lua:10", 1, true), where)
  end)

  it("kit.fail names a node by its type and formats only when given arguments", function()
    local node = demo.Pick { key = "a" }
    local _, err = blamed(function() kit.fail(node, "100% sure") end)
    assert.is_truthy(err:find("tensordict: demo.Pick: 100% sure", 1, true), err)
    _, err = blamed(function() kit.fail("demo", "%d rows", 3) end)
    assert.is_truthy(err:find("tensordict: demo: 3 rows$"), err)
  end)

  it("kit.get gives the value, or the built-in nodes' message at the user's line", function()
    local td = T.TensorDict({ a = T.arange(1, 3), b = { c = T.zeros(3) } }, { 3 })
    assert.are.same({ 1, 2, 3 }, demo.Pick { key = "a" }(td).picked:totable())
    assert.are.same({ 0, 0, 0 }, demo.Pick { key = { "b", "c" } }(td).picked:totable())
    local line = here(); local where, err = blamed(function() demo.Pick { key = "x" }(td) end)
    assert.are.equal(line, where)
    assert.is_truthy(err:find("tensordict: demo.Pick: key 'x' is missing from the batch (its keys: 'a', "
      .. "{\"b\", \"c\"}, 'picked')", 1, true), err)
    -- the same words as a built-in node's
    H.raises(function() flow.Select { keys = "x" }(td) end, "key 'x' is missing from the batch (its keys: ")
    H.raises(function() kit.require_keys(demo.Pick { key = "a" }, td, { "a", { "b", "z" } }) end,
      "tensordict: demo.Pick: key {\"b\", \"z\"} is missing from the batch")
  end)

  it("kit.get through flow.run names the step and keeps the user's line", function()
    local td = T.TensorDict({ a = T.arange(1, 4) }, { 4 })
    local line = here(1); local where, err = blamed(function()
      flow.run(flow.TensorSource { td = td, batch_size = 2 }, { demo.Pick { key = "y" } }, flow.Collect {})
    end)
    assert.are.equal(line, where)
    assert.is_truthy(err:find("tensordict: steps[1] (demo.Pick): key 'y' is missing from the batch", 1, true), err)
  end)
end)

describe("flow.kit: names, batches and settings", function()
  it("gives name hints and message texts", function()
    assert.are.equal("speed", kit.nearest("sped", { "speed", "radius" }))
    assert.are.equal(nil, kit.nearest("mass", { "speed", "radius" }))
    assert.are.equal(" (did you mean 'radius'?)", kit.did_you_mean("radus", { "speed", "radius" }))
    assert.are.equal("", kit.did_you_mean("zzzzzz", { "speed", "radius" }))
    assert.are.equal("", kit.did_you_mean(3, { "speed" }))
    assert.are.equal("'obs'", kit.key_text("obs"))
    assert.are.equal('{"next", "obs"}', kit.key_text({ "next", "obs" }))
    assert.are.equal("[4, 3]", kit.format_list({ 4, 3 }))
    assert.are.equal("'x'", kit.describe("x"))
    assert.are.equal("'a', 'b'", kit.keys_text(T.TensorDict({ a = T.zeros(2), b = T.zeros(2) }, { 2 })))
  end)

  it("counts rows, reads pipeline settings and unlocks batches", function()
    assert.are.equal(5, kit.rows(T.TensorDict({ a = T.zeros(5, 2) }, { 5 })))
    assert.are.equal(1, kit.rows(T.TensorDict({ a = T.zeros(5, 2) }, {})))
    assert.are.equal(3, kit.setting({ seed = 3 }, "seed", { seed = 9 }, 0))
    assert.are.equal(9, kit.setting({}, "seed", { seed = 9 }, 0))
    assert.are.equal(2, kit.setting({}, "workers", {}, 2))
    assert.are.equal(2, kit.setting({}, "workers", nil, 2))
    local locked = T.TensorDict({ a = T.zeros(2) }, { 2 }):lock_()
    local w = kit.writable(locked)
    assert.is_false(w:is_locked())
    w.a:fill_(5) -- the leaves are shared
    assert.are.same({ 5, 5 }, locked.a:totable())
    local open = T.TensorDict({ a = T.zeros(2) }, { 2 })
    assert.are.equal(open, kit.writable(open))
  end)
end)

describe("flow.kit.write_file", function()
  it("writes a string or a writer's pieces as the whole file, leaving no temporary", function()
    local d = H.tmpdir()
    local path = d .. "/out.csv"
    assert.is_true(kit.write_file(path, "a,b\n1,2\n"))
    assert.are.equal("a,b\n1,2\n", H.read(path))
    assert.is_true(kit.write_file(path, function(write)
      write("lo,hi\n")
      for i = 1, 3 do write(("%d,%d\n"):format(i, i + 1)) end
      write(7)
    end, { fsync = false }))
    assert.are.equal("lo,hi\n1,2\n2,3\n3,4\n7", H.read(path))
    assert.is_true(kit.write_file(path, ""))
    assert.are.equal("", H.read(path))
    assert.are.same({ "out.csv" }, names(d))
    H.rmtree(d)
  end)

  it("leaves the old file, and no partial one, when the writer raises", function()
    local d = H.tmpdir()
    local path = d .. "/report.json"
    kit.write_file(path, "{\"old\": true}\n")
    local ok, err = pcall(kit.write_file, path, function(write)
      write("{\"new\": ")
      error("the writer failed half way")
    end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("the writer failed half way", 1, true), err)
    assert.are.equal("{\"old\": true}\n", H.read(path))
    assert.are.same({ "report.json" }, names(d))
    -- a new path stays absent
    ok = pcall(kit.write_file, d .. "/new.csv", function(write) write("x"); error("boom") end)
    assert.is_false(ok)
    assert.is_false(H.exists(d .. "/new.csv"))
    assert.are.same({ "report.json" }, names(d))
    -- a piece that is not text is refused before anything is written
    local line = here(1); local where, msg = blamed(function()
      kit.write_file(path, function(write) write({}) end, { who = "demo.Sink" })
    end)
    assert.are.equal(line, where)
    assert.is_truthy(msg:find("tensordict: demo.Sink: write(text): expected a string, got a table", 1, true), msg)
    assert.are.equal("{\"old\": true}\n", H.read(path))
    H.rmtree(d)
  end)

  it("says what failed, naming the writer, at the user's line", function()
    local d = H.tmpdir()
    local line = here(1); local where, err = blamed(function()
      kit.write_file(d .. "/missing/out.csv", "x", { who = "demo.Sink" })
    end)
    assert.are.equal(line, where)
    assert.is_truthy(err:find("tensordict: demo.Sink: cannot create a temporary beside '" .. d
      .. "/missing/out.csv': No such file or directory", 1, true), err)
    os.execute("mkdir '" .. d .. "/folder'")
    local _, err2 = blamed(function() kit.write_file(d .. "/folder", "x") end)
    assert.is_truthy(err2:find("tensordict: write_file: cannot replace '" .. d .. "/folder': Is a directory", 1, true),
      err2)
    assert.are.same({ "folder" }, names(d))
    H.raises(function() kit.write_file(d .. "/x", 3) end,
      "write_file: the content must be a string or a function writer(write), got 3")
    H.raises(function() kit.write_file(nil, "x") end, "write_file: the path must be a non-empty string, got nil")
    local ok, opt_err = pcall(kit.write_file, d .. "/x", "x", { fsyn = false })
    assert.is_false(ok)
    assert.is_truthy(tostring(opt_err):find("write_file: unknown option 'fsyn' (options: fsync, who)", 1, true))
    H.rmtree(d)
  end)
end)

describe("the physics plugin on the kit", function()
  it("reaches no internal module: it requires tensordict alone", function()
    local text = assert(H.read("plugins/physics.lua"))
    local required = {}
    for line in text:gmatch("[^\n]+") do
      if not line:match("^%s*%-%-") then
        for name in line:gmatch("require%(\"([^\"]+)\"%)") do required[#required + 1] = name end
      end
    end
    assert.are.same({ "tensordict" }, required)
    assert.is_nil(text:find("debug%.getinfo"))
    assert.is_nil(text:find("io%.open"))
  end)
end)

os.execute("rm -rf '" .. dir .. "'")
