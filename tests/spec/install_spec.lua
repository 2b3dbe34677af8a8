-- 'make install' lays out a prefix that works on its own: the Lua modules find the
-- library next to them, and pkg-config users find the header and library. The
-- launchers (tdflow, tdrepl, tdlua) work from the tree, from an install (make install,
-- and luarocks where it is installed), through a symlink and as ./tdflow in their
-- folder.
local H = require("helpers")

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  local ok = p:close()
  return out, ok
end

local root = H.pwd()

-- What every launcher of the folder bin (a prefix's bin, or the tree's scripts) does,
-- started from another folder, through a symlink and as ./name in its own folder; the
-- modules and the library come from where the launcher really is (lua_root: the
-- folder its modules are in). keep_lib: TENSORDICT_LIB is passed on (the run is against
-- another build than the one the launchers look for: make asan's).
local function check_launchers(bin, lua_root, keep_lib)
  local links = H.tmpdir()
  local env = "env " .. (keep_lib and "" or "-u TENSORDICT_LIB ") .. "-u LUA_PATH -u LUA_CPATH -u TDREPL_HISTORY"
  for _, name in ipairs({ "tdflow", "tdrepl", "tdlua" }) do
    assert.is_true(H.sh(("ln -s '%s/%s' '%s/%s'"):format(bin, name, links, name)))
  end
  local plugin_line = "core 1  (" .. lua_root .. "/tensordict/flow/core_plugin.lua)"
  for _, start in ipairs({ ("cd / && %s '%s/tdflow'"):format(env, bin),
    ("cd / && %s '%s/tdflow'"):format(env, links), ("cd '%s' && %s ./tdflow"):format(bin, env) }) do
    local out = run(start .. " plugins")
    assert.are.equal(plugin_line, out:match("^[^\n]*"), start .. "\n" .. out)
    out = run(start .. " --version")
    assert.is_truthy(out:match("^tdflow %d+%.%d+%.%d+ %(libtensordict "), start .. "\n" .. out)
  end
  for _, start in ipairs({ ("cd / && %s '%s/tdrepl'"):format(env, bin),
    ("cd / && %s '%s/tdrepl'"):format(env, links), ("cd '%s' && %s ./tdrepl"):format(bin, env) }) do
    local line = 'T.zeros(2, 3):shape(), package.searchpath("tensordict", package.path)'
    local out = run(("echo '%s' | (%s)"):format(line, start))
    assert.are.equal("[2, 3]\t" .. lua_root .. "/tensordict/init.lua\n", out, start)
  end
  for _, start in ipairs({ ("cd / && %s '%s/tdlua'"):format(env, bin),
    ("cd / && %s '%s/tdlua'"):format(env, links), ("cd '%s' && %s ./tdlua"):format(bin, env) }) do
    local out = run(start .. [[ -e 'local T = require("tensordict") ]]
      .. [[print(T.zeros(4):numel(), T.flow.PROTOCOL_VERSION)']])
    assert.are.equal("4\t1\n", out, start)
  end
  H.rmtree(links)
end

describe("the launchers in the source tree", function()
  it("find the tree's modules from anywhere, through a symlink and as ./tdflow in scripts/", function()
    -- the launchers look for build/libtensordict.so; a run against another build (make
    -- asan's, in CI before any plain build) points them at its own
    local lib = os.getenv("TENSORDICT_LIB")
    local other_build = lib ~= nil and lib ~= root .. "/build/libtensordict.so" and lib ~= "build/libtensordict.so"
    check_launchers(root .. "/scripts", root .. "/lua", other_build)
  end)
end)

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
      "/share/lua/5.1/tensordict/flow/init.lua", "/bin/tdflow", "/bin/tdrepl", "/bin/tdlua",
      "/lib/pkgconfig/tensordict.pc" }) do
      local f = io.open(prefix .. path, "rb")
      assert.is_truthy(f, "missing " .. path .. "\n" .. out)
      f:close()
    end
    local pc = run(("PKG_CONFIG_PATH=%s/lib/pkgconfig pkg-config --cflags --libs tensordict"):format(prefix))
    assert.is_truthy(pc:find("-I" .. prefix .. "/include", 1, true), pc)
    assert.is_truthy(pc:find("-ltensordict", 1, true), pc)
    -- a static link needs the library's own dependencies
    pc = run(("PKG_CONFIG_PATH=%s/lib/pkgconfig pkg-config --static --libs tensordict"):format(prefix))
    assert.are.equal(("-L%s/lib -ltensordict -lm -lpthread -lopenblas -lcjson -lsleef -lz"):format(prefix),
      (pc:gsub("%s+$", "")))
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

  it("installs launchers that work through a symlink and as ./tdflow in bin/", function()
    check_launchers(prefix .. "/bin", prefix .. "/share/lua/5.1")
  end)
end)

-- luarocks (Debian's luarocks package) builds with the Makefile into a rocks tree; its
-- launchers must run under LuaJIT, not behind wrappers for the Lua luarocks is set up
-- for, and tensordict.pc must land where pkg-config looks for the tree.
describe("luarocks make", function()
  local has_luarocks = H.sh("command -v luarocks >/dev/null 2>&1")
  local lib = os.getenv("TENSORDICT_LIB") or "build/libtensordict.so"
  local build = lib:match("^(.*)/libtensordict%.so$") or "build"

  it("installs a rock whose tdflow, tdrepl and tdlua run under LuaJIT, with tensordict.pc in <tree>/lib/pkgconfig",
    function()
      if not has_luarocks then return pending("luarocks is not installed (apt-get install luarocks)") end
      local tree = H.tmpdir()
      local out, ok = run(("BUILD=%s luarocks --lua-version 5.1 --tree %s make rockspec/tensordict-scm-1.rockspec "
        .. "LUA_INCDIR=/usr/include/luajit-2.1"):format(build, tree))
      assert.is_true(ok, out)
      for _, name in ipairs({ "tdflow", "tdrepl", "tdlua" }) do
        local f = assert(io.open(tree .. "/bin/" .. name, "rb"))
        local first = f:read("*l")
        f:close()
        assert.are.equal(name == "tdlua" and "#!/bin/sh" or "#!/usr/bin/env luajit", first, name)
      end
      check_launchers(tree .. "/bin", tree .. "/share/lua/5.1")
      local pc = run(("PKG_CONFIG_PATH=%s/lib/pkgconfig pkg-config --static --cflags --libs tensordict"):format(tree))
      assert.are.equal(("-I%s/lib/luarocks/rocks-5.1/tensordict/scm-1/include -L%s/lib/lua/5.1 -ltensordict "
        .. "-lm -lpthread -lopenblas -lcjson -lsleef -lz"):format(tree, tree), (pc:gsub("%s+$", "")))
      assert.is_true(H.exists(tree .. "/lib/lua/5.1/libtensordict.so"))
      assert.is_false(H.exists(tree .. "/lib/lua/5.1/pkgconfig/tensordict.pc"))
      H.rmtree(tree)
    end)
end)
