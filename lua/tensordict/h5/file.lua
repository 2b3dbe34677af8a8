-- h5/file.lua: an HDF5 file as tensordict.h5 reads it: the open file (closed with its
-- last reference, or by close), the links of a group, what a dataset holds, and reads
-- of whole datasets, of row ranges (hyperslabs) and of row lists into new tensors.
local ffi = require("ffi")
local h5lib = require("tensordict.h5.lib")
local TC = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local dtype = require("tensordict.tensor.dtype")

local M = {}
local fail = util.fail

-- "call: HDF5's message for the failed call" as a tensordict error.
function M.fail(call, C)
  fail(call .. ": " .. ffi.string(C.td_h5_last_error()))
end

local name_buf = ffi.new("char[?]", 4096)
local kind_buf = ffi.new("int32_t[1]")
local KINDS = { [0] = "group", [1] = "dataset" }

-- An open file: {C =, path =, writable =, box =, dsets = {path -> id}}.
function M.open(call, path, writable)
  local C = h5lib.need(call)
  local id = C.td_h5_open(path, writable and 1 or 0)
  if id < 0 then M.fail(call, C) end
  local box = ffi.gc(ffi.new("int64_t[1]", id), function(b) if b[0] >= 0 then C.td_h5_close(b[0]) end end)
  return { C = C, path = path, writable = writable, box = box, dsets = {} }
end

function M.id(f, call)
  if f.box[0] < 0 then fail(("%s: the HDF5 file %s is closed"):format(call, f.path)) end
  return f.box[0]
end

function M.close(f)
  if f.box[0] >= 0 then
    local id = f.box[0]
    f.box[0] = -1
    f.dsets = {}
    if f.C.td_h5_close(id) < 0 then M.fail("close", f.C) end
  end
end

-- A string the C side wrote into name_buf, or again with a larger buffer.
local function sized(get)
  local n = get(name_buf, 4096)
  if n < 0 then return nil end
  if n < 4096 then return (ffi.string(name_buf, n)) end
  local big = ffi.new("char[?]", n + 1)
  get(big, n + 1)
  return (ffi.string(big, n))
end

-- The links of a group, in name order: {name =, kind = "group" | "dataset" | nil}.
function M.children(f, group, call)
  local C, id = f.C, M.id(f, call)
  local n = C.td_h5_child_count(id, group)
  if n < 0 then M.fail(call, C) end
  local out = {}
  for i = 0, tonumber(n) - 1 do
    local name = sized(function(buf, cap) return C.td_h5_child(id, group, i, buf, cap, kind_buf) end)
    if not name then M.fail(call, C) end
    out[#out + 1] = { name = name, kind = KINDS[kind_buf[0]] }
  end
  return out
end

-- The dataset's id (kept open with the file: its chunk cache serves the next reads).
function M.dataset(f, path, call)
  local d = f.dsets[path]
  if d then return d end
  d = f.C.td_h5_dataset_open(M.id(f, call), path)
  if d < 0 then M.fail(call, f.C) end
  f.dsets[path] = d
  return d
end

local info_buf
-- What the dataset at path holds: {content = "tensor" | "string", dtype = name, shape =,
-- chunk = (nil unless chunked), compressed =, marker =}; fails naming path for a type
-- no dtype holds (compound, variable-length array, ...).
function M.info(f, path, call)
  local C = f.C
  info_buf = info_buf or ffi.new("td_h5_info")
  if C.td_h5_dataset_info(M.dataset(f, path, call), info_buf) < 0 then
    fail(("%s: dataset %s: %s"):format(call, path, ffi.string(C.td_h5_last_error()):gsub("^dataset: ", "")))
  end
  local shape = {}
  for i = 0, info_buf.ndim - 1 do shape[i + 1] = tonumber(info_buf.shape[i]) end
  local chunk
  if info_buf.chunked ~= 0 then
    chunk = {}
    for i = 0, info_buf.ndim - 1 do chunk[i + 1] = tonumber(info_buf.chunk[i]) end
  end
  return { content = info_buf.content == C.TD_H5_STRING and "string" or "tensor",
           dtype = info_buf.content == C.TD_H5_TENSOR and dtype.name(info_buf.dtype) or nil,
           shape = shape, chunk = chunk, compressed = info_buf.filtered ~= 0, marker = info_buf.str_marker ~= 0 }
end

local function data_of(t) return (TC.td_tensor_data_borrow(tensor.handle(t))) end

-- Rows [row0, row0 + n) (0-based) of a tensor dataset, as a tensor; the whole of a
-- 0-dim one when row0 is nil.
function M.read_rows(f, path, info, row0, n, call)
  local shape = {}
  for i, s in ipairs(info.shape) do shape[i] = s end
  if #shape > 0 then shape[1] = n end
  local t = create.empty(shape, info.dtype)
  local code = dtype.code(info.dtype)
  if f.C.td_h5_read_rows(M.dataset(f, path, call), code, row0 or 0, #shape > 0 and n or 1, data_of(t)) < 0 then
    M.fail(call .. ": " .. path, f.C)
  end
  return t
end

-- The rows listed (0-based, an int64_t array of n) of a tensor dataset.
function M.read_index(f, path, info, rows, n, call)
  local shape = {}
  for i, s in ipairs(info.shape) do shape[i] = s end
  shape[1] = n
  local t = create.empty(shape, info.dtype)
  if f.C.td_h5_read_index(M.dataset(f, path, call), dtype.code(info.dtype), rows, n, data_of(t)) < 0 then
    M.fail(call .. ": " .. path, f.C)
  end
  return t
end

-- A string dataset as a Lua string (0-dim) or nested tables of strings, row-major.
function M.read_strings(f, path, info, call)
  local C, d = f.C, M.dataset(f, path, call)
  local k = -1
  local function one()
    k = k + 1
    local s = sized(function(buf, cap) return C.td_h5_read_string(d, k, buf, cap) end)
    if not s then M.fail(call .. ": " .. path, C) end
    return s
  end
  local function level(dim)
    if dim > #info.shape then return one() end
    local out = {}
    for i = 1, info.shape[dim] do out[i] = level(dim + 1) end
    return out
  end
  return level(1)
end

local attr_kind, attr_n = ffi.new("int32_t[1]"), ffi.new("int64_t[1]")
-- The attributes of the object at path: numbers, strings, or lists of them (a
-- one-element array as its value); those of other types are left out.
function M.attrs(f, path, call)
  local C, id = f.C, M.id(f, call)
  local n = C.td_h5_attr_count(id, path)
  if n < 0 then M.fail(call, C) end
  local out = {}
  for i = 0, n - 1 do
    local name = sized(function(buf, cap) return C.td_h5_attr_name(id, path, i, buf, cap) end)
    if not name or C.td_h5_attr_info(id, path, name, attr_kind, attr_n) < 0 then M.fail(call, C) end
    local count, values = tonumber(attr_n[0]), {}
    if attr_kind[0] == 0 then
      local buf = ffi.new("double[?]", math.max(count, 1))
      if C.td_h5_attr_numbers(id, path, name, buf, count) < 0 then M.fail(call, C) end
      for j = 1, count do values[j] = buf[j - 1] end
    elseif attr_kind[0] == 1 then
      for j = 1, count do
        values[j] = sized(function(b, cap) return C.td_h5_attr_string(id, path, name, j - 1, b, cap) end)
        if not values[j] then M.fail(call, C) end
      end
    end
    if attr_kind[0] ~= 2 then out[name] = count == 1 and values[1] or values end
  end
  return out
end

return M
