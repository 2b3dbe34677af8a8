local T = require("tensordict")
local lib = require("tensordict.lib")
local gen = dofile("scripts/gen_cdefs.lua")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

describe("the FFI declarations", function()
  it("are exactly what the header generates (no drift)", function()
    local fresh = loadstring(gen.generate(read("core/include/tensordict.h")))()
    assert.are.equal(fresh.cdef, lib.cdef)
    assert.are.equal(fresh.abi_version, lib.abi_version)
  end)

  it("name only functions the library exports", function()
    local count = 0
    for name in lib.cdef:gmatch("([%w_]+)%s*%b()%s*;") do
      assert.is_true(pcall(function() return lib.C[name] end), "missing symbol " .. name)
      count = count + 1
    end
    assert.is_true(count > 50, "found only " .. count .. " functions")
  end)

  it("come with a library of the same ABI version", function()
    assert.are.equal(lib.abi_version, T.abi_version)
    assert.are.equal(lib.abi_version, lib.C.td_abi_version())
    assert.is_string(T.version)
  end)
end)

describe("loading the library", function()
  local function run(env, code)
    local p = io.popen(env .. " luajit -e " .. ("%q"):format(
      "package.path='lua/?.lua;lua/?/init.lua;'..package.path; " .. code) .. " 2>&1")
    local out = p:read("*a")
    p:close()
    return out
  end

  it("says what it tried when TENSORDICT_LIB points nowhere", function()
    local out = run("TENSORDICT_LIB=/nonexistent/libtensordict.so",
      "local ok, e = pcall(require, 'tensordict'); print(ok, e)")
    assert.is_truthy(out:find("false", 1, true), out)
    assert.is_truthy(out:find("cannot load libtensordict; tried: /nonexistent/libtensordict.so (absent)", 1, true), out)
  end)

  it("finds the library of a source tree without any setting", function()
    local out = run("env -u TENSORDICT_LIB", "print(require('tensordict').library_path)")
    assert.is_truthy(out:find("build/libtensordict.so", 1, true), out)
  end)
end)
