-- tensor/sorting.lua: sorting, selection and counting (core/kernels/sort.c, select.c,
-- unique.c, histogram.c, search.c), torch's semantics in torch7's manners: dims and every
-- returned index 1-based (int64). torch.sort's order throughout: NaN greatest, equal values
-- in their first order (ties go to the lower index), -0.0 equal to 0.0.
--   sort, argsort, topk, kthvalue, median, nanmedian, mode, quantile, nanquantile, unique,
--   unique_consecutive, histc, bincount, searchsorted, bucketize
-- Methods; init.lua adds their T.<name> forms.
local ffi = require("ffi")
local util = require("tensordict.util")
local lib = require("tensordict.lib")
local tensor = require("tensordict.tensor.core")
local dtypes = require("tensordict.tensor.dtype")
local create = require("tensordict.tensor.create")

local C = lib.C
local fail, describe, dim0 = util.fail, util.describe, util.dim0
local Tensor, adopt, header = tensor.Tensor, tensor.adopt, tensor.handle
local is_tensor = tensor.is_tensor

local out1 = ffi.new("td_tensor *[1]")
local out2 = ffi.new("td_tensor *[1]")

-- A C call's values and 0-based indices (out1) as tensors, the indices made 1-based.
local function with_indices(v)
  if v == nil then util.c_fail() end
  local values = adopt(v)
  return values, adopt(out1[0]):add_(1)
end

local function dim_arg(call, self, dim)
  header(self) -- raises, naming the method, for a self that is no live tensor
  local nd = self:dim()
  return dim0(call, dim == nil and -1 or dim, nd == 0 and 1 or nd)
end

local function bool_arg(call, name, v)
  if v ~= nil and type(v) ~= "boolean" then
    fail(("%s: %s must be a boolean, got %s"):format(call, name, describe(v)))
  end
  return v
end

-- keepdim: the reduced dim back as a dim of size 1 (at 0-based d; nothing for 0 dims).
local function keep(t, d, keepdim, nd)
  if keepdim and nd > 0 then return t:unsqueeze(d + 1) end
  return t
end

------------------------------------------------------------------------------ sort

-- sort([dim = -1 [, descending = false [, stable]]]): values and indices, a copy. Always
-- stable (stable is accepted and changes nothing).
function Tensor.sort(self, dim, descending)
  local d = dim_arg("sort", self, dim)
  bool_arg("sort", "descending", descending)
  return with_indices(C.td_sort(header(self), d, descending and 1 or 0, out1))
end

-- argsort([dim = -1 [, descending = false [, stable]]]): the indices alone.
function Tensor.argsort(self, dim, descending)
  local _, i = Tensor.sort(self, dim, descending)
  return i
end

local function count_arg(call, k, n, what)
  if not util.is_int(k) or k < 0 or k > n then
    fail(("%s: k must be an integer in 0..%d (the size of the dim), got %s"):format(call, n, describe(k)))
  end
  if what == "kth" and k == 0 then fail(("%s: k must be an integer in 1..%d, got 0"):format(call, n)) end
end

-- topk(k [, dim = -1 [, largest = true [, sorted = true]]]): the k largest (smallest)
-- values along dim, in order, and their indices; equal values: the lower index first.
-- A selection, not a sort of the dim; the result is sorted either way.
function Tensor.topk(self, k, dim, largest, sorted)
  local d = dim_arg("topk", self, dim)
  bool_arg("topk", "largest", largest)
  bool_arg("topk", "sorted", sorted)
  local n = self:dim() == 0 and 1 or self:size(d + 1)
  count_arg("topk", k, n)
  return with_indices(C.td_topk(header(self), k, d, largest == false and 0 or 1, out1))
end

