-- dict/print.lua: tostring(td) in Python tensordict 0.15's compact layout,
--   TensorDict(batch_size=[2], fields={a: f32[3], n: [4]{x: i64[]}, s: str})
-- (fields sorted, one per line once the line would pass 80 columns), and with
-- T.set_printoptions{compact = false} the detailed layout: one line per field with its
-- shape, dtype and device, nested TensorDicts indented, then batch_size, device, locked.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local core = require("tensordict.dict.core")
local json = require("tensordict.json")
local dtypes = require("tensordict.tensor.dtype")

local mt = core.mt
local KIND_TENSOR, KIND_DICT, KIND_VALUE = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT, C.TD_ENTRY_VALUE

local options = { compact = true }
local COMPACT_WIDTH = 80

------------------------------------------------------------------------- compact

-- Each dtype's short name: uint8 -> u8, int64 -> i64, bfloat16 -> bf16, float32 -> f32.
local DTYPE_ABBR = {}
for _, name in ipairs(dtypes.list()) do
  DTYPE_ABBR[name] = (name:gsub("^uint", "u"):gsub("^int", "i"):gsub("^bfloat", "bf"):gsub("^float", "f"))
end

-- Python's type name for a non-tensor value, as 0.15 shows it.
local function value_type(v)
  if type(v) == "string" then return "str" end
  if type(v) == "boolean" then return "bool" end
  if type(v) == "number" then return (v == math.floor(v) and v == v) and "int" or "float" end
  if v == json.null then return "NoneType" end
  if type(v) == "table" then return (#v > 0 or next(v) == nil) and "list" or "dict" end
  return (type(v))
end

local function dims_text(list, from)
  local parts = {}
  for i = from, #list do parts[#parts + 1] = tostring(list[i]) end
  return "[" .. table.concat(parts, ",") .. "]"
end

local compact_body

-- One field: a string token, or {prefix, entries} for a nested container.
local function compact_entry(self, k, kind)
  local v = core.get_string(self, k)
  local nb = self._td_head.ndim
  if kind == KIND_TENSOR then
    local token = (DTYPE_ABBR[v:dtype()] or v:dtype()) .. dims_text(v:shape(), nb + 1)
    local dev = v:device()
    if dev ~= "cpu" and self:device() == nil then token = token .. "@" .. dev end
    return token
  elseif kind == KIND_DICT then
    local extra = v._td_head.ndim > nb and dims_text(v:batch_size(), nb + 1) or ""
    return { extra, compact_body(v) }
  elseif kind == KIND_VALUE then
    return value_type(v)
  end
  return "NonTensorStack"
end

local function flat(node)
  if type(node) == "string" then return node end
  local parts = {}
  for i, e in ipairs(node[2]) do parts[i] = e[1] .. ": " .. flat(e[2]) end
  return node[1] .. "{" .. table.concat(parts, ", ") .. "}"
end

function compact_body(self)
  local d = core.cdict(self)
  local entries = {}
  for _, k in ipairs(core.key_list(self)) do
    local node = compact_entry(self, k, C.td_dict_kind(d, C.td_dict_find(d, k, #k)))
    entries[#entries + 1] = { k, node, k .. ": " .. flat(node) }
  end
  table.sort(entries, function(a, b) return a[3] < b[3] end)
  return entries
end

-- node on one line when it fits in what is left of the line, else one field per line.
local function compact_render(node, indent, used, tail)
  local text = flat(node)
  if type(node) == "string" or #node[2] == 0 or used + #text + tail <= COMPACT_WIDTH then
    return text
  end
  local pad = indent .. "    "
  local lines = {}
  for i, e in ipairs(node[2]) do
    local value_tail = i == #node[2] and tail + 1 or 1
    lines[i] = pad .. e[1] .. ": " .. compact_render(e[2], pad, #pad + #e[1] + 2, value_tail)
  end
  return node[1] .. "{\n" .. table.concat(lines, ",\n") .. "}"
end

local function compact(self)
  local head = "TensorDict(batch_size=" .. dims_text(self:batch_size(), 1) .. ", "
  local device = self:device()
  if device then head = head .. "device=" .. device .. ", " end
  head = head .. "fields="
  return head .. compact_render({ "", compact_body(self) }, "", #head, 1) .. ")"
end

------------------------------------------------------------------------ detailed

local function shape_text(list) return util.format_list(list) end

local function value_text(v)
  local ok, text = pcall(json.encode, v)
  if not ok then return (tostring(v)) end
  if #text > 60 then text = text:sub(1, 57) .. "..." end
  return text
end

local function render(self, indent)
  local pad = string.rep("    ", indent)
  local d = core.cdict(self)
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
  local names = core.dim_names(self)
  if names then
    local shown = {}
    for i, name in ipairs(names) do shown[i] = name or "None" end
    lines[#lines + 1] = ("%s    names=[%s],"):format(pad, table.concat(shown, ", "))
  end
  lines[#lines + 1] = ("%s    batch_size=%s,"):format(pad, shape_text(self:batch_size()))
  lines[#lines + 1] = ("%s    device=%s,"):format(pad, self:device() or "None")
  lines[#lines + 1] = ("%s    locked=%s)"):format(pad, tostring(self:is_locked()))
  return (table.concat(lines, "\n"))
end

function mt.__tostring(self)
  if self._td_p == nil then return "TensorDict(<freed>)" end
  if options.compact then return compact(self) end
  return render(self, 0)
end

local M = { render = render, compact = compact }
-- For other containers' reprs (lazy_stack/io.lua): the pieces of the compact layout.
M.dtype_abbr, M.value_type, M.dims_text, M.compact_render, M.compact_body =
  DTYPE_ABBR, value_type, dims_text, compact_render, compact_body

-- util.options refuses unknown options; compact's type is checked here, with its own message.
local PRINT_OPTIONS = { compact = "any" }

-- T.set_printoptions{compact = false} switches tostring(td) to the detailed layout
-- (Python's set_printoptions(compact=False)); returns the options before the change.
function M.set_printoptions(opts)
  if type(opts) ~= "table" then
    util.fail(("set_printoptions: expected a table such as {compact = false}, got %s")
      :format(util.describe(opts)))
  end
  util.options("set_printoptions", opts, PRINT_OPTIONS)
  local before = { compact = options.compact }
  if opts.compact ~= nil then
    if type(opts.compact) ~= "boolean" then
      util.fail(("set_printoptions: compact must be a boolean, got %s"):format(util.describe(opts.compact)))
    end
    options.compact = opts.compact
  end
  return before
end

function M.get_printoptions() return { compact = options.compact } end

return M
