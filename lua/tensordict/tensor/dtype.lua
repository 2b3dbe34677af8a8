-- tensor/dtype.lua: dtype names and codes as the C library defines them.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")

local M = {}
local by_name, names = {}, {}
for code = 0, C.TD_NUM_DTYPES - 1 do
  local name = ffi.string(C.td_dtype_name(code))
  names[code] = name
  by_name[name] = code
end

M.BOOL, M.INT64, M.FLOAT32, M.FLOAT64 = C.TD_BOOL, C.TD_INT64, C.TD_FLOAT32, C.TD_FLOAT64

-- The code for a dtype name ("float32", "torch.float32" or a torch alias).
function M.code(name, call)
  local code = by_name[name]
  if code then return code end
  if type(name) ~= "string" then
    util.fail(("%s: dtype must be a string such as 'float32', got %s"):format(call, util.describe(name)))
  end
  code = C.td_dtype_from_name(name)
  if code < 0 then util.fail(call .. ": " .. ffi.string(C.td_last_error())) end
  by_name[name] = code
  return code
end

function M.name(code) return names[code] end

function M.is_floating(code) return C.td_dtype_is_floating(code) ~= 0 end

-- Bytes per element of a dtype name.
function M.itemsize(name) return tonumber(C.td_dtype_itemsize(M.code(name, "itemsize"))) end

function M.is_integer(code)
  return code == C.TD_UINT8 or code == C.TD_INT8 or code == C.TD_INT16 or code == C.TD_INT32
    or code == C.TD_INT64
end

-- Every canonical name, in code order.
function M.list()
  local t = {}
  for code = 0, C.TD_NUM_DTYPES - 1 do t[#t + 1] = names[code] end
  return t
end

return M
