-- flow/masking.lua: nodes driven by a bool mask over the leading batch dims: Filter
-- (keep rows), MaskedFill (write a value where the mask holds) and Where (choose
-- between a leaf and another value per row). A mask is a bool leaf of the batch (a key),
-- what a function of the batch returns, or an expression over the batch's leaves
-- ("abs(x) < 3 and label != 2", flow/expr.lua): a string that is an identifier or a
-- dotted path of them stays a key, anything else is an expression.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local ops = require("tensordict.tensor.ops")
local core = require("tensordict.flow.core")
local expr = require("tensordict.flow.expr")

local describe = util.describe
local is_tensor = tensor.is_tensor

-- The mask param: a key (read from the batch) or a function of the batch. Declared
-- key_or_function (the host's check suggests function names for a key nobody gives)
-- and takes = "batch" (a function of tensors named there is refused by name).
local MASK_KIND = "any"
local MASK_DOC = "a bool leaf's key, an expression (\"x > 0 and not isnan(y)\"), "
  .. "or fn(td) -> bool tensor over the leading batch dims"

local function check_mask_param(self, name)
  local m = self.p[name]
  if type(m) == "function" then return end
  if type(m) == "string" and core.resolve_function(m) and not m:find("^[%w_]+$") then
    self.p[name] = core.resolve_function(m) -- a registered name such as "physics.is_bound"
    return
  end
  if type(m) == "table" and m.use ~= nil then
    local ok, fn = pcall(core.resolve_use, m) -- {use = "physics.energy_below", args = {...}}
    if not ok then self:fail("%s: %s", name, (tostring(fn):gsub("^.-tensordict: ", ""))) end
    self.p[name] = fn
    return
  end
  if type(m) == "string" and not expr.is_plain_key(m) then
    local e, problems = expr.compile(m)
    if not e then self:fail(table.concat(expr.problems_text(m, problems, name .. ": "), "\n  ")) end
    self.exprs = self.exprs or {}
    self.exprs[name] = e
    return
  end
  local ok = pcall(require("tensordict.dict").check_key, name, m)
  if not ok or m == "" then
    self:fail("%s: expected a key (a bool leaf of the batch) or a function of the batch, got %s", name, describe(m))
  end
end

-- The bool mask over the leading batch dims of td.
local function mask_of(self, td, name)
  local m = self.p[name]
  local e = self.exprs and self.exprs[name]
  local mask
  if e then
    local ok, v = pcall(e.eval, e, td)
    if not ok then self:fail("%s: %s", name, (tostring(v):gsub("^.-tensordict: ", ""))) end
    mask = v
  elseif type(m) == "function" then
    mask = m(td)
  else
    mask = core.get(self, td, m)
  end
  if e and mask:dtype() ~= "bool" then
    self:fail("%s: the expression %q gives %s values; expected bool (a comparison, isnan(x), a bool leaf)",
      name, m, mask:dtype())
  end
  if not is_tensor(mask) or mask:dtype() ~= "bool" then
    self:fail("%s %s is %s%s; expected a bool tensor over the batch dims", name,
      type(m) == "function" and "function returned" or core.key_text(m),
      describe(mask), is_tensor(mask) and (" of dtype " .. mask:dtype()) or "")
  end
  local batch, shape = td:batch_size(), mask:shape()
  local ok = #shape >= 1 and #shape <= #batch
  for i = 1, #shape do ok = ok and shape[i] == batch[i] end
  if not ok then
    self:fail("mask of shape %s does not cover the leading batch dims of batch size %s",
      util.format_list(shape), util.format_list(batch))
  end
  return mask
end

-- mask viewed with trailing size-1 dims so it broadcasts over leaf's trailing dims.
local function aligned(mask, leaf)
  local extra = leaf:dim() - mask:dim()
  if extra <= 0 then return mask end
  local shape = mask:shape()
  for _ = 1, extra do shape[#shape + 1] = 1 end
  return mask:view(shape)
end

-- The keys a mask reads: its key, or an expression's keys (none for a function).
local function mask_keys(self, name)
  local m = self.p[name]
  if self.exprs and self.exprs[name] then return { unpack(self.exprs[name].keys) } end
  if type(m) == "function" then return {} end
  return { m }
end

-- The host's key check: where in a mask's expression a key nobody gives is read.
local function key_context(self, key)
  for name, e in pairs(self.exprs or {}) do
    local text = e:key_context(key, name)
    if text ~= "" then return text end
  end
  return ""
end

-- A mask given as a key must be a bool leaf: a dtype declared upstream says so early;
-- an expression's type errors and a result that is not bool too.
local function mask_dtypes(name)
  return function(self, ks)
    local m = self.p[name]
    local e = self.exprs and self.exprs[name]
    if e then
      local dtype, problems = e:check(ks)
      local out = expr.problems_text(m, problems, name .. ": ")
      if dtype and dtype ~= "bool" then
        out[#out + 1] = ("%s: the expression %q gives %s values; a mask must be bool (a comparison, isnan(x), "
          .. "a bool leaf)"):format(name, m, dtype)
      end
      return out
    end
    if type(m) == "function" then return {} end
    return { core.dtype_problem(ks, m, function(dt) return dt == "bool" end,
      ("%s needs a bool leaf (make one with a comparison, e.g. Module with fn \"Tensor.gt\")"):format(name)) }
  end
end

local function spec_of(self)
  local out = core.Node.spec(self)
  for _, name in ipairs({ "where", "mask", "cond" }) do
    local m = self.p[name]
    if type(m) == "function" then out[name] = core.to_plain(self, name, "function", m) end
  end
  return out
end

----------------------------------------------------------------------------- Filter

local Filter = core.define("Filter", {
  doc = "Keeps the rows where the mask holds: a bool key, an expression or a function of the batch.",
  params = {
    { "where", MASK_KIND, required = true, key_or_function = true, takes = "batch", doc = MASK_DOC },
    { "keep_empty", "boolean", default = false, doc = "emit batches left with no rows (default: drop them)" },
  },
})

function Filter:init()
  check_mask_param(self, "where")
  self.in_keys = mask_keys(self, "where")
end

Filter.spec = spec_of
Filter.key_context = key_context
Filter.check_dtypes = mask_dtypes("where")

function Filter:forward(td)
  local mask = mask_of(self, td, "where")
  local out = td[mask]
  if #out == 0 and not self.p.keep_empty then return nil end
  return out
end

------------------------------------------------------------------------- MaskedFill

local MaskedFill = core.define("MaskedFill", {
  keeps_rows = true,
  doc = "Writes value into the selected leaves (default: every leaf) where the mask holds.",
  params = {
    { "mask", MASK_KIND, required = true, key_or_function = true, takes = "batch", doc = MASK_DOC },
    { "value", "number", required = true, doc = "the value written" },
    { "keys", "keys", doc = "the leaves written (default: every tensor leaf)" },
  },
})

function MaskedFill:init()
  check_mask_param(self, "mask")
  self.in_keys = mask_keys(self, "mask")
  for _, k in ipairs(self.p.keys or {}) do self.in_keys[#self.in_keys + 1] = k end
end

MaskedFill.spec = spec_of
MaskedFill.key_context = key_context
MaskedFill.check_dtypes = mask_dtypes("mask")

function MaskedFill:forward(td)
  local mask = mask_of(self, td, "mask")
  local keys, value = self.p.keys, self.p.value
  if not keys then return td:masked_fill(mask, value) end
  td = core.writable(td)
  for _, k in ipairs(keys) do
    local leaf = core.get(self, td, k)
    if not is_tensor(leaf) then self:fail("key %s is %s, not a tensor", core.key_text(k), describe(leaf)) end
    td:set(k, leaf:masked_fill(aligned(mask, leaf), value))
  end
  return td
end

------------------------------------------------------------------------------ Where

local Where = core.define("Where", {
  keeps_rows = true,
  doc = "out = where(cond, leaf, other) per selected leaf: other a number or another leaf.",
  params = {
    { "cond", MASK_KIND, required = true, key_or_function = true, takes = "batch", doc = MASK_DOC },
    { "keys", "keys", required = true, doc = "the leaves taken where cond holds" },
    { "other", "number", default = 0, doc = "the value taken elsewhere (unless other_keys)" },
    { "other_keys", "keys", doc = "leaves taken elsewhere, paired with keys" },
    { "out_keys", "keys", doc = "where results go, paired with keys (default: keys)" },
  },
})

function Where:init()
  check_mask_param(self, "cond")
  local keys, others, outs = self.p.keys, self.p.other_keys, self.p.out_keys
  for name, list in pairs({ other_keys = others, out_keys = outs }) do
    if #list ~= #keys then
      self:fail("%s has %d keys but keys has %d; they pair up one to one", name, #list, #keys)
    end
  end
  local ins = mask_keys(self, "cond")
  for _, k in ipairs(keys) do ins[#ins + 1] = k end
  for _, k in ipairs(others or {}) do ins[#ins + 1] = k end
  self.in_keys = ins
  self.out_keys = outs or keys
end

Where.spec = spec_of
Where.key_context = key_context
Where.check_dtypes = mask_dtypes("cond")

function Where:forward(td)
  local cond = mask_of(self, td, "cond")
  td = core.writable(td)
  local others = self.p.other_keys
  for i, k in ipairs(self.p.keys) do
    local leaf = core.get(self, td, k)
    if not is_tensor(leaf) then self:fail("key %s is %s, not a tensor", core.key_text(k), describe(leaf)) end
    local other = others and core.get(self, td, others[i]) or self.p.other
    td:set(self.out_keys[i], ops.where(aligned(cond, leaf), leaf, other))
  end
  return td
end

return { Filter = Filter, MaskedFill = MaskedFill, Where = Where }
