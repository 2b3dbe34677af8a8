-- 'make install' lays out a prefix that works on its own: the Lua modules find the
-- library next to them, and pkg-config users find the header and library.
local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  local ok = p:close()
  return out, ok
end

describe("make install", function()
  local prefix = os.tmpname()
  os.remove(prefix)
  local lib = os.getenv("TENSORDICT_LIB") or "build/libtensordict.so"
  local build = lib:match("^(.*)/libtensordict%.so$") or "build"

  teardown(function() run("rm -rf " .. prefix) end)

  it("installs the library, header, Lua modules and tensordict.pc under PREFIX", function()
    local out = run(("make -s install PREFIX=%s BUILD=%s"):format(prefix, build))
    for _, path in ipairs({ "/lib/libtensordict.so", "/include/tensordict.h",
      "/share/lua/5.1/tensordict/init.lua", "/share/lua/5.1/tensordict/cdefs.lua",
      "/share/lua/5.1/tensordict/flow/init.lua",
      "/lib/pkgconfig/tensordict.pc" }) do
      local f = io.open(prefix .. path, "rb")
      assert.is_truthy(f, "missing " .. path .. "\n" .. out)
      f:close()
    end
    local pc = run(("PKG_CONFIG_PATH=%s/lib/pkgconfig pkg-config --cflags --libs tensordict"):format(prefix))
    assert.is_truthy(pc:find("-I" .. prefix .. "/include", 1, true), pc)
    assert.is_truthy(pc:find("-ltensordict", 1, true), pc)
  end)

  it("gives modules that load the installed library with no settings", function()
    local code = "local T = require('tensordict'); print(T.library_path); print(T.zeros(2, 2):numel()); "
      .. "print('flow ' .. T.flow.PROTOCOL_VERSION .. ' ' .. #T.flow.type_names())"
    local lua_path = ("%s/share/lua/5.1/?.lua;%s/share/lua/5.1/?/init.lua"):format(prefix, prefix)
    local out = run(("cd / && env -u TENSORDICT_LIB LUA_PATH='%s' luajit -e %q"):format(lua_path, code))
    assert.is_truthy(out:find(prefix .. "/share/lua/5.1/tensordict/../../../../lib/libtensordict.so", 1, true), out)
    assert.is_truthy(out:find("\n4\n", 1, true), out)
    local version, types = out:match("flow (%d+) (%d+)")
    assert.are.equal("1", version, out)
    assert.is_true(tonumber(types) >= 18, out)
  end)

  it("records the tree's commit, which an installed library's provenance names", function()
    local commit = require("tensordict.about").tree_commit(".")
    assert.is_truthy(commit and #commit == 40, "this tree has no commit to compare")
    local code = "local a = require('tensordict.about').library(); print(a.commit); print(a.commit_from)"
    local lua_path = ("%s/share/lua/5.1/?.lua;%s/share/lua/5.1/?/init.lua"):format(prefix, prefix)
    local out = run(("cd / && env -u TENSORDICT_LIB LUA_PATH='%s' luajit -e %q"):format(lua_path, code))
    assert.are.equal(commit .. "\nmake install (" .. prefix .. "/share/lua/5.1/tensordict)\n", out)
  end)

  it("installs tdflow and tdrepl, which find the modules, the library and the plugins", function()
    local out = run(("cd / && env -u TENSORDICT_LIB -u LUA_PATH %s/bin/tdflow plugins"):format(prefix))
    assert.is_truthy(out:find("core 1", 1, true), out)
    assert.is_truthy(out:find(prefix .. "/share/lua/5.1/tensordict/plugins/physics.lua", 1, true), out)
    assert.is_truthy(out:find("physics.kinetic_energy", 1, true), out)
  end)
end)
