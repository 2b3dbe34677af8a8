-- flow_docs_spec.lua: docs/flow.md's node reference is the one the registry generates
-- (run `luajit scripts/gen_flow_docs.lua --write` after changing a node type).
local gen = dofile("scripts/gen_flow_docs.lua")

describe("the generated node reference", function()
  it("docs/flow.md and docs/recipes.md have the node reference the registry generates", function()
    require("tensordict.plugins").load_all()
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
end)
