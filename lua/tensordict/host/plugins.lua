-- host/plugins.lua: finds and loads plugins, the modules that supply node types and named
-- functions to recipes. A plugin is a Lua file returning
--   { name = "physics", version = "1.0", doc = "...", nodes = { Type = class }, functions = { f = fn } }
-- Node classes are made with flow.define; functions become "<plugin>.<name>". The
-- built-in steps come in the same way, as the plugin "core" (flow/core_plugin.lua).
-- Search path: the tree's plugins/, the installed plugin folder, then the folders of
-- TDFLOW_PLUGIN_PATH (':'-separated; a folder there that does not exist is an error
-- naming it: a typo must not leave a plugin unloaded in silence). An optional docs =
-- { f = "one line" } documents the functions for `tdflow plugins`, an optional takes =
-- { f = "batch" | "tensors" } says what each is a function of (recipes' checks refuse a
-- function of tensors where a batch is passed, and the reverse). A type or function
-- defined twice is an error naming both files. An optional factories = { f = {make =,
-- args =, takes =, doc =} } adds functions that take args in recipes ({"use":
-- "<plugin>.f", "args": {...}}: flow/fn_args.lua).
local util = require("tensordict.util")
local fs = require("tensordict.fs")
local core = require("tensordict.flow.core")
require("tensordict.flow") -- the built-in types are defined

local fail, describe = util.fail, util.describe

local M = {}

M.loaded = {}      -- plugin name -> { name, version, doc, file, nodes = {names}, functions = {names} }
M.order = {}       -- plugin names in load order
M.origin = {}      -- "type Apply" / "function physics.energy" -> the file that supplied it

-- .../lua/tensordict: this file is in its host/ folder
local here = fs.dirname(fs.dirname(debug.getinfo(1, "S").source:sub(2)))

