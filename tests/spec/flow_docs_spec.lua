-- flow_docs_spec.lua: docs/flow.md's node reference is the one the registry generates
-- (run `luajit scripts/gen_flow_docs.lua --write` after changing a node type).
local gen = dofile("scripts/gen_flow_docs.lua")

describe("docs/flow.md", function()
  it("has the node reference the registry generates", function()
    local f = assert(io.open("docs/flow.md", "rb"))
    local text = f:read("*a")
    f:close()
    assert.is_truthy(text:find(gen.reference(), 1, true),
      "docs/flow.md is out of date: run luajit scripts/gen_flow_docs.lua --write")
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
end)
