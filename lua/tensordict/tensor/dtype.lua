-- tensor/dtype.lua: dtype names and codes as the C library defines them.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")

local M = {}
-- Names, codes and cast methods come from C's dtype table (core/include/dtype_table.h):
-- M.BOOL, M.INT64, ... are the codes by upper-case name; M.CASTS maps torch's cast
-- methods to dtype names (float = "float32", byte = "uint8", ...).
local by_name, names = {}, {}
M.CASTS = {}
for code = 0, C.TD_NUM_DTYPES - 1 do
  local name = ffi.string(C.td_dtype_name(code))
  names[code] = name
  by_name[name] = code
  M[name:upper()] = code
  M.CASTS[ffi.string(C.td_dtype_method_name(code))] = name
end

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
-- The largest value of a dtype (finite for the floating ones), from the dtype table.
function M.max_value(code) return (tonumber(C.td_dtype_max(code))) end

-- Bytes per element of a dtype name.
function M.itemsize(name) return (tonumber(C.td_dtype_itemsize(M.code(name, "itemsize")))) end

-- A dtype that is neither floating nor bool.
function M.is_integer(code)
  return names[code] ~= nil and code ~= M.BOOL and not M.is_floating(code)
end

-- Every canonical name, in code order.
function M.list()
  local t = {}
  for code = 0, C.TD_NUM_DTYPES - 1 do t[#t + 1] = names[code] end
  return t
end

return M
