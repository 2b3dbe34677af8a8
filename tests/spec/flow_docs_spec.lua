-- flow_docs_spec.lua: docs/flow.md's node reference is the one the registry generates
-- (run `luajit scripts/gen_flow_docs.lua --write` after changing a node type), and its
-- examples run.
local gen = dofile("scripts/gen_flow_docs.lua")
local H = require("helpers")

describe("the generated node reference", function()
  it("docs/flow.md and docs/recipes.md have the node reference the registry generates", function()
    require("tensordict.host.plugins").load_all()
    for _, doc in ipairs(gen.DOCS) do
      local f = assert(io.open(doc, "rb"))
      local text = f:read("*a")
      f:close()
      assert.is_truthy(text:find(gen.reference(), 1, true),
        doc .. " is out of date: run luajit scripts/gen_flow_docs.lua --write")
    end
  end)

  it("documents every registered built-in type", function()
    local flow = require("tensordict.flow")
    local ref = gen.reference()
    for _, name in ipairs(flow.type_names()) do
      if not name:find("^Spec") then
        assert.is_truthy(ref:find("#### `" .. name .. "`", 1, true), name)
      end
    end
  end)

  it("has a host example in docs/flow.md that runs and prints what it says", function()
    local f = assert(io.open("docs/flow.md", "rb"))
    local text = f:read("*a")
    f:close()
    local code = text:match("<!%-%- host example %-%->\n```lua\n(.-)```")
    assert.is_truthy(code, "docs/flow.md has no host example")
    local expected = code:match("%-%->%s*([^\n]+)")
    local printed = {}
    local env = setmetatable({ print = function(...)
      local parts = {}
      for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
      printed[#printed + 1] = table.concat(parts, "    ")
    end }, { __index = _G })
    local chunk = assert(loadstring(code, "=docs/flow.md host example"))
    setfenv(chunk, env)()
    assert.are.equal(expected, printed[1])
    local lines = 0
    for _ in code:gmatch("\n") do lines = lines + 1 end
    assert.is_true(lines <= 20, "the host example has " .. lines .. " lines")
  end)

  it("has a plugin example in docs/flow.md that works as a plugin file, on the kit alone", function()
    local T = require("tensordict")
    local flow = T.flow
    local text = assert(H.read("docs/flow.md"))
    local code = text:match("<!%-%- plugin example %-%->\n```lua\n(.-)```")
    assert.is_truthy(code, "docs/flow.md has no plugin example")
    assert.is_nil(code:find("require%(\"tensordict%."), "the example requires an internal module")
    local plugin = assert(loadstring(code, "@docs/flow.md plugin example"))()
    local entry = require("tensordict.host.plugins").register(plugin, "docs/flow.md plugin example")
    assert.are.same({ "clip.Clip" }, entry.nodes)
    local Clip = flow["clip.Clip"]
    local dir = H.tmpdir()
    local td = T.TensorDict({ x = T.tensor({ -3, 0.5, 2, 1 }) }, { 4 })
    local out = flow.run(flow.TensorSource { td = td, batch_size = 2 },
      flow.build({ use = "clip.Clip", key = "x", report = dir .. "/clip.csv" }), flow.Collect { cat = true })
    assert.are.same({ -1, 0.5, 1, 1 }, out.x:totable())
    assert.are.equal("changed,2\n", H.read(dir .. "/clip.csv"))
    H.raises(function() Clip { key = "y" }(td) end,
      "tensordict: clip.Clip: key 'y' is missing from the batch (its keys: 'x')")
    H.raises(function() Clip { key = "s" }(T.TensorDict({ s = "text" }, {})) end,
      "tensordict: clip.Clip: key 's' must be a tensor, got 'text'")
    H.rmtree(dir)
  end)
end)
