-- flow/nan.lua: nodes for missing values (issue 31): DropNaN (pandas' dropna: drop the
-- rows holding a NaN) and FillNaN (pandas' fillna, torch's nan_to_num for infinities
-- when asked). Vectorised: one mask per leaf, one index per batch; each counts what it
-- did for the run's report (node:counts()).
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local dtypes = require("tensordict.tensor.dtype")
local core = require("tensordict.flow.core")

local describe = util.describe
local is_tensor = tensor.is_tensor

-- The float leaves a node works on: its keys (each must be a float tensor), or every
-- float leaf of the batch, nested ones included.
local function float_leaves(self, td)
  local out = {}
  if self.p.keys then
    for i, k in ipairs(self.p.keys) do
      local x = core.get(self, td, k)
      if not is_tensor(x) then self:fail("%s is %s, not a tensor", core.key_text(k), describe(x)) end
      if not dtypes.is_floating(dtypes.code(x:dtype(), self.type_name)) then
        self:fail("%s has dtype %s; %s works on float leaves (only they hold NaN)", core.key_text(k), x:dtype(),
          self.type_name)
      end
      out[i] = { key = k, x = x }
    end
    return out
  end
  for _, k in ipairs(td:keys({ include_nested = true, leaves_only = true })) do
    local x = td:get(k)
    if is_tensor(x) and dtypes.is_floating(dtypes.code(x:dtype(), self.type_name)) then
      out[#out + 1] = { key = k, x = x }
    end
  end
  return out
end

-- Before any data moves (the host's check): named keys declared upstream must be float.
local function float_dtypes(self, ks)
  local out = {}
  for _, k in ipairs(self.p.keys or {}) do
    local function floating(dt) return dtypes.is_floating(dtypes.code(dt, self.type_name)) end
    out[#out + 1] = core.dtype_problem(ks, k, floating,
      ("%s works on float leaves (only they hold NaN)"):format(self.type_name))
  end
  return out
end

local KEYS_DOC = "the float leaves looked at (default: every float leaf, nested ones included)"

---------------------------------------------------------------------------- DropNaN

local DropNaN = core.define("DropNaN", {
  doc = "Drops the rows where any of the keys holds a NaN (any element of the row), as pandas' dropna.",
  params = {
    { "keys", "keys", doc = KEYS_DOC },
    { "inf", "boolean", default = false, doc = "also drop rows holding an infinity" },
  },
})

function DropNaN:init()
  self.in_keys = self.p.keys or {}
  self.dropped = 0
end

DropNaN.check_dtypes = float_dtypes

-- A run's counts start at zero.
function DropNaN:open() self.dropped = 0 end

function DropNaN:counts() return { dropped_rows = self.dropped } end

-- Whether each row (the first batch dim) of x holds a NaN (or, with inf, an infinity).
local function bad_rows(x, inf)
  local bad = x:isnan()
  if inf then bad = bad:logical_or(x:isinf()) end
  if x:dim() == 1 then return bad end
  return bad:reshape({ x:size(1), -1 }):any(2)
end

function DropNaN:forward(td)
  if td:batch_dims() == 0 then self:fail("needs a batch with a batch dim to drop rows from (batch size [])") end
  if #td == 0 then return td end -- nothing to drop (and a [0, -1] view has no size to infer)
  local drop
  for _, leaf in ipairs(float_leaves(self, td)) do
    local bad = bad_rows(leaf.x, self.p.inf)
    drop = drop and drop:logical_or(bad) or bad
  end
  if not drop then return td end
  local n = drop:sum()
  if n == 0 then return td end
  self.dropped = self.dropped + n
  if n == #td then return nil end -- an empty batch is dropped, as Filter drops it
  return td[drop:logical_not()]
end

---------------------------------------------------------------------------- FillNaN

local FillNaN = core.define("FillNaN", {
  keeps_rows = true,
  doc = "Replaces NaN in float leaves by a value, as pandas' fillna; infinities too when posinf/neginf are given "
    .. "(torch's nan_to_num).",
  params = {
    { "keys", "keys", doc = KEYS_DOC },
    { "value", "number", default = 0, doc = "what NaN becomes" },
    { "posinf", "number", doc = "what +inf becomes (default: kept, as pandas keeps it)" },
    { "neginf", "number", doc = "what -inf becomes (default: kept)" },
  },
})

function FillNaN:init()
  self.in_keys = self.p.keys or {}
  self.filled = { nan = 0, inf = 0 }
end

FillNaN.check_dtypes = float_dtypes

function FillNaN:open() self.filled = { nan = 0, inf = 0 } end

function FillNaN:counts() return { filled_nans = self.filled.nan, filled_infs = self.filled.inf } end

-- x with mask's elements set to v (a new tensor: the input may be shared), and how many.
local function fill(x, mask, v)
  local n = mask:sum()
  if n == 0 then return x, 0 end
  return x:masked_fill(mask, v), n
end

function FillNaN:forward(td)
  local p = self.p
  local out
  for _, leaf in ipairs(float_leaves(self, td)) do
    local total = 0
    local x, n = fill(leaf.x, leaf.x:isnan(), p.value)
    self.filled.nan = self.filled.nan + n
    if p.posinf then
      x, n = fill(x, x:eq(math.huge), p.posinf)
      total = total + n
    end
    if p.neginf then
      x, n = fill(x, x:eq(-math.huge), p.neginf)
      total = total + n
    end
    self.filled.inf = self.filled.inf + total
    if x ~= leaf.x then
      out = out or core.writable(td)
      out:set(leaf.key, x)
    end
  end
  return out or td
end

return { DropNaN = DropNaN, FillNaN = FillNaN }
