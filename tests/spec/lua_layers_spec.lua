-- lua_layers_spec.lua: scripts/check_lua_layers.lua holds on the tree and fails, naming
-- the file, the line and the rule, on each kind of violation planted in a copy.
local H = require("helpers")

local function run(root)
  local p = io.popen(("luajit scripts/check_lua_layers.lua %s 2>&1; echo \"rc=$?\""):format(root))
  local out = p:read("*a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

-- A tree of lua/tensordict files: files[path] = text.
local function tree(files)
  local root = H.tmpdir()
  for path, text in pairs(files) do
    local full = root .. "/lua/tensordict/" .. path
    os.execute(("mkdir -p '%s'"):format(full:match("^(.*)/")))
    local f = assert(io.open(full, "w"))
    f:write(text)
    f:close()
  end
  return root
end

describe("check_lua_layers", function()
  it("holds on this tree", function()
    local out, rc = run(".")
    assert.are.equal(0, rc, out)
    assert.is_truthy(out:find("holds", 1, true), out)
  end)

  it("refuses a require of a layer above, or of a peer", function()
    local out, rc = run(tree({
      ["tensor/tile.lua"] = 'local util = require("tensordict.util")\nlocal d = require("tensordict.dict")\n',
      ["flow/seq.lua"] = '-- require("tensordict.dist") in a comment is prose\nlocal x = require "tensordict.dist"\n',
    }))
    assert.are.equal(1, rc, out)
    assert.is_truthy(out:find("lua/tensordict/tensor/tile.lua:2: tensor/tile.lua (tensor) requires "
      .. "tensordict.dict (dict): a layer requires only the layers below it", 1, true), out)
    assert.is_truthy(out:find("lua/tensordict/flow/seq.lua:2: flow/seq.lua (flow) requires tensordict.dist",
      1, true), out)
    assert.is_falsy(out:find("seq.lua:1:", 1, true), out)
  end)

  it("refuses another layer's core.lua and C calls above the Lua layer", function()
    local out, rc = run(tree({
      ["flow/apply.lua"] = 'local core = require("tensordict.dict.core")\n',
      ["host/x.lua"] = 'local ok, lib = pcall(require, "tensordict.lib")\n',
    }))
    assert.are.equal(1, rc, out)
    assert.is_truthy(out:find("lua/tensordict/flow/apply.lua:1: requires tensordict.dict.core: outside its "
      .. "folder the class is required as tensordict.dict", 1, true), out)
    assert.is_truthy(out:find("lua/tensordict/host/x.lua:1: the host layer calls the C library through the "
      .. "Lua layer, not tensordict.lib", 1, true), out)
  end)
end)
