-- tensordict: batched tensor containers and kernels for LuaJIT.
--   local T = require("tensordict")
-- See docs/lua-api.md. Everything hangs off T; the C library does the numeric work.
local lib = require("tensordict.lib")
local ffi = require("ffi")
local tensor = require("tensordict.tensor") -- each layer's facade loads its whole class
local td_core = require("tensordict.dict")
local lazy_stack = require("tensordict.lazy_stack") -- T.lazy_stack (LazyStackedTensorDict)
local create = require("tensordict.tensor.create")
local index = require("tensordict.tensor.index")
local dtypes = require("tensordict.tensor.dtype")
local memory = require("tensordict.tensor.memory")
local util = require("tensordict.util")
local ops = require("tensordict.tensor.ops")
local join = require("tensordict.tensor.join")
local random = require("tensordict.tensor.random")
local linalg = require("tensordict.tensor.linalg")
local cuda = require("tensordict.tensor.cuda")
local td_struct = require("tensordict.dict.struct")
local td_auto_batch = require("tensordict.dict.auto_batch")
local td_print = require("tensordict.dict.print")
local td_math = require("tensordict.dict.math")
local td_join = require("tensordict.dict.join")
local td_memmap = require("tensordict.dict.memmap")
local record = require("tensordict.dict.record") -- T.record (Python's @tensorclass)
local lazy_stack_ops = require("tensordict.lazy_stack.ops")
local lazy_stack_io = require("tensordict.lazy_stack.io")
require("tensordict.late").bind() -- what lower modules call back into, bound once

local T = {}

T.version = ffi.string(lib.C.td_version_string())
T.abi_version = lib.abi_version
T.library_path = lib.path

T.Tensor = tensor.Tensor -- the method table: add to it to extend every tensor
T.is_tensor = tensor.is_tensor

T.tensor = create.tensor
T.empty = create.empty
T.zeros = create.zeros
T.ones = create.ones
T.full = create.full
T.arange = create.arange
T.from_file = create.from_file
T.linspace = create.linspace
T.logspace = create.logspace
T.eye = create.eye

-- torch's *_like constructors: x's shape, and its dtype unless one is given. A
-- TensorDict gives its own method's result (td:zeros_like(dtype), dict/torchlike.lua).
local function like(call, x, dtype)
  if not tensor.is_tensor(x) then
    util.fail(("%s: expected a tensor or a TensorDict, got %s"):format(call, util.describe(x)))
  end
  return x:size(), dtype or x:dtype()
end
local function like_function(name, make)
  T[name] = function(x, ...)
    if td_core.is_td(x) then return (x[name](x, ...)) end
    return (make(x, ...))
  end
end
like_function("empty_like", function(x, dtype) return (create.empty(like("empty_like", x, dtype))) end)
like_function("zeros_like", function(x, dtype) return (create.zeros(like("zeros_like", x, dtype))) end)
like_function("ones_like", function(x, dtype) return (create.ones(like("ones_like", x, dtype))) end)
like_function("full_like", function(x, value, dtype)
  local shape, d = like("full_like", x, dtype)
  return (create.full(shape, value, d))
end)
like_function("rand_like", function(x, dtype) return (random.rand(like("rand_like", x, dtype))) end)
like_function("randn_like", function(x, dtype) return (random.randn(like("randn_like", x, dtype))) end)

T.newaxis = index.newaxis
T.ellipsis = index.ellipsis

-- Joins and where take tensors or TensorDicts (the first argument decides).
local function first_is_td(list) return type(list) == "table" and td_core.is_td(list[1]) end
local function first_is_record(list) return type(list) == "table" and record.is_record(list[1]) end
function T.stack(list, dim, opts)
  if first_is_td(list) then return td_join.stack(list, dim, opts) end
  if first_is_record(list) then return record.stack(list, dim) end
  if type(list) == "table" and lazy_stack.is_lazy_stack(list[1]) then
    util.fail("stack: element 1 is a LazyStackedTensorDict: lazy stacks of lazy stacks are not "
      .. "supported (densify it with contiguous() first)")
  end
  return join.stack(list, dim)
end
function T.cat(list, dim, opts)
  if first_is_td(list) then return td_join.cat(list, dim, opts) end
  if first_is_record(list) then return record.cat(list, dim) end
  return join.cat(list, dim)
end
-- T.vstack(list): rows stacked (1-D tensors as rows); T.hstack(list): joined along
-- dim 2 (dim 1 for 1-D tensors).
local function tensor_list(call, list)
  if type(list) ~= "table" or tensor.is_tensor(list) or list[1] == nil then
    util.fail(("%s: expected a list of tensors, got %s"):format(call, util.describe(list)))
  end
  for i, t in ipairs(list) do
    if not tensor.is_tensor(t) then
      util.fail(("%s: element %d is %s, not a tensor"):format(call, i, util.describe(t)))
    end
  end
  return list
end
function T.vstack(list)
  local rows = {}
  for i, t in ipairs(tensor_list("vstack", list)) do rows[i] = t:dim() < 2 and t:reshape(1, t:numel()) or t end
  return (join.cat(rows, 1))
end
function T.hstack(list)
  tensor_list("hstack", list)
  return (join.cat(list, list[1]:dim() <= 1 and 1 or 2))
end
function T.pad(x, pads, value)
  if td_core.is_td(x) then return td_join.pad(x, pads, value) end
  return join.pad(x, pads, value)
end
T.pad_sequence = td_join.pad_sequence
-- Python's lazy_stack and LazyStackedTensorDict.maybe_dense_stack (docs/lua-api.md).
T.lazy_stack = lazy_stack.lazy_stack
T.maybe_dense_stack = lazy_stack_ops.maybe_dense_stack
T.is_lazy_stack = lazy_stack.is_lazy_stack
T.LazyStackedTensorDict = { methods = lazy_stack.methods }
T.record = record.record -- typed records, Python's @tensorclass
T.is_record = record.is_record
function T.where(mask, a, b)
  if td_core.is_td(a) then return td_math.where(mask, a, b) end
  return ops.where(mask, a, b)
end
T.matmul = linalg.matmul

-- torch's function forms of the elementwise ops of C's op table (T.exp(x), T.add(a, b),
-- T.isfinite(x), T.atan(td)) and of a few other methods (T.flip(x, dims)): the first
-- argument's method, on a tensor, a TensorDict, a
-- lazy stack or a record. A name T has already (T.where, ...) keeps its own function.
local function op_function(name)
  return function(x, ...)
    if not (tensor.is_tensor(x) or td_core.is_td(x) or lazy_stack.is_lazy_stack(x) or record.is_record(x)) then
      util.fail(("%s: expected a tensor or a TensorDict, got %s"):format(name, util.describe(x)))
    end
    local method = x[name]
    if method == nil then util.fail(("%s: %s has no %s"):format(name, util.describe(x), name)) end
    return (method(x, ...))
  end
end
-- The same for methods with several results (values and indices, unique's inverse and
-- counts): every result, not the first alone.
local function op_function_results(name)
  return function(x, ...)
    if not tensor.is_tensor(x) then
      util.fail(("%s: expected a tensor, got %s"):format(name, util.describe(x)))
    end
    return x[name](x, ...) -- a Lua method: a tail call keeps its count of results
  end
end
-- and torch's other functions of a tensor that are methods here
local METHOD_FUNCTIONS = {}
for _, name in ipairs({ "isclose", "allclose", "equal", "nan_to_num", "nansum", "nanmean", "flip", "roll",
  "tril", "triu", "narrow", "movedim", "moveaxis", "swapaxes", "swapdims", "broadcast_to", "scatter",
  "index_add", "index_fill", "index_copy", "take", "take_along_dim", "outer", "diff", "addcmul", "addcdiv",
  "addmm", "tile", "diagonal", "diag", "trace", "kron", "cross", "tensor_split", "scatter_add", "scatter_reduce",
  "logcumsumexp", "bernoulli", "multinomial", "masked_scatter", "baddbmm", "tensordot", "inner",
  "vdot", "square", "positive", "absolute", "negative", "clip", "fix", "true_divide", "multiply", "subtract", "divide",
  "arccos", "arcsin", "arctan", "arccosh", "arcsinh", "arctanh", "arctan2", "greater", "greater_equal", "less",
  "less_equal", "not_equal", "argwhere", "count_nonzero", "logit", "sinc",
  "heaviside", "rad2deg", "deg2rad", "float_power", "fliplr", "flipud", "rot90", "diag_embed", "diagflat", "cov",
  "corrcoef", "cdist", "is_floating_point", "numel", "argsort", "quantile", "nanquantile", "histc", "bincount",
  "searchsorted" }) do -- (not dist: T.dist is the MPI module)
  METHOD_FUNCTIONS[name] = true
end
for _, names in ipairs({ ops.UNARY, ops.BINARY, METHOD_FUNCTIONS }) do
  for name in pairs(names) do
    if T[name] == nil then T[name] = op_function(name) end
  end
end
-- the functions with several results: sorting's (tensor/sorting.lua), the running extremes, aminmax, std_mean, var_mean
for _, name in ipairs({ "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "unique",
  "unique_consecutive", "cummax", "cummin", "aminmax", "std_mean", "var_mean" }) do
  T[name] = op_function_results(name)
end
-- T.bucketize(input, boundaries, ...): input may be a number, as in torch.
function T.bucketize(x, ...)
  if not (tensor.is_tensor(x) or type(x) == "number") then
    util.fail(("bucketize: expected a tensor or a number, got %s"):format(util.describe(x)))
  end
  return (tensor.Tensor.bucketize(x, ...))
end

T.manual_seed = random.manual_seed
T.Generator = random.Generator
T.get_rng_state = random.get_rng_state
T.set_rng_state = random.set_rng_state
T.rand = random.rand
T.randn = random.randn
T.randint = random.randint
T.randperm = random.randperm
T.normal = require("tensordict.tensor.sampling").normal
T.einsum = require("tensordict.tensor.einsum").einsum
for name, fn in pairs(require("tensordict.tensor.assemble")) do T[name] = fn end
T.row_stack = T.vstack -- torch's alias
-- NumPy's files (docs/lua-api.md, NumPy files)
T.load_npy = require("tensordict.tensor.npy").load_npy
T.load_npz = require("tensordict.dict.npz").load_npz
-- Looking at data (docs/lua-api.md, Describing data): a summary per leaf, a histogram
T.describe = require("tensordict.lazy_stack.describe").describe -- TensorDicts, tensors and lazy stacks
T.hist = require("tensordict.tensor.hist").hist

-- T.TensorDict(source, batch_size, opts) and T.TensorDict.fromkeys(keys, value).
T.TensorDict = setmetatable({ methods = td_core.methods }, {
  __call = function(_, source, batch_size, opts) return td_core.construct(source, batch_size, opts) end,
})
T.TensorDict.fromkeys = td_struct.fromkeys
T.TensorDict.from_dict = td_auto_batch.from_dict
T.from_dict = td_auto_batch.from_dict -- Python's tensordict.from_dict
T.set_printoptions = td_print.set_printoptions -- tostring(td): compact or detailed
T.get_printoptions = td_print.get_printoptions
-- On disk, in Python tensordict's formats (docs/lua-api.md, Memmap).
T.load_memmap = lazy_stack_io.load_memmap -- a TensorDict, or a lazy stack's folder
T.load = lazy_stack_io.load_memmap
function T.save(td, prefix, opts)
  if not (td_core.is_td(td) or lazy_stack.is_lazy_stack(td) or record.is_record(td)) then
    util.fail(("save: expected a TensorDict, got %s"):format(util.describe(td)))
  end
  return td:memmap(prefix, opts)
end
T.from_consolidated = lazy_stack_io.from_consolidated
-- HDF5 files (docs/h5.md): tensordict.h5 loads on first use (it opens libtensordict_h5,
-- linked with HDF5), named at run time since it sits above this facade.
local H5_MODULE = "tensordict.h5"
function T.from_h5(path, opts) return (require(H5_MODULE).from_h5(path, opts)) end
function td_core.methods.to_h5(self, path, opts) return (require(H5_MODULE).to_h5(self, path, opts)) end
T.memmap_tensor = td_memmap.memmap_tensor
T.is_tensordict = td_core.is_td
-- Python's is_tensor_collection: a TensorDict or a lazy stack.
function T.is_tensor_collection(x) return td_core.is_td(x) or lazy_stack.is_lazy_stack(x) end

-- CUDA (docs/cuda.md): the library is opened on the first call that needs it.
T.cuda = {
  is_available = cuda.is_available, device_count = cuda.device_count,
  current_device = cuda.current_device, set_device = cuda.set_device,
  synchronize = cuda.synchronize, empty_cache = cuda.empty_cache,
  memory_stats = cuda.memory_stats,
}

T.dtypes = dtypes.list()
T.live_bytes = memory.live_bytes
-- Freed large blocks wait for reuse (TD_CACHE_BYTES, 1 GiB by default): their size,
-- and a call returning them to the system.
function T.cached_bytes() return (tonumber(lib.C.td_cached_bytes())) end
function T.release_cached_memory() return (tonumber(lib.C.td_release_cached_memory())) end

-- Threads for large kernels, ours and OpenBLAS's; results do not depend on the count.
function T.set_num_threads(n)
  if not util.is_int(n) or n < 1 then
    util.fail(("set_num_threads: expected a positive integer, got %s"):format(util.describe(n)))
  end
  if lib.C.td_set_num_threads(n) ~= 0 then util.c_fail() end
end
function T.get_num_threads() return (lib.C.td_get_num_threads()) end
-- T.shutdown(): the library idle (threads joined, cached blocks returned) for a host
-- about to close its Lua state; everything restarts on demand.
function T.shutdown() lib.C.td_shutdown() end

-- T.flow: pipeline nodes (docs/flow.md), and T.dist: containers across MPI ranks
-- (docs/dist.md), loaded on first use (flow requires this module; dist loads MPI only
-- when asked).
local LAZY = { flow = "tensordict.flow", dist = "tensordict.dist" }
return setmetatable(T, {
  __index = function(t, k)
    local name = LAZY[k]
    if name then
      local m = require(name)
      rawset(t, k, m)
      return m
    end
  end,
})
