-- dict/convert.lua: TensorDict casts by torch's method names (td:float(), ...) and
-- td:tolist() (Python's TensorDict.tolist).
local C = require("tensordict.lib").C
local dtypes = require("tensordict.tensor.dtype")
local tensor = require("tensordict.tensor")
local core = require("tensordict.dict.core")

local TD, cdict, wrap, is_td = core.methods, core.cdict, core.wrap, core.is_td
local is_tensor = tensor.is_tensor

-- Every tensor leaf cast, whatever its dtype (Python's td.float() casts integer and bool
-- leaves too, unlike td:to(dtype), which casts the floating ones).
for name, dtype in pairs(dtypes.CASTS) do
  local code = dtypes.code(dtype, name)
  TD[name] = function(self) return wrap(C.td_dict_to_dtype(cdict(self), code, 0)) end
end

-- The entry of a nested list at batch position pos (an array of 1-based indices).
local function pick(list, pos)
  for _, i in ipairs(pos) do list = list[i] end
  return list
end

-- td:tolist(): nested Lua arrays over the batch dims, each element a table
-- {key = value} with the leaf's values there as Lua numbers, booleans or nested arrays
-- (Python's td.tolist(convert_tensors=True); Python's default keeps 0-dim tensors).
-- Nested TensorDicts become nested tables; non-tensor values appear in every element.
function TD.tolist(self)
  cdict(self)
  local keys = core.key_list(self)
  local lists = {}
  for _, k in ipairs(keys) do
    local v = core.get_string(self, k)
    if is_tensor(v) then
      lists[k] = { tensor = v:totable() }
    elseif is_td(v) then
      lists[k] = { tensor = TD.tolist(v) } -- nested over its batch dims, which start with ours
    else
      lists[k] = { value = v }
    end
  end
  local batch = self:batch_size()
  local pos = {}
  local function element()
    local e = {}
    for _, k in ipairs(keys) do
      local l = lists[k]
      if l.tensor ~= nil then e[k] = pick(l.tensor, pos) else e[k] = l.value end
    end
    return e
  end
  local function level(d)
    if d > #batch then return element() end
    local out = {}
    for i = 1, batch[d] do
      pos[d] = i
      out[i] = level(d + 1)
    end
    pos[d] = nil
    return out
  end
  return level(1)
end

return {}
