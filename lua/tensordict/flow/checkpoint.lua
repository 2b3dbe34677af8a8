-- flow/checkpoint.lua: a pipeline's state on disk, for resumable runs (docs/flow.md,
-- "Checkpoints and resume"). A state value is what node:state() and source:state()
-- return: nil, booleans, numbers, strings, TensorDicts, tensors and tables of these.
-- write(dir, value) puts one into a folder the sink's checkpoint then records (C:
-- td_memmap_append_stage / _checkpoint): "state.json" holds the plain part, and each
-- TensorDict or tensor is a memmap folder of its own ("td-<n>", Python tensordict's
-- layout: exact bytes, NaN included, any dtype), referred to from the JSON as
-- {"$td": "td-<n>"} or {"$tensor": "td-<n>"}. read(dir) gives the value back, its
-- TensorDicts and tensors copied into memory (the folder is replaced at the next
-- checkpoint).
local util = require("tensordict.util")
local json = require("tensordict.json")
local fs = require("tensordict.fs")
local td_core = require("tensordict.dict")
local td_memmap = require("tensordict.dict.memmap")
local tensor = require("tensordict.tensor")

local describe = util.describe
local is_td, is_tensor = td_core.is_td, tensor.is_tensor

local M = {}

M.STATE_FILE = "state.json"

-- Numbers JSON cannot hold, by their text.
local SPECIAL = { nan = 0 / 0, inf = math.huge, ["-inf"] = -math.huge }

local function special_name(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
end

-- The plain form of v (where: its path, for messages); bulk goes to dir as it is met.
local function encode(v, where, out)
  local t = type(v)
  if t == "nil" or t == "boolean" or t == "string" then return v end
  if t == "number" then
    local name = special_name(v)
    if name then return { ["$number"] = name } end
    return v
  end
  if is_td(v) or is_tensor(v) then
    out.n = out.n + 1
    local name = "td-" .. out.n
    local td = is_td(v) and v or td_core.construct({ t = v }, {})
    td:memmap(out.dir .. "/" .. name, { fsync = out.fsync })
    return { [is_td(v) and "$td" or "$tensor"] = name }
  end
  local mt = getmetatable(v)
  if t == "table" and (mt == nil or mt == json.object_mt or mt == json.array_mt) then
    local plain, n = {}, 0
    for k, x in pairs(v) do
      n = n + 1
      if type(k) == "string" and k:sub(1, 1) == "$" then
        util.fail(("checkpoint: %s: keys starting with '$' are reserved (got '%s')"):format(where, k))
      end
      if type(k) ~= "string" and not util.is_int(k) then
        util.fail(("checkpoint: %s: a state table's keys are strings or list indices, got %s")
          :format(where, describe(k)))
      end
      plain[k] = encode(x, ("%s.%s"):format(where, tostring(k)), out)
    end
    if n > 0 and #v ~= n and #v > 0 then
      util.fail(("checkpoint: %s: a state table is a list or a table of string keys, not both"):format(where))
    end
    return (setmetatable(plain, mt == json.object_mt and mt or nil)) -- {} stays an object
  end
  util.fail(("checkpoint: %s: %s has no place in a checkpoint (states hold numbers, strings, booleans, "
    .. "tables, tensors and TensorDicts)"):format(where, describe(v)))
end

-- Writes value into the folder dir (existing and empty) as state.json and its memmap
-- folders. opts.fsync = false skips the syncs (as the sink's fsync parameter).
function M.write(dir, value, opts)
  local out = { dir = dir, n = 0, fsync = not (opts and opts.fsync == false) }
  local plain = encode(value, "state", out)
  local ok, err = fs.write_atomic(dir .. "/" .. M.STATE_FILE, json.encode({ value = plain }) .. "\n", out.fsync)
  if not ok then util.fail("checkpoint: " .. err) end
end

local function decode(v, dir)
  if type(v) ~= "table" then return v end
  if v["$number"] then return SPECIAL[v["$number"]] end
  local name = v["$td"] or v["$tensor"]
  if name then
    local td = td_memmap.load_memmap(dir .. "/" .. name):clone()
    if v["$tensor"] then return td:get("t") end
    return td
  end
  local out = {}
  for k, x in pairs(v) do out[k] = decode(x, dir) end
  return (setmetatable(out, getmetatable(v) == json.object_mt and json.object_mt or nil))
end

-- The value written into dir; raises naming the folder when it does not read.
function M.read(dir)
  local f = io.open(dir .. "/" .. M.STATE_FILE, "rb")
  if not f then util.fail(("checkpoint: %s has no %s: the checkpoint is damaged"):format(dir, M.STATE_FILE)) end
  local text = f:read("*a")
  f:close()
  local ok, doc = pcall(json.decode, text)
  if not ok or type(doc) ~= "table" then
    util.fail(("checkpoint: %s/%s does not read: %s"):format(dir, M.STATE_FILE, tostring(doc)))
  end
  return decode(doc.value, dir)
end

return M
