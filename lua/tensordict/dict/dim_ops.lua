-- dict/dim_ops.lua: TensorDict methods that work along batch dims leaf by leaf:
-- cumsum, cumprod, softmax, log_softmax, expand_as, repeat (repeat_tensor) and
-- repeat_interleave. A batch dim is a dim of every leaf (the leading ones), so each is
-- the tensor method on every leaf; a dim past the batch dims is refused, naming it.
-- Non-tensor values are carried over.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local tile = require("tensordict.tensor.tile")
local core = require("tensordict.dict.core")

local TD, is_td = core.methods, core.is_td
local fail, describe = util.fail, util.describe
local is_tensor = tensor.is_tensor

-- The leaf dim (1-based) of a batch dim given 1-based or negative.
local function leaf_dim(call, self, dim)
  if dim == nil then fail(call .. ": a batch dim is required") end
  return core.batch_dim(call, self, dim) + 1
end

-- cumsum(dim), cumprod(dim): running sum / product over a batch dim of every leaf
-- (Python's tensordict 0.15 has neither; torch's semantics per leaf).
for _, name in ipairs({ "cumsum", "cumprod" }) do
  TD[name] = function(self, dim)
    local d = leaf_dim(name, self, dim)
    return TD.apply(self, function(x) return x[name](x, d) end)
  end
end

-- softmax(dim [, dtype]), log_softmax: over a batch dim; floating leaves (or a dtype to
-- cast to first), as Python's td.softmax.
for _, name in ipairs({ "softmax", "log_softmax" }) do
  TD[name] = function(self, dim, dtype)
    local d = leaf_dim(name, self, dim)
    return TD.apply(self, function(x) return x[name](x, d, dtype) end)
  end
end

-- expand_as(other): to other's batch size (a TensorDict) or shape (a tensor), as Python.
function TD.expand_as(self, other)
  core.cdict(self)
  if is_td(other) then return TD.expand(self, other:batch_size()) end
  if is_tensor(other) then return TD.expand(self, other:shape()) end
  fail(("expand_as: expected a TensorDict or a tensor, got %s"):format(describe(other)))
end

-- repeat(sizes...): one size per batch dim (as Python requires); the batch size
-- multiplies and the leaves' other dims repeat once.
local function repeat_td(self, ...)
  core.cdict(self)
  local reps = util.list_args("repeat", ...)
  local batch = self:batch_size()
  if #reps ~= #batch then
    fail(("repeat: %d repeats given for %d batch dims (one per batch dim)"):format(#reps, #batch))
  end
  local new_batch = {}
  for i, r in ipairs(reps) do
    if not util.is_int(r) or r < 0 then
      fail(("repeat: repeats must be non-negative integers, got %s at position %d")
        :format(describe(r), i))
    end
    new_batch[i] = batch[i] * r
  end
  tile.check_repeat("repeat", batch, reps)
  return TD.apply(self, function(x)
    local leaf_reps = { unpack(reps) }
    for i = #reps + 1, x:dim() do leaf_reps[i] = 1 end
    return tile.tile(x, leaf_reps, "repeat")
  end, { batch_size = new_batch })
end
TD["repeat"] = repeat_td
TD.repeat_tensor = repeat_td

-- repeat_interleave(repeats [, dim]): repeats an integer or an integer tensor (one count
-- per element of the dim, or one); without a dim the batch dims are flattened first,
-- as Python.
function TD.repeat_interleave(self, repeats, dim)
  core.cdict(self)
  local td = self
  if dim == nil then td, dim = TD.reshape(self, -1), 1 end
  local d = leaf_dim("repeat_interleave", td, dim)
  local plan, total = tile.interleave_plan("repeat_interleave", repeats, td:batch_size()[d])
  local new_batch = td:batch_size()
  new_batch[d] = total
  return TD.apply(td, function(x) return tile.interleave(x, plan, d - 1, total) end,
    { batch_size = new_batch })
end

return {}