-- kthvalue(k [, dim = -1 [, keepdim = false]]): the k-th smallest value along dim (the
-- stable sort's k-th) and its index.
function Tensor.kthvalue(self, k, dim, keepdim)
  local d = dim_arg("kthvalue", self, dim)
  local n = self:dim() == 0 and 1 or self:size(d + 1)
  count_arg("kthvalue", k, n, "kth")
  local v, i = with_indices(C.td_kthvalue(header(self), k, d, out1))
  return keep(v, d, keepdim, self:dim()), keep(i, d, keepdim, self:dim())
end

------------------------------------------------------------------------------ median, mode

local function not_empty_dim(call, self, d)
  if self:dim() > 0 and self:size(d + 1) == 0 then
    fail(("%s: cannot reduce over dim %d of size 0"):format(call, d + 1))
  end
end

-- The median (nanmedian) over every element as a Lua value: NaN for an empty tensor.
local function median_all(call, self, ignore_nan)
  local h = header(self)
  if h.dtype == dtypes.BOOL then fail(call .. ": bool tensors have no median (torch refuses them too)") end
  if self:numel() == 0 then return 0 / 0 end
  local flat = self:reshape(-1)
  local v = C.td_median(header(flat), 0, ignore_nan and 1 or 0, out1)
  if v == nil then util.c_fail() end
  C.td_tensor_release(out1[0])
  return (tensor.value_of(v))
end

local function median(call, self, dim, keepdim, ignore_nan)
  if dim == nil then
    header(self)
    if keepdim ~= nil then fail(call .. ": keepdim needs a dim") end
    return median_all(call, self, ignore_nan)
  end
  local d = dim_arg(call, self, dim)
  not_empty_dim(call, self, d)
  local v, i = with_indices(C.td_median(header(self), d, ignore_nan and 1 or 0, out1))
  return keep(v, d, keepdim, self:dim()), keep(i, d, keepdim, self:dim())
end

-- median([dim [, keepdim = false]]): torch's lower median (of an even count the smaller
-- middle value; the stable sort's element (n - 1) / 2), NaN when the row holds a NaN. Over
-- every element a Lua value; along dim values and indices.
function Tensor.median(self, dim, keepdim) return median("median", self, dim, keepdim, false) end
-- nanmedian: the median of the values that are not NaN (NaN for a row of NaN).
function Tensor.nanmedian(self, dim, keepdim) return median("nanmedian", self, dim, keepdim, true) end

-- mode([dim = -1 [, keepdim = false]]): the most frequent value along dim (the smallest of
-- equally frequent ones; each NaN counts once) and the index of its last occurrence.
function Tensor.mode(self, dim, keepdim)
  local d = dim_arg("mode", self, dim)
  not_empty_dim("mode", self, d)
  local v, i = with_indices(C.td_mode(header(self), d, out1))
  return keep(v, d, keepdim, self:dim()), keep(i, d, keepdim, self:dim())
end

------------------------------------------------------------------------------ quantile

local INTERPOLATION = {
  linear = C.TD_QUANTILE_LINEAR, lower = C.TD_QUANTILE_LOWER, higher = C.TD_QUANTILE_HIGHER,
  midpoint = C.TD_QUANTILE_MIDPOINT, nearest = C.TD_QUANTILE_NEAREST,
}

local function quantile(call, self, q, dim, keepdim, interpolation)
  local h = header(self)
  local mode = INTERPOLATION[interpolation == nil and "linear" or interpolation]
  if mode == nil then
    fail(("%s: interpolation must be one of linear, lower, higher, midpoint or nearest, got %s")
      :format(call, describe(interpolation)))
  end
  bool_arg(call, "keepdim", keepdim)
  if not dtypes.is_floating(h.dtype) or h.itemsize < 4 then
    fail(("%s: the input must be float32 or float64, got %s"):format(call, self:dtype()))
  end
  local qt
  if type(q) == "number" then
    qt = adopt(C.td_tensor_full(0, nil, h.dtype, q))
  elseif type(q) == "table" and not is_tensor(q) then
    local list = {}
    for j, v in ipairs(q) do
      if type(v) ~= "number" then fail(("%s: q[%d] must be a number, got %s"):format(call, j, describe(v))) end
      list[j] = v
    end
    qt = create.tensor(list, self:dtype())
  elseif is_tensor(q) then
    qt = q
  else
    fail(("%s: q must be a number, a list of numbers or a tensor, got %s"):format(call, describe(q)))
  end
  local q1d = qt:dim() == 1
  if dim == nil then
    if self:numel() == 0 then fail(call .. ": the input is empty") end
    local flat = self:reshape(-1)
    local r = adopt(C.td_quantile(header(flat), header(qt), 0, mode, call == "nanquantile" and 1 or 0))
    if keepdim then
      local shape = {}
      if q1d then shape[1] = qt:size(1) end
      for _ = 1, self:dim() do shape[#shape + 1] = 1 end
      return r:reshape(shape)
    end
    if not q1d then return r:item() end
    return r
  end
  local d = dim_arg(call, self, dim)
  local r = adopt(C.td_quantile(h, header(qt), d, mode, call == "nanquantile" and 1 or 0))
  if keepdim and self:dim() > 0 then return r:unsqueeze(d + 1 + (q1d and 1 or 0)) end
  return r
end

-- quantile(q [, dim [, keepdim = false [, interpolation = 'linear']]]) of float32 /
-- float64 values: q a number, a list or a 0-D / 1-D tensor of the input's dtype, in
-- [0, 1]; a 1-D q gives the result's first dim. Without dim, over every element (a Lua
-- value for a number q). interpolation: linear, lower, higher, midpoint, nearest (round
-- half to even). A NaN in the row gives NaN.
function Tensor.quantile(self, q, dim, keepdim, interpolation)
  return quantile("quantile", self, q, dim, keepdim, interpolation)
end
-- nanquantile: the same over the values that are not NaN (NaN for a row of NaN).
function Tensor.nanquantile(self, q, dim, keepdim, interpolation)
  return quantile("nanquantile", self, q, dim, keepdim, interpolation)
end

------------------------------------------------------------------------------ unique

local UNIQUE_OPTS = { sorted = "boolean", return_inverse = "boolean", return_counts = "boolean", dim = "number" }
local CONSECUTIVE_OPTS = { return_inverse = "boolean", return_counts = "boolean", dim = "number" }

local function unique(call, self, consecutive, inverse, counts, dim)
  local h = header(self)
  local inv_p = inverse and out1 or nil
  local cnt_p = counts and out2 or nil
  local v
  if dim == nil then
    v = C.td_unique(h, consecutive and 1 or 0, inv_p, cnt_p)
  else
    if self:dim() == 0 then fail(("%s: dim %s given for a tensor of 0 dims"):format(call, describe(dim))) end
    local d = dim0(call, dim, self:dim())
    if self:size(d + 1) > 0 and self:numel() == 0 then
      fail(("%s: the slices along dim %d are empty (another dim has size 0)"):format(call, d + 1))
    end
    v = C.td_unique_dim(h, d, consecutive and 1 or 0, inv_p, cnt_p)
  end
  if v == nil then util.c_fail() end
  local values = adopt(v)
  local i = inverse and adopt(out1[0]):add_(1) or nil
  local c = counts and adopt(out2[0]) or nil
  if i and c then return values, i, c end
  if i then return values, i end
  if c then return values, c end
  return values
end

-- unique([sorted = true [, return_inverse = false [, return_counts = false [, dim]]]]), or
-- one options table {sorted =, return_inverse =, return_counts =, dim =}: the distinct
-- values of the flattened tensor in ascending order (NaN last, each NaN its own value),
-- or the distinct slices along dim; then, as asked, the 1-based inverse (where each
-- element, or slice, went) and the counts. sorted = false gives the same order.
function Tensor.unique(self, sorted, return_inverse, return_counts, dim)
  if type(sorted) == "table" then
    local o = util.options("unique", sorted, UNIQUE_OPTS)
    sorted, return_inverse, return_counts, dim = o.sorted, o.return_inverse, o.return_counts, o.dim
  end
  bool_arg("unique", "sorted", sorted)
  bool_arg("unique", "return_inverse", return_inverse)
  bool_arg("unique", "return_counts", return_counts)
  return unique("unique", self, false, return_inverse, return_counts, dim)
end

-- unique_consecutive([return_inverse = false [, return_counts = false [, dim]]]) or an
-- options table: runs of equal values (slices along dim) collapsed to one, in order.
function Tensor.unique_consecutive(self, return_inverse, return_counts, dim)
  if type(return_inverse) == "table" then
    local o = util.options("unique_consecutive", return_inverse, CONSECUTIVE_OPTS)
    return_inverse, return_counts, dim = o.return_inverse, o.return_counts, o.dim
  end
  bool_arg("unique_consecutive", "return_inverse", return_inverse)
  bool_arg("unique_consecutive", "return_counts", return_counts)
  return unique("unique_consecutive", self, true, return_inverse, return_counts, dim)
end

------------------------------------------------------------------------------ counting

local function number_or(call, name, v, default, int)
  if v == nil then return default end
  if type(v) ~= "number" or (int and not util.is_int(v)) then
    fail(("%s: %s must be %s, got %s"):format(call, name, int and "an integer" or "a number", describe(v)))
  end
  return v
end

-- histc([bins = 100 [, min = 0 [, max = 0]]]): counts of a floating tensor's values in bins
-- equal bins over [min, max] (min = max: the tensor's own extremes), in its dtype; values
-- outside and NaN are not counted.
function Tensor.histc(self, bins, min, max)
  local h = header(self)
  bins = number_or("histc", "bins", bins, 100, true)
  min = number_or("histc", "min", min, 0)
  max = number_or("histc", "max", max, 0)
  return adopt(C.td_histc(h, bins, min, max))
end

-- bincount([weights [, minlength = 0]]): how often each of 0..max occurs in a 1-D tensor
-- of integers >= 0 (int64), or the sums of weights there (float32 weights: float32, any
-- other dtype: float64); at least minlength bins.
function Tensor.bincount(self, weights, minlength)
  local h = header(self)
  local w = nil
  if weights ~= nil then
    if not is_tensor(weights) then
      fail(("bincount: weights must be a tensor, got %s"):format(describe(weights)))
    end
    w = header(weights)
  end
  minlength = number_or("bincount", "minlength", minlength, 0, true)
  if h.ndim ~= 1 or h.dtype == dtypes.BOOL or dtypes.is_floating(h.dtype) then
    fail(("bincount: expected a 1-D tensor of integers >= 0, got %d dims of %s"):format(h.ndim, self:dtype()))
  end
  return adopt(C.td_bincount(h, w, minlength))
end

------------------------------------------------------------------------------ searchsorted

local SEARCH_OPTS = { right = "boolean", side = "string", sorter = "table", out_int32 = "boolean" }

-- A result's dtype for sequence s and values v (a tensor or a number): torch's promotion.
local function common_dtype(s, v)
  if is_tensor(v) then return (C.td_result_type(header(s), header(v))) end
  local kind = util.is_int(v) and C.TD_SCALAR_INT or C.TD_SCALAR_FLOAT
  return (C.td_result_type_scalar(header(s), kind))
end

local function search(call, seq, values, right, sorter, out_int32)
  if not is_tensor(values) and type(values) ~= "number" then
    fail(("%s: the values must be a tensor or a number, got %s"):format(call, describe(values)))
  end
  local hs = header(seq)
  if hs.ndim == 0 then fail(call .. ": the sorted sequence must have at least one dim") end
  local dtype = common_dtype(seq, values)
  if dtype < 0 then util.c_fail() end
  if dtype == dtypes.BOOL then fail(call .. ": bool values are not searched (torch refuses them too)") end
  -- temporaries are freed once the call is done (the GC would keep them a while)
  local temps = {}
  local function temp(t)
    temps[#temps + 1] = t
    return t
  end
  local s = hs.dtype == dtype and seq or temp(seq:to(dtypes.name(dtype)))
  local v
  if is_tensor(values) then
    v = header(values).dtype == dtype and values or temp(values:to(dtypes.name(dtype)))
  else
    v = temp(adopt(C.td_tensor_full(0, nil, dtype, values)))
  end
  local so = nil
  if sorter ~= nil then
    if not is_tensor(sorter) then fail(("%s: sorter must be a tensor, got %s"):format(call, describe(sorter))) end
    local hso = header(sorter)
    if dtypes.is_floating(hso.dtype) or hso.dtype == dtypes.BOOL then
      fail(("%s: sorter must be an integer tensor, got %s"):format(call, sorter:dtype()))
    end
    local n = seq:size(seq:dim())
    if sorter:numel() > 0 then
      local lo, hi = sorter:min(), sorter:max()
      if lo < 1 or hi > n then
        fail(("%s: sorter holds %d, out of range for a dim of size %d (1-based)"):format(call, lo < 1 and lo or hi, n))
      end
    end
    so = header(temp(sorter:to("int64") - 1))
  end
  local p = C.td_searchsorted(header(s), header(v), right and 1 or 0, so, out_int32 and 1 or 0)
  for _, t in ipairs(temps) do t:free() end
  local r = adopt(p):add_(1)
  if not is_tensor(values) then return r:item() end
  return r
end

-- searchsorted(values [, {right =, side =, sorter =, out_int32 =}]) of a sorted sequence
-- (1-D, or values' leading dims with its own last): for each value the 1-based slot of
-- the sequence where it would go (1..n+1; torch's 0..n plus one), before equal elements,
-- after them when right = true or side = 'right'. sorter: 1-based indices that sort an
-- unsorted sequence (torch's argsort + 1). A number gives a Lua value. T.searchsorted(
-- sorted_sequence, values, opts) is the same.
function Tensor.searchsorted(self, values, opts)
  header(self)
  if type(opts) == "boolean" then opts = { right = opts } end
  local o = util.options("searchsorted", opts, SEARCH_OPTS)
  local right = o.right
  if o.side ~= nil then
    if o.side ~= "left" and o.side ~= "right" then
      fail(("searchsorted: side must be 'left' or 'right', got %s"):format(describe(o.side)))
    end
    if right ~= nil and right ~= (o.side == "right") then
      fail(("searchsorted: side '%s' and right = %s disagree"):format(o.side, tostring(right)))
    end
    right = o.side == "right"
  end
  return search("searchsorted", self, values, right, o.sorter, o.out_int32)
end

-- bucketize(boundaries [, right = false | {right =, out_int32 =}]): for each element the
-- 1-based bucket of the 1-D boundaries it falls in (1..n+1): searchsorted(boundaries,
-- self) with the same right.
function Tensor.bucketize(self, boundaries, opts)
  if not is_tensor(self) and type(self) ~= "number" then header(self) end
  if not is_tensor(boundaries) then
    fail(("bucketize: boundaries must be a tensor, got %s"):format(describe(boundaries)))
  end
  if boundaries:dim() ~= 1 then
    fail(("bucketize: boundaries must be a 1-D tensor, got %d dims"):format(boundaries:dim()))
  end
  if type(opts) == "boolean" then opts = { right = opts } end
  local o = util.options("bucketize", opts, { right = "boolean", out_int32 = "boolean" })
  return search("bucketize", boundaries, self, o.right, nil, o.out_int32)
end

return {}