-- The folders searched, in order: the tree's and the installed one when they exist,
-- then every folder of TDFLOW_PLUGIN_PATH, which must.
function M.search_path()
  local dirs = {}
  local function add(d)
    if d and d ~= "" and fs.is_dir(d) then
      for _, seen in ipairs(dirs) do if seen == d then return end end
      dirs[#dirs + 1] = d
    end
  end
  add(here .. "/../../plugins")   -- a source tree
  add(here .. "/plugins")         -- installed next to the modules
  for d in (os.getenv("TDFLOW_PLUGIN_PATH") or ""):gmatch("[^:]+") do
    if not fs.is_dir(d) then
      fail(("plugin path: TDFLOW_PLUGIN_PATH names '%s', which %s"):format(d,
        fs.exists(d) and "is not a folder" or "does not exist"))
    end
    add(d)
  end
  return dirs
end

local function plugin_error(file, msg)
  fail(("plugin %s: %s"):format(file, msg))
end

-- Registers a plugin table that came from file.
function M.register(plugin, file)
  if type(plugin) ~= "table" then
    plugin_error(file, ("must return a table {name =, version =, nodes =, functions =}, got %s")
      :format(describe(plugin)))
  end
  local name = plugin.name
  if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") then
    plugin_error(file, ("name must be an identifier, got %s"):format(describe(name)))
  end
  if M.loaded[name] then
    plugin_error(file, ("a plugin named '%s' is loaded already from %s"):format(name, M.loaded[name].file))
  end
  for _, field in ipairs({ "nodes", "functions", "factories" }) do
    if plugin[field] ~= nil and type(plugin[field]) ~= "table" then
      plugin_error(file, ("%s must be a table, got %s"):format(field, describe(plugin[field])))
    end
  end
  if plugin.docs ~= nil and type(plugin.docs) ~= "table" then
    plugin_error(file, ("docs must be a table {function_name = \"one line\"}, got %s"):format(describe(plugin.docs)))
  end
  for fname, takes in pairs(type(plugin.takes) == "table" and plugin.takes or {}) do
    if takes ~= "batch" and takes ~= "tensors" then
      plugin_error(file, ("takes.%s must be \"batch\" or \"tensors\", got %s"):format(tostring(fname), describe(takes)))
    end
    if type((plugin.functions or {})[fname]) ~= "function" then
      plugin_error(file, ("takes.%s: the plugin has no function '%s'"):format(tostring(fname), tostring(fname)))
    end
  end
  if plugin.takes ~= nil and type(plugin.takes) ~= "table" then
    plugin_error(file, ("takes must be a table {function_name = \"batch\" | \"tensors\"}, got %s")
      :format(describe(plugin.takes)))
  end
  local entry = { name = name, version = tostring(plugin.version or "?"), doc = plugin.doc or "",
    file = file, nodes = {}, functions = {}, docs = {} }
  for type_name, cls in pairs(plugin.nodes or {}) do
    local key = "type " .. type_name
    local existing = core.registry[type_name]
    if existing ~= nil and existing ~= cls then
      plugin_error(file, ("node type '%s' is defined already by %s")
        :format(type_name, M.origin[key] or "another module"))
    end
    if M.origin[key] and M.origin[key] ~= file then
      plugin_error(file, ("node type '%s' is defined already by %s"):format(type_name, M.origin[key]))
    end
    if existing == nil then core.register(type_name, cls) end
    M.origin[key] = file
    entry.nodes[#entry.nodes + 1] = type_name
  end
  for fname, fn in pairs(plugin.functions or {}) do
    local full = name .. "." .. fname
    local key = "function " .. full
    if M.origin[key] then
      plugin_error(file, ("function '%s' is defined already by %s"):format(full, M.origin[key]))
    end
    if type(fn) ~= "function" then
      plugin_error(file, ("function '%s' is %s, not a function"):format(full, describe(fn)))
    end
    core.register_function(full, fn, plugin.takes and plugin.takes[fname])
    M.origin[key] = file
    entry.docs[full] = plugin.docs and plugin.docs[fname] or ""
    entry.functions[#entry.functions + 1] = full
  end
  for fname, def in pairs(plugin.factories or {}) do
    local full = name .. "." .. fname
    local key = "function " .. full
    if M.origin[key] or core.functions[full] then
      plugin_error(file, ("function '%s' is defined already by %s"):format(full, M.origin[key] or "another module"))
    end
    local ok, err = pcall(require("tensordict.flow.fn_args").register, full, def)
    if not ok then plugin_error(file, (tostring(err):gsub("^.-tensordict: ", ""))) end
    M.origin[key] = file
    entry.docs[full] = type(def) == "table" and def.doc or ""
    entry.functions[#entry.functions + 1] = full
  end
  table.sort(entry.nodes)
  table.sort(entry.functions)
  M.loaded[name] = entry
  M.order[#M.order + 1] = name
  return entry
end

-- Loads one plugin file. A node type defined twice (flow.define raises) names both files.
function M.load_file(file)
  local chunk, err = loadfile(file)
  if not chunk then plugin_error(file, "does not load: " .. err) end
  local ok, plugin = pcall(chunk)
  if not ok then
    local dup = tostring(plugin):match("node type '([^']+)' is defined twice")
    if dup then
      plugin_error(file, ("node type '%s' is defined already by %s"):format(dup,
        M.origin["type " .. dup] or "another module"))
    end
    plugin_error(file, "failed while loading: " .. tostring(plugin))
  end
  return M.register(plugin, file)
end

-- Loads the core plugin, then every *.lua of every folder on the search path, once.
local files_loaded = {}
function M.load_all()
  if not M.loaded.core then
    M.register(require("tensordict.flow.core_plugin"), here .. "/flow/core_plugin.lua")
  end
  for _, dir in ipairs(M.search_path()) do
    for _, name in ipairs(fs.list(dir) or {}) do
      local file = dir .. "/" .. name
      if name:match("%.lua$") and not files_loaded[file] then
        files_loaded[file] = true
        M.load_file(file)
      end
    end
  end
  return M.loaded
end

return M
