-- check_lua_layers.lua: keeps the Lua tree layered (docs/architecture.md), reading the
-- require calls of every file under lua/tensordict (string literals: require("x"),
-- require "x", pcall(require, "x")). Fails, naming the file, the line and the rule, when
--   1. a module requires one of a layer above its own, or of another layer at its level
--      (dist and flow are peers: neither requires the other);
--   2. a module outside a class layer's folder (tensor, dict, lazy_stack) requires the
--      layer's core.lua instead of the layer itself (tensordict.tensor, tensordict.dict,
--      tensordict.lazy_stack): the layer's init.lua returns core's module after loading
--      the files that add methods to the class, so whoever holds the class holds all of
--      it, whichever files it names;
--   3. a module above the Lua layer (flow, host, repl) reaches the C library
--      (tensordict.lib) itself: it goes through the Lua layer's functions.
-- The late binding of lower modules to upper ones (late.lua) builds its module names at
-- run time and is not a require of a literal. Usage: luajit scripts/check_lua_layers.lua
-- [ROOT] (default: the tree this script is in).

-- The levels, lowest first. The flat files are the base: anyone may require them, and
-- they require only each other. init.lua is the facade over the Lua layer.
-- h5 (HDF5 files) sits between the facade, which it builds containers with, and flow,
-- whose H5Source / H5Sink read and write through it.
local LEVEL = { base = 0, tensor = 1, dict = 2, lazy_stack = 3, facade = 4, h5 = 4.5,
                dist = 5, flow = 5, host = 6, repl = 7 }
-- Layers whose folder defines a class (core.lua) that the folder's other files extend.
local CLASS = { tensor = true, dict = true, lazy_stack = true }
-- Layers that may not call the C library themselves.
local NO_FFI = { flow = true, host = true, repl = true }

local root = arg[1] or ((arg[0]:match("^(.*)/scripts/[^/]*$")) or ".")
local tree = root .. "/lua/tensordict"

-- The layer of a file, from its path under lua/tensordict ("dict/core.lua" -> dict).
local function layer_of_path(rel)
  local folder = rel:match("^([^/]+)/")
  if folder then return folder end
  return rel == "init.lua" and "facade" or "base"
end

-- The layer of a module name.
local function layer_of_module(name)
  if name == "tensordict" then return "facade" end
  local first = name:match("^tensordict%.([^.]+)")
  if not first then return nil end
  if LEVEL[first] and first ~= "base" and first ~= "facade" then return first end
  return "base"
end

local function requires(text)
  local list = {}
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local code = line:gsub("%-%-.*$", "") -- comments are prose
    for _, pat in ipairs({ "require%s*%(?%s*[\"']([%w_.]+)[\"']", "pcall%(%s*require%s*,%s*[\"']([%w_.]+)[\"']" }) do
      for name in code:gmatch(pat) do list[#list + 1] = { name = name, line = n } end
    end
  end
  return list
end

local problems = {}
local function problem(file, line, msg) problems[#problems + 1] = ("%s:%d: %s"):format(file, line, msg) end

local files = {}
local p = assert(io.popen(("cd '%s' && find . -name '*.lua' | sort"):format(tree)))
for f in p:lines() do files[#files + 1] = f:sub(3) end
p:close()
if #files == 0 then
  io.stderr:write(("check_lua_layers: no Lua files under %s\n"):format(tree))
  os.exit(2)
end

for _, rel in ipairs(files) do
  if not rel:match("cdefs") then
    local fh = assert(io.open(tree .. "/" .. rel, "r"))
    local text = fh:read("*a")
    fh:close()
    local own = layer_of_path(rel)
    local shown = "lua/tensordict/" .. rel
    local reqs = requires(text)
    for _, r in ipairs(reqs) do
      local layer = layer_of_module(r.name)
      if layer then
        if layer ~= own and LEVEL[layer] >= LEVEL[own] then
          problem(shown, r.line, ("%s (%s) requires %s (%s): a layer requires only the layers below it")
            :format(rel, own, r.name, layer))
        elseif layer ~= own and CLASS[layer] and r.name == "tensordict." .. layer .. ".core" then
          problem(shown, r.line, ("requires %s: outside its folder the class is required as tensordict.%s, "
            .. "whose init.lua loads the files that add its methods"):format(r.name, layer))
        end
        if NO_FFI[own] and r.name == "tensordict.lib" then
          problem(shown, r.line, ("the %s layer calls the C library through the Lua layer, not "
            .. "tensordict.lib"):format(own))
        end
      end
    end
  end
end

if #problems > 0 then
  io.stderr:write("check_lua_layers: the Lua layers do not hold (docs/architecture.md):\n")
  for _, msg in ipairs(problems) do io.stderr:write("  ", msg, "\n") end
  os.exit(1)
end
print(("check_lua_layers: base -> tensor -> dict -> lazy_stack -> facade -> dist, flow -> host "
  .. "-> repl holds, h5 between facade and flow (%d files)"):format(#files))
