-- tensor/scatter_reduce.lua: torch's reducing scatters, scatter_add(_) and
-- scatter_reduce(_) (sum, prod, mean, amax, amin, with or without self's values), on
-- core/kernels/gather.c's td_scatter_reduce_: indices 1-based as everywhere here,
-- reductions in increasing order along dim (the same result for any thread count).
-- Methods only.
local util = require("tensordict.util")
local lib = require("tensordict.lib")
local tensor = require("tensordict.tensor.core")
local gather = require("tensordict.tensor.gather")
local create = require("tensordict.tensor.create")
local dtypes = require("tensordict.tensor.dtype")

local C = lib.C
local fail, describe, dim0 = util.fail, util.describe, util.dim0
local Tensor, is_tensor, header = tensor.Tensor, tensor.is_tensor, tensor.handle

local MODES = " sum prod mean amax amin " -- torch's reduce names

local function check(status)
  if status ~= 0 then util.c_fail() end
end

-- The 0-based index (an owned tensor) for self's dim (1-based dim given by the user).
local function index_of(call, self, dim, index, src)
  local d = dim0(call, dim, self:dim())
  if not is_tensor(src) then fail(("%s: src must be a tensor, got %s"):format(call, describe(src))) end
  local size = self:dim() == 0 and 1 or self:size(d + 1)
  return d, gather.zero_based(index, size, d + 1, call)
end

-- scatter_add_(dim, index, src): self[..index..] += src, every src value counted.
function Tensor.scatter_add_(self, dim, index, src)
  local h = header(self)
  local d, idx = index_of("scatter_add_", self, dim, index, src)
  local status = C.td_scatter_reduce_(h, d, idx.h, header(src), C.TD_SCATTER_SUM)
  idx:free()
  check(status)
  return self
end

function Tensor.scatter_add(self, dim, index, src)
  header(self)
  return (self:clone():scatter_add_(dim, index, src))
end

-- mean: the sums divided by how many values each position took (self counting as one
-- when included); untouched positions keep their value. Integers divide with floor, as
-- torch does.
local function divide_by_counts(self, d, idx, include_self)
  local dtype = self:dtype()
  local count = create.full(self:shape(), include_self and 1 or 0, dtype)
  local ones = create.full(idx:shape(), 1, dtype)
  check(C.td_scatter_reduce_(header(count), d, idx.h, header(ones), C.TD_SCATTER_SUM))
  count:masked_fill_(count:eq(0), 1)
  self:copy_(dtypes.is_floating(header(self).dtype) and self / count or self:floor_divide(count))
end

-- scatter_reduce_(dim, index, src, reduce [, {include_self = true}]): src's values
-- reduced into self at index along dim. Without include_self the positions the index
-- names start from src's values alone: sum, prod and mean from 0 or 1, amax and amin
-- from a value of src (set first, then reduced again: a maximum is not changed by it).
function Tensor.scatter_reduce_(self, dim, index, src, reduce, opts)
  local call = "scatter_reduce_"
  local h = header(self)
  if type(reduce) ~= "string" or not MODES:find(" " .. reduce .. " ", 1, true) then
    fail(("%s: reduce must be one of sum, prod, mean, amax, amin (torch's names), got %s")
      :format(call, describe(reduce)))
  end
  opts = util.options(call, opts, { include_self = "boolean" })
  local include_self = opts.include_self ~= false
  local d, idx = index_of(call, self, dim, index, src)
  local s = header(src)
  local mode = reduce == "mean" and C.TD_SCATTER_SUM or C["TD_SCATTER_" .. reduce:upper()]
  if not include_self then -- an error here leaves idx to the GC
    if reduce == "amax" or reduce == "amin" then
      check(C.td_scatter_reduce_(h, d, idx.h, s, C.TD_SCATTER_SET))
    else
      local start = create.full(idx:shape(), reduce == "prod" and 1 or 0, self:dtype())
      check(C.td_scatter_reduce_(h, d, idx.h, header(start), C.TD_SCATTER_SET))
    end
  end
  check(C.td_scatter_reduce_(h, d, idx.h, s, mode))
  if reduce == "mean" then divide_by_counts(self, d, idx, include_self) end
  idx:free()
  return self
end

function Tensor.scatter_reduce(self, dim, index, src, reduce, opts)
  header(self)
  return (self:clone():scatter_reduce_(dim, index, src, reduce, opts))
end

return {}
