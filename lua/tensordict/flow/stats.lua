-- flow/stats.lua: running statistics and the Normalize node.
--
-- RunningStats holds one tensor's per-feature count, mean and M2 (sum of squared
-- deviations), updated one batch at a time and mergeable with another (Welford within
-- a batch, Chan's formula between batches; both in C, core/kernels/stats.c, float64,
-- the same bits for any thread count). A StatsSet holds one RunningStats per key.
-- Normalize standardises leaves with them: (x - mean) / sqrt(var + eps) per feature,
-- the features being a leaf's dims after the batch dims; var is the population
-- variance (M2 / count).
--
-- NaNs and infinities (the nan policy of Normalize and of RunningStats:update): one NaN
-- folded into running statistics makes every later row NaN, so Normalize refuses them
-- by default ("error": the batch is refused with its key, number and count, nothing
-- folded in; the check reads the kernels' partial states, free when there is none).
-- "ignore" takes the statistics over the finite values, each feature counting its own
-- (the state then holds a count per feature, saved and merged with it), and lets the
-- non-finite values through; "propagate" is the plain update.
local ffi = require("ffi")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local kernels = require("tensordict.tensor.stats")
local dtypes = require("tensordict.tensor.dtype")
local td_core = require("tensordict.dict")
local td_memmap = require("tensordict.dict.memmap")
local json = require("tensordict.json")
local core = require("tensordict.flow.core")
require("tensordict.tensor.ops") -- tensor methods used below (mul, div, lt, sqrt, any)
require("tensordict.tensor.reduce")

local fail, describe, format_list = util.fail, util.describe, util.format_list
local is_tensor, is_td, header = tensor.is_tensor, td_core.is_td, tensor.handle

local function shape_text(shape) return format_list(shape) end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function copy_list(t)
  local out = {}
  for i = 1, #t do out[i] = t[i] end
  return out
end

---------------------------------------------------------------------- RunningStats

local RunningStats = {}

local function need_shape(self, call)
  if not self.shape then fail(("RunningStats:%s: no data yet (the feature shape is unknown)"):format(call)) end
end
RunningStats.__index = RunningStats

local function is_stats(x) return getmetatable(x) == RunningStats end

-- A fresh state over a feature shape (nil: taken from the first update).
local function new_stats(shape)
  local self = setmetatable({ n = ffi.new("int64_t[1]"), shape = nil }, RunningStats)
  if shape then
    self.shape = copy_list(shape)
    self.m = create.zeros(self.shape, "float64")
    self.q = create.zeros(self.shape, "float64")
  end
  return self
end

-- A value given as a number, a (nested) Lua array or a tensor, as a float64 (or dtype)
-- tensor.
local function as_f64(call, what, v, shape, dtype)
  dtype = dtype or "float64"
  local t
  if type(v) == "number" then
    t = create.full(shape or {}, v, dtype)
  elseif is_tensor(v) then
    t = v:to(dtype):contiguous():clone()
  elseif type(v) == "table" and not is_td(v) then
    local ok, r = pcall(create.tensor, v, dtype)
    if not ok then fail(("%s: %s must be numbers, got %s"):format(call, what, describe(v))) end
    t = r
  else
    fail(("%s: %s must be a number, a list of numbers or a tensor, got %s"):format(call, what, describe(v)))
  end
  if shape and not same_shape(t:shape(), shape) then
    if t:numel() ~= 1 and t:numel() ~= 0 then
      local n = 1
      for i = 1, #shape do n = n * shape[i] end
      if t:numel() ~= n then
        fail(("%s: %s has shape %s, expected %s"):format(call, what, shape_text(t:shape()), shape_text(shape)))
      end
    end
    if t:numel() == 1 then t = create.full(shape, t:reshape(1)[1], dtype) else t = t:reshape(shape):contiguous() end
  end
  return t
end

-- RunningStats.from{mean =, var =, count = [, counts =] [, shape =]}: a state from given
-- statistics (var is the population variance; mean/var numbers, lists or tensors; a flat
-- list with `shape` takes that shape). count (the rows) defaults to 0 (fixed
-- statistics); counts, a count per feature, is what statistics over finite values
-- (nan = "ignore") keep beside it.
function RunningStats.from(t, call)
  call = call or "RunningStats.from"
  if type(t) ~= "table" or is_tensor(t) or is_td(t) then
    fail(("%s: expected a table {mean =, var =, count =}, got %s"):format(call, describe(t)))
  end
  if t.mean == nil or t.var == nil then
    local names = {}
    for x in pairs(t) do names[#names + 1] = tostring(x) end
    table.sort(names)
    fail(("%s: the statistics need both mean and var (got keys: %s)"):format(call, table.concat(names, ", ")))
  end
  local mean = as_f64(call, "mean", t.mean, t.shape)
  local shape = mean:shape()
  local var = as_f64(call, "var", t.var, shape)
  local count = t.count or 0
  if is_tensor(count) then count = count:item() end
  if not util.is_int(count) or count < 0 then
    fail(("%s: count must be a non-negative integer, got %s"):format(call, describe(count)))
  end
  if var:lt(0):any() then fail(("%s: var has negative values"):format(call)) end
  local self = new_stats(nil)
  self.shape = shape
  self.m = mean
  self.n[0] = count
  if t.counts ~= nil then
    local c = t.counts
    c = as_f64(call, "counts", is_tensor(c) and c:to("float64") or c, shape)
    if c:ne(c:floor()):any() or c:lt(0):any() or c:gt(count):any() then
      fail(("%s: counts must be integers in 0..count (%d), one per feature"):format(call, count))
    end
    self.c = c:to("int64")
    self.q = var:mul(c)
  else
    self.q = var:mul(count)
  end
  self.fixed_var = count == 0 and var or nil -- with no count, M2 cannot hold var
  return self
end

-- flow.RunningStats([shape]) or flow.RunningStats{mean =, var =, count =}.
setmetatable(RunningStats, {
  __call = function(_, arg)
    if arg == nil then return new_stats(nil) end
    if type(arg) == "table" and not is_tensor(arg) and (arg.mean ~= nil or arg.var ~= nil) then
      return RunningStats.from(arg, "RunningStats")
    end
    if type(arg) == "table" and not is_tensor(arg) and not is_td(arg) then
      for i = 1, #arg do
        if not util.is_int(arg[i]) or arg[i] < 0 then
          fail(("RunningStats: a feature shape must be non-negative integers, got %s"):format(describe(arg[i])))
        end
      end
      return new_stats(arg)
    end
    fail(("RunningStats: expected nothing, a feature shape or {mean =, var =, count =}, got %s"):format(describe(arg)))
  end,
})

-- The feature shape of x with batch_dims leading dims, checked against self's.
local function features(self, call, x, batch_dims)
  if not is_tensor(x) then fail(("%s: expected a tensor, got %s"):format(call, describe(x))) end
  local shape = x:shape()
  if batch_dims == nil then batch_dims = math.min(1, #shape) end
  if not util.is_int(batch_dims) or batch_dims < 0 or batch_dims > #shape then
    fail(("%s: batch_dims %s is out of range for a tensor of shape %s (0..%d)"):format(call,
      describe(batch_dims), shape_text(shape), #shape))
  end
  local fs = {}
  for i = batch_dims + 1, #shape do fs[#fs + 1] = shape[i] end
  if self.shape and not same_shape(self.shape, fs) then
    fail(("%s: the tensor's features have shape %s (shape %s after %d batch dims) but the statistics have %s")
      :format(call, shape_text(fs), shape_text(shape), batch_dims, shape_text(self.shape)))
  end
  return fs, batch_dims
end

-- What each nan policy does with a NaN or an infinity (docs/flow.md, Normalize).
local NAN_POLICIES = { "error", "ignore", "propagate" }

-- "3 NaN values and 1 infinite value" (the parts that are not 0).
local function nonfinite_text(nan, inf)
  local parts = {}
  if nan > 0 then parts[#parts + 1] = ("%d NaN value%s"):format(nan, nan == 1 and "" or "s") end
  if inf > 0 then parts[#parts + 1] = ("%d infinite value%s"):format(inf, inf == 1 and "" or "s") end
  return (table.concat(parts, " and "))
end

-- The per-feature counts, made from the row count the first time they are needed.
local function counts_of(self)
  if not self.c then self.c = create.full(self.shape, tonumber(self.n[0]), "int64") end
  return self.c
end

-- Folds x's rows in under the nan policy; returns the NaNs and infinities that kept x
-- out (nan = "error": nothing was folded in), else 0, 0.
local function fold(self, call, x, batch_dims, nan)
  local fs, bd = features(self, call, x, batch_dims)
  if nan ~= "error" and nan ~= "ignore" and nan ~= "propagate" then
    fail(("%s: nan must be \"%s\", got %s"):format(call, table.concat(NAN_POLICIES, "\", \""), describe(nan)))
  end
  if not self.shape then
    self.shape = fs
    self.m = create.zeros(fs, "float64")
    self.q = create.zeros(fs, "float64")
  end
  if self.fixed_var then
    fail(("%s: these statistics were given without a count, so they cannot be updated"):format(call))
  end
  if x:dtype() == "bool" then fail(("%s: bool tensors have no mean; cast them first"):format(call)) end
  if nan == "ignore" then
    kernels.update_finite(x, bd, self.n, counts_of(self), self.m, self.q)
  elseif self.c then -- counts per feature: the batch's own statistics, merged feature by feature
    local part = new_stats(fs)
    local nans, infs = fold(part, call, x, bd, nan)
    if nans + infs > 0 then return nans, infs end
    self:merge(part)
  elseif nan == "error" then
    return kernels.update_strict(x, bd, self.n, self.m, self.q)
  else
    kernels.update(x, bd, self.n, self.m, self.q)
  end
  return 0, 0
end

-- rs:update(x [, batch_dims [, nan]]): folds x's rows in (batch_dims leading dims,
-- default 1; 0 for a 0-dim x). Any numeric dtype. nan: "propagate" (the default: NaNs
-- and infinities are folded in like any value), "error" (x is refused, nothing folded
-- in, when it holds any) or "ignore" (they are skipped, each feature counting the
-- values it took). Returns self.
function RunningStats:update(x, batch_dims, nan)
  local call = "RunningStats:update"
  local nans, infs = fold(self, call, x, batch_dims, nan or "propagate")
  if nans + infs > 0 then
    fail(("%s: the tensor holds %s; nothing was folded in"):format(call, nonfinite_text(nans, infs)))
  end
  return self
end

-- rs:merge(other): self becomes the statistics of both sets of rows. Returns self.
function RunningStats:merge(other)
  if not is_stats(other) then
    fail(("RunningStats:merge: expected a RunningStats, got %s"):format(describe(other)))
  end
  if other.n[0] == 0 then return self end
  if self.fixed_var or other.fixed_var then
    fail("RunningStats:merge: statistics given without a count cannot be merged")
  end
  if not self.shape then
    self.shape = copy_list(other.shape)
    self.m = create.zeros(self.shape, "float64")
    self.q = create.zeros(self.shape, "float64")
  elseif not same_shape(self.shape, other.shape) then
    fail(("RunningStats:merge: feature shapes differ: %s and %s")
      :format(shape_text(self.shape), shape_text(other.shape)))
  end
  if self.c or other.c then -- either counts per feature: both do
    kernels.merge_counts(counts_of(self), self.m, self.q, other.c or create.full(self.shape,
      tonumber(other.n[0]), "int64"), other.m, other.q)
    self.n[0] = self.n[0] + other.n[0]
  else
    kernels.merge(self.n, self.m, self.q, other.n[0], other.m, other.q)
  end
  return self
end

-- The rows folded in.
function RunningStats:count() return (tonumber(self.n[0])) end

-- The values each feature took (int64, the feature shape): the rows, unless non-finite
-- values were skipped (nan = "ignore").
function RunningStats:counts()
  need_shape(self, "counts")
  return self.c and self.c:clone() or create.full(self.shape, tonumber(self.n[0]), "int64")
end
function RunningStats:feature_shape() return self.shape and copy_list(self.shape) end

-- Copies, float64, of the feature shape.
function RunningStats:mean()
  need_shape(self, "mean")
  return self.m:clone()
end

-- var(unbiased): M2 / count (population, the default) or M2 / (count - 1); NaN
-- where the count is too small.
function RunningStats:var(unbiased)
  need_shape(self, "var")
  if self.fixed_var then return self.fixed_var:clone() end
  if self.c then -- a count per feature; NaN where it is too small
    local n = self.c:to("float64"):sub(unbiased and 1 or 0)
    local v = self.q:div(n)
    v:masked_fill_(n:le(0), 0 / 0)
    return v
  end
  local n = tonumber(self.n[0]) - (unbiased and 1 or 0)
  if n <= 0 then return create.full(self.shape, 0 / 0, "float64") end
  return self.q:div(n)
end

function RunningStats:std(unbiased) return self:var(unbiased):sqrt() end

function RunningStats:m2()
  need_shape(self, "m2")
  return self.q:clone()
end

-- A copy (merging into it leaves self alone).
function RunningStats:clone()
  local c = new_stats(nil)
  c.n[0] = self.n[0]
  if self.shape then
    c.shape, c.m, c.q = copy_list(self.shape), self.m:clone(), self.q:clone()
  end
  c.c = self.c and self.c:clone()
  c.fixed_var = self.fixed_var
  return c
end

-- The population variance used for normalising (0 before any row: x - mean is 0 too).
local function norm_var(self)
  if self.fixed_var then return self.fixed_var end
  if self.c then return self.q:div(self.c:clamp(1, nil)) end -- a feature with no value yet: 0
  local n = tonumber(self.n[0])
  if n == 0 then return self.q end
  return self.q:div(n)
end

-- (x - mean) / sqrt(var + eps) for RunningStats:normalize; with counted, also the NaNs
-- and infinities of x (Normalize's nan = "error" over statistics it does not update).
local function normalize(self, x, batch_dims, eps, counted)
  local call = "RunningStats:normalize"
  need_shape(self, "normalize")
  local mean, var = self.m, norm_var(self)
  local bd
  if #self.shape == 0 and is_tensor(x) then
    local saved = self.shape
    self.shape = nil
    local fs
    fs, bd = features(self, call, x, batch_dims)
    self.shape = saved
    if #fs > 0 then
      mean = create.full(fs, mean:item(), "float64")
      var = create.full(fs, var:item(), "float64")
    end
  else
    local _
    _, bd = features(self, call, x, batch_dims)
  end
  eps = eps or 1e-5
  if type(eps) ~= "number" or not (eps >= 0) then
    fail(("%s: eps must be a number >= 0, got %s"):format(call, describe(eps)))
  end
  local code = header(x).dtype
  local out = create.empty(x:shape(), dtypes.is_floating(code) and dtypes.name(code) or "float32")
  if counted then return out, kernels.normalize_counted(x, bd, mean, var, eps, out) end
  kernels.normalize(x, bd, mean, var, eps, out)
  return out, 0, 0
end

-- rs:normalize(x [, batch_dims [, eps]]): (x - mean) / sqrt(var + eps), computed in
-- float64, as x's dtype when floating, else float32. Statistics of feature shape []
-- (one mean and variance) apply to every feature of x.
function RunningStats:normalize(x, batch_dims, eps)
  return (normalize(self, x, batch_dims, eps, false))
end

-- {mean =, var =, count = [, counts =]} as float64 tensors (var: population), a number
-- and, for statistics over finite values, an int64 count per feature.
function RunningStats:state()
  need_shape(self, "state")
  return { mean = self.m:clone(), var = norm_var(self):clone(), count = self:count(),
    counts = self.c and self.c:clone() }
end

-- Plain Lua data (JSON-safe): flat lists and the shape.
function RunningStats:to_plain()
  need_shape(self, "to_plain")
  local flat_m, flat_v = self.m:reshape(-1):totable(), norm_var(self):reshape(-1):totable()
  return { mean = flat_m, var = flat_v, count = self:count(), shape = copy_list(self.shape),
    counts = self.c and self.c:reshape(-1):totable() }
end

function RunningStats:__tostring()
  return ("flow.RunningStats(count=%d, features=%s)"):format(self:count(),
    self.shape and shape_text(self.shape) or "?")
end

---------------------------------------------------------------------------- StatsSet

-- One RunningStats per key (keys or key paths), in the keys' order.
local StatsSet = {}
StatsSet.__index = StatsSet
local function is_set(x) return getmetatable(x) == StatsSet end

local function new_set(keys)
  local self = setmetatable({ keys = {}, by_id = {} }, StatsSet)
  for _, k in ipairs(keys or {}) do self:add(k) end
  return self
end

function StatsSet:add(key, rs)
  local id = core.key_id(key)
  if not self.by_id[id] then self.keys[#self.keys + 1] = key end
  self.by_id[id] = rs or self.by_id[id] or new_stats(nil)
  return self.by_id[id]
end

-- set:get(key): the key's RunningStats (nil when absent).
function StatsSet:get(key) return self.by_id[core.key_id(key)] end

-- set:update(td [, nan]): every key's leaf folded in (rows = td's batch dims); nan as
-- RunningStats:update's.
function StatsSet:update(td, nan)
  if not is_td(td) then fail(("StatsSet:update: expected a TensorDict, got %s"):format(describe(td))) end
  for _, k in ipairs(self.keys) do
    local v = td:get(k)
    if v == nil then
      fail(("StatsSet:update: key %s is missing (the TensorDict's keys: %s)")
        :format(core.key_text(k), core.keys_text(td)))
    end
    self.by_id[core.key_id(k)]:update(v, td:batch_dims(), nan)
  end
  return self
end

-- set:merge(other): per key (keys only in other are added). Returns self.
function StatsSet:merge(other)
  if core.is_node(other) and is_set(other.stats) then other = other.stats end
  if not is_set(other) then
    fail(("StatsSet:merge: expected a StatsSet (or a Normalize node), got %s"):format(describe(other)))
  end
  for _, k in ipairs(other.keys) do
    self:add(k):merge(other.by_id[core.key_id(k)])
  end
  return self
end

function StatsSet:clone()
  local c = new_set()
  for _, k in ipairs(self.keys) do c:add(k, self.by_id[core.key_id(k)]:clone()) end
  return c
end

-- Sets value in a tree of plain tables at key k (a key path nests).
local function put_path(root, k, value)
  local path = type(k) == "table" and k or { k }
  local node = root
  for i = 1, #path - 1 do
    node[path[i]] = node[path[i]] or {}
    node = node[path[i]]
  end
  node[path[#path]] = value
end

-- The statistics as a TensorDict (batch size []): per key a nested TensorDict with
-- mean and var (float64, the feature shape; var the population variance), count (a
-- 0-dim int64 tensor) and, for statistics over finite values, counts (int64, the
-- feature shape). Key paths nest.
function StatsSet:to_tensordict()
  local root = {}
  for _, k in ipairs(self.keys) do
    local rs = self.by_id[core.key_id(k)]
    if rs.shape then
      local st = rs:state()
      put_path(root, k, { mean = st.mean, var = st.var, count = create.full({}, st.count, "int64"),
        counts = st.counts })
    end
  end
  return td_core.construct(root, {})
end

-- set:save(prefix): a memmap folder (Python tensordict's layout), written atomically.
function StatsSet:save(prefix, opts)
  if type(prefix) ~= "string" then fail(("StatsSet:save: prefix must be a string, got %s"):format(describe(prefix))) end
  self:to_tensordict():memmap(prefix, opts)
  return prefix
end

-- Plain data: a tree keyed like the keys, each entry {mean =, var =, count =, shape =}.
function StatsSet:to_plain()
  local root = {}
  for _, k in ipairs(self.keys) do
    local rs = self.by_id[core.key_id(k)]
    if rs.shape then put_path(root, k, rs:to_plain()) end
  end
  return root
end

function StatsSet:__tostring()
  local parts = {}
  for _, k in ipairs(self.keys) do
    parts[#parts + 1] = core.key_text(k) .. ": " .. tostring(self.by_id[core.key_id(k)])
  end
  return "flow.StatsSet{" .. table.concat(parts, ", ") .. "}"
end

-- Reads statistics for keys from a StatsSet, a TensorDict, a folder or a plain tree.
-- Keys without an entry are left out (Normalize decides whether that is an error).
local function read_stats(call, src, keys)
  local set = new_set()
  if src == nil then return set end
  if is_set(src) then
    for _, k in ipairs(keys) do
      local rs = src:get(k)
      if rs then set:add(k, rs:clone()) end
    end
    return set
  end
  if type(src) == "string" then
    local ok, td = pcall(td_memmap.load_memmap, src)
    if not ok then
      local why = tostring(td):gsub("^.-tensordict: ", "")
      fail(("%s: cannot load the statistics folder '%s': %s"):format(call, src, why))
    end
    src = td
  end
  for _, k in ipairs(keys) do
    local path = type(k) == "table" and k or { k }
    local entry
    if is_td(src) then
      entry = src:get(path)
      if entry ~= nil then
        if not is_td(entry) or entry:get("mean") == nil or entry:get("var") == nil then
          fail(("%s: the statistics for %s must hold mean and var leaves"):format(call, core.key_text(k)))
        end
        entry = { mean = entry:get("mean"), var = entry:get("var"), count = entry:get("count"),
          counts = entry:get("counts") }
      end
    elseif type(src) == "table" then
      entry = src
      for i = 1, #path do
        entry = type(entry) == "table" and entry[path[i]] or nil
      end
      if entry == nil and #path > 1 then entry = src[table.concat(path, ".")] end
    else
      fail(("%s: stats must be a table per key, a TensorDict, a folder path or a StatsSet, got %s")
        :format(call, describe(src)))
    end
    if entry ~= nil then
      set:add(k, RunningStats.from(entry, ("%s: stats for %s"):format(call, core.key_text(k))))
    end
  end
  return set
end

------------------------------------------------------------------------- Normalize

local Normalize = core.define("Normalize", {
  keeps_rows = true,
  kind = "node",
  doc = "Standardises float leaves per feature, (x - mean) / sqrt(var + eps), with running or fixed statistics.",
  params = {
    { "keys", "keys", required = true, doc = "the float leaves to standardise" },
    { "stats", "any", doc = "fixed or starting statistics: {key = {mean =, var =, count =}}, "
      .. "a TensorDict of them, a folder saved by save_stats, or a StatsSet" },
    { "eps", "number", default = 1e-5, min = 0, doc = "added to the variance before the square root" },
    { "update", "boolean", doc = "fold each batch into the statistics before applying them "
      .. "(default: true without stats, false with)" },
    { "out_keys", "keys", doc = "where the results go, paired with keys (default: keys, replacing the leaves)" },
    { "path", "string", doc = "a folder where close() saves the statistics (memmap, atomic)" },
    { "nan", "string", default = "error", one_of = NAN_POLICIES,
      doc = "a NaN or an infinity in a leaf: \"error\" refuses the batch (naming the key, the batch and "
        .. "the count), \"ignore\" takes the statistics over the finite values and lets them through, "
        .. "\"propagate\" folds them in (every later row becomes NaN)" },
    { "fit", "boolean", default = false, doc = "take the statistics from a first pass over the source through "
      .. "the steps before this one (flow.run makes it, and merges the ranks' under mpirun), then apply them fixed" },
  },
})

function Normalize:init()
  local p = self.p
  if p.out_keys and #p.out_keys ~= #p.keys then
    self:fail("keys has %d keys but out_keys has %d; they pair up one to one", #p.keys, #p.out_keys)
  end
  self.in_keys, self.out_keys = p.keys, p.out_keys or p.keys
  if p.fit and (p.stats ~= nil or p.update) then
    self:fail("fit = true takes the statistics from a first pass; it goes with neither stats nor update = true")
  end
  self.update = p.update
  if self.update == nil then self.update = p.stats == nil and not p.fit end
  self.stats = read_stats("Normalize", p.stats, p.keys)
  for _, k in ipairs(p.fit and {} or p.keys) do
    local rs = self.stats:get(k)
    if rs and not rs.shape then rs = nil end -- an entry that never saw a row
    if not rs and not self.update then
      self:fail("stats has no entry for key %s and update is false", core.key_text(k))
    end
    if rs and self.update and rs.fixed_var then
      self:fail("stats for %s have no count, so they cannot be updated (give count, or update = false)",
        core.key_text(k))
    end
    self.stats:add(k)
  end
  self.changed = false
  self.batches = 0 -- batches seen, for messages ("batch 3 holds ...")
  self.saved = {}  -- per key, the statistics before this batch (remember, restore)
end

-- Before any data moves (the host's check): keys whose dtype is declared upstream must
-- be floating. From here on the results hold the leaves' dtypes.
function Normalize:check_dtypes(ks)
  local out = {}
  for _, k in ipairs(self.in_keys) do
    out[#out + 1] = core.dtype_problem(ks, k, function(dt) return dtypes.is_floating(dtypes.code(dt, "Normalize")) end,
      ("Normalize works on float leaves (cast it first: {\"use\": \"Cast\", \"dtype\": \"float32\", \"keys\": [%s]})")
        :format(json.encode(k)))
  end
  return out
end

function Normalize:keys_after(ks)
  for i, k in ipairs(self.out_keys) do
    local dtype, origin = ks:dtype(self.in_keys[i])
    ks:add(k, true, dtype, origin)
  end
end

-- Normalize.fit(source, keys [, opts]): one pass over a source (anything with
-- iter(ctx)), the statistics of keys as a StatsSet. opts.seed reaches iter's ctx;
-- opts.nan: Normalize's nan policy (default "error").
local FIT_OPTIONS = { seed = "number", nan = "string" }
function Normalize.fit(source, keys, opts)
  opts = util.options("Normalize.fit", opts, FIT_OPTIONS)
  if type(source) ~= "table" or type(source.iter) ~= "function" then
    fail(("Normalize.fit: expected a source (with iter), got %s"):format(describe(source)))
  end
  local klist = core.check_params({ params = { { "keys", "keys", required = true } } }, { keys = keys })
  if klist.keys == nil then
    fail(("Normalize.fit: keys must be a key or a list of keys, got %s"):format(describe(keys)))
  end
  local set = new_set(klist.keys)
  local ctx = { seed = opts.seed or 0 }
  local nan = opts.nan or "error"
  if source.open then source:open(ctx) end
  local batch = 0
  local ok, err = pcall(function()
    for td in source:iter(ctx) do
      batch = batch + 1
      local uok, uerr = pcall(set.update, set, td, nan)
      if not uok then
        fail(("Normalize.fit: batch %d: %s"):format(batch, tostring(uerr):gsub("^.-tensordict: ", "")))
      end
    end
  end)
  if source.close then pcall(source.close, source) end
  if not ok then error(err, 0) end
  return set
end

local function writable(td)
  if td:is_locked() then return td_core.construct(td, td:batch_size()) end
  return td
end

-- Refuses batch `batch` of key for holding nans NaNs and infs infinities (nan = "error").
local function refuse_nonfinite(self, key, x, nans, infs)
  self:fail("key %s: batch %d holds %s (of %d values); nothing was normalised. Clean the data upstream, "
    .. "or give nan = \"ignore\" (statistics over the finite values, NaN passes through) or "
    .. "nan = \"propagate\" (folded in: every later row becomes NaN)",
    core.key_text(key), self.batches, nonfinite_text(nans, infs), x:numel())
end

-- Statistics of earlier keys of a batch that a later key refused are put back: a
-- refused batch leaves the node as it was (the copies are feature-sized, made once).
local function remember(self, i, rs)
  local saved = self.saved[i]
  if not rs.shape then -- its first batch: put back, it has seen nothing
    self.saved[i] = { fresh = true }
    return
  end
  if not saved or saved.fresh or not same_shape(saved.shape, rs.shape) or (saved.c ~= nil) ~= (rs.c ~= nil) then
    saved = { shape = copy_list(rs.shape), m = rs.m:clone(), q = rs.q:clone(), c = rs.c and rs.c:clone() }
    self.saved[i] = saved
  else
    saved.m:copy_(rs.m)
    saved.q:copy_(rs.q)
    if rs.c then saved.c:copy_(rs.c) end
  end
  saved.n = rs.n[0]
end

local function restore(self, upto)
  for j = 1, upto do
    local rs, saved = self.stats:get(self.in_keys[j]), self.saved[j]
    if saved and saved.fresh then
      rs.shape, rs.m, rs.q, rs.c = nil, nil, nil, nil
      rs.n[0] = 0
    elseif saved then
      rs.m:copy_(saved.m)
      rs.q:copy_(saved.q)
      if rs.c then rs.c:copy_(saved.c) end
      rs.n[0] = saved.n
    end
  end
end

function Normalize:forward(td)
  if self.p.fit and not self.fitted then
    self:fail("fit = true: no statistics yet; flow.run (and tdflow) make the fitting pass first "
      .. "(Normalize.fit(source, keys) makes one by hand)")
  end
  local keys, outs, eps, nan = self.in_keys, self.out_keys, self.p.eps, self.p.nan
  local bd = td:batch_dims()
  local results = {}
  self.batches = self.batches + 1
  local guard = nan == "error" and self.update and #keys > 1
  for i = 1, #keys do
    local key = keys[i]
    local x = core.get(self, td, key)
    if not is_tensor(x) then
      self:fail("%s is %s; Normalize works on tensor leaves", core.key_text(key), describe(x))
    end
    local code = header(x).dtype
    if not dtypes.is_floating(code) then
      self:fail("%s has dtype %s; Normalize works on float leaves (cast it first, e.g. flow.Cast{dtype = \"float32\"})",
        core.key_text(key), dtypes.name(code))
    end
    local rs = self.stats:get(key)
    local nans, infs = 0, 0
    local ok, err = pcall(function()
      if self.update then
        if guard then remember(self, i, rs) end
        nans, infs = fold(rs, "RunningStats:update", x, bd, nan)
        if nans + infs > 0 then return end
        self.changed = true
      end
      if rs.shape == nil then -- no row yet, nothing given: the feature shape comes from x
        local fs = {}
        local shape = x:shape()
        for d = bd + 1, #shape do fs[#fs + 1] = shape[d] end
        rs.shape, rs.m, rs.q = fs, create.zeros(fs, "float64"), create.zeros(fs, "float64")
      end
      -- statistics it did not update (nan = "error"): counted while normalising
      results[i], nans, infs = normalize(rs, x, bd, eps, nan == "error" and not self.update)
    end)
    if ok and nans + infs > 0 then
      if guard then restore(self, i - 1) end
      refuse_nonfinite(self, key, x, nans, infs)
    end
    if not ok then
      if guard then restore(self, i - 1) end
      self:fail("%s: %s", core.key_text(key), tostring(err):gsub("^.-tensordict: ", ""):gsub("^RunningStats:%w+: ", ""))
    end
  end
  td = writable(td)
  for i = 1, #keys do td:set(outs[i], results[i]) end
  return td
end

-- node:merge(other): merges another Normalize node's (or a StatsSet's) statistics in,
-- e.g. those of the same node run in another worker. Returns self.
function Normalize:merge(other)
  if core.is_node(other) and is_set(other.stats) then other = other.stats end
  if not is_set(other) then
    self:fail("merge: expected a Normalize node or a StatsSet, got %s", describe(other))
  end
  self.stats:merge(other)
  self.changed = true
  return self
end

-- node:save_stats(prefix): the statistics as a memmap folder (StatsSet:to_tensordict's
-- layout), loadable with stats = prefix. Returns prefix.
function Normalize:save_stats(prefix)
  if type(prefix) ~= "string" then self:fail("save_stats: prefix must be a string, got %s", describe(prefix)) end
  return self.stats:save(prefix)
end

-- A data-parallel run (ctx.dist, docs/dist.md): close merges the ranks' statistics.
-- Batches are counted from 1 for each run.
function Normalize:open(ctx)
  self.dist = ctx and ctx.dist
  self.batches = 0
end

-- After a failed run (flow.run passes failed = true) nothing is saved: statistics of
-- part of the data would look like a finished run's. In a data-parallel run every rank
-- ends with the statistics of all rows: each rank's, merged in rank order (Chan's
-- formula, as merge does), equal to one process's within float rounding; rank 0 saves.
-- Every rank's statistics merged in rank order (a collective: every rank calls it).
local function merge_ranks(d, set, keys)
  local merged = new_set(keys)
  for _, plain in ipairs(d.all_values(set:to_plain())) do merged:merge(read_stats("Normalize", plain, keys)) end
  return merged
end

function Normalize:close(failed)
  local d = self.dist
  if d and self.update and not failed then
    self.stats, self.changed = merge_ranks(d, self.stats, self.p.keys), true
  end
  if self.p.path and self.changed and not failed and (not d or d.rank == 0) then
    self.stats:save(self.p.path)
    self.changed = false
  end
end

-- fit = true, driven by flow/fit_pass.lua: fit_begin() gives what the first pass folds
-- batches into (fit_batch), fit_end(acc, dist) fixes the statistics of all of it (every
-- rank's merged in rank order under mpirun) and returns them as plain data for the
-- run's record. A node without fit = true fits nothing (fit_begin gives nil).
function Normalize:fit_begin()
  if not self.p.fit then return nil end
  self.batches = 0
  return new_set(self.p.keys)
end

function Normalize:fit_batch(set, td)
  self.batches = self.batches + 1
  local ok, err = pcall(set.update, set, td, self.p.nan)
  if not ok then
    self:fail("fit: batch %d of the fitting pass: %s", self.batches, tostring(err):gsub("^.-tensordict: ", ""))
  end
end

function Normalize:fit_end(set, dist)
  if dist then set = merge_ranks(dist, set, self.p.keys) end
  for _, k in ipairs(self.p.keys) do
    if not set:get(k).shape then self:fail("fit: the fitting pass saw no row of %s", core.key_text(k)) end
  end
  self.stats, self.fitted, self.changed = set, true, true
  return set:to_plain()
end

-- Checkpoints: the running statistics, bit for bit (count, mean and M2 as float64
-- tensors). Fixed statistics do not change: nothing to save.
function Normalize:state()
  if not self.update then return nil end
  local keys = {}
  for i, k in ipairs(self.p.keys) do
    local rs = self.stats:get(k)
    keys[i] = rs.shape and { count = rs:count(), mean = rs.m, m2 = rs.q } or {}
  end
  return { keys = keys, changed = self.changed }
end
function Normalize:restore(state)
  if not self.update then return end
  for i, k in ipairs(self.p.keys) do
    local saved, rs = state.keys[i], self.stats:get(k)
    if saved.mean then
      rs.shape, rs.m, rs.q = saved.mean:shape(), saved.mean, saved.m2
      rs.n[0] = saved.count
    end
  end
  self.changed = state.changed
end

-- The spec: the parameters, with stats as given when it was a folder and nothing has
-- changed since, else the statistics held now as plain numbers.
function Normalize:spec()
  local p = self.p
  local out = { type = self.type_name, keys = core.plain_copy(self, "keys", p.keys), update = self.update }
  if p.fit then out.fit, out.update = true, nil end -- a node built from it fits again
  if p.eps ~= 1e-5 then out.eps = p.eps end
  if p.nan ~= "error" then out.nan = p.nan end
  if p.out_keys then out.out_keys = core.plain_copy(self, "out_keys", p.out_keys) end
  if p.path then out.path = p.path end
  if type(p.stats) == "string" and not self.changed then
    out.stats = p.stats
  elseif not p.fit then
    local plain = self.stats:to_plain()
    if next(plain) ~= nil then out.stats = core.plain_copy(self, "stats", plain) end
  end
  return out
end

return { Normalize = Normalize, RunningStats = RunningStats, StatsSet = setmetatable(StatsSet, {
  __call = function(_, keys) return new_set(keys) end,
}) }
