-- td_print.lua: tostring(td), in the layout of Python tensordict's repr: one line per
-- field with its shape, dtype and device, nested TensorDicts indented, then batch_size,
-- device and whether the container is locked.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local core = require("tensordict.td_core")
local json = require("tensordict.json")

local TD, mt = core.methods, core.mt
local KIND_TENSOR, KIND_DICT, KIND_VALUE = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT, C.TD_ENTRY_VALUE

local function shape_text(list) return util.format_list(list) end

local function value_text(v)
  local ok, text = pcall(json.encode, v)
  if not ok then return tostring(v) end
  if #text > 60 then text = text:sub(1, 57) .. "..." end
  return text
end

local function render(self, indent)
  local pad = string.rep("    ", indent)
  local d = core.D(self)
  local lines = { "TensorDict(", pad .. "    fields={" }
  local keys = core.key_list(self)
  for n, k in ipairs(keys) do
    local i = C.td_dict_find(d, k, #k)
    local kind = C.td_dict_kind(d, i)
    local v = core.get_string(self, k)
    local text
    if kind == KIND_TENSOR then
      text = ("Tensor(shape=%s, device=%s, dtype=%s)"):format(shape_text(v:shape()), v:device(),
        v:dtype())
    elseif kind == KIND_DICT then
      text = render(v, indent + 2)
    elseif kind == KIND_VALUE then
      text = ("NonTensorData(data=%s, batch_size=%s)"):format(value_text(v),
        shape_text(self:batch_size()))
    else
      text = ("NonTensorStack(%s, batch_size=%s)"):format(value_text(v),
        shape_text(self:batch_size()))
    end
    lines[#lines + 1] = ("%s        %s: %s%s"):format(pad, k, text, n < #keys and "," or "}")
  end
  if #keys == 0 then lines[2] = pad .. "    fields={}," else lines[#lines] = lines[#lines] .. "," end
  local names = TD.names(self)
  if names then
    local shown = {}
    for i, name in ipairs(names) do shown[i] = name or "None" end
    lines[#lines + 1] = ("%s    names=[%s],"):format(pad, table.concat(shown, ", "))
  end
  lines[#lines + 1] = ("%s    batch_size=%s,"):format(pad, shape_text(self:batch_size()))
  lines[#lines + 1] = ("%s    device=%s,"):format(pad, self:device() or "None")
  lines[#lines + 1] = ("%s    locked=%s)"):format(pad, tostring(self:is_locked()))
  return table.concat(lines, "\n")
end

function mt.__tostring(self)
  if self._td_p == nil then return "TensorDict(<freed>)" end
  return render(self, 0)
end

return { render = render }
