-- tensor/random.lua: T.manual_seed, T.Generator, T.rand/randn/randint/randperm and the
-- in-place uniform_, normal_, bernoulli_ (Philox, in core/kernels/random.c).
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local dtypes = require("tensordict.tensor.dtype")
local tensor = require("tensordict.tensor.core")
local device = require("tensordict.tensor.device")

local C = lib.C
local fail, describe = util.fail, util.describe
local Tensor, adopt, header, check = tensor.Tensor, tensor.adopt, tensor.handle, tensor.check

local M = {}

local Generator = {}
Generator.__index = Generator

local function seed_arg(call, seed)
  if not util.is_int(seed) or seed < 0 or seed >= 2 ^ 64 then
    fail(("%s: seed must be a non-negative integer, got %s"):format(call, describe(seed)))
  end
  return seed
end

-- T.Generator(seed): an independent stream; pass it as the last argument of the calls.
function M.Generator(seed)
  local g = C.td_generator_new(seed_arg("Generator", seed or 0))
  if g == nil then util.c_fail() end
  return (setmetatable({ g = ffi.gc(g, C.td_generator_release) }, Generator))
end

function Generator:manual_seed(seed)
  C.td_generator_manual_seed(self.g, seed_arg("manual_seed", seed))
  return self
end

function Generator:seed() return (tonumber(C.td_generator_seed(self.g))) end
function Generator:__tostring() return ("tensordict.Generator(seed=%d)"):format(self:seed()) end

-- A generator's whole state as JSON-safe text, "seed:offset" (decimal uint64s: Philox's
-- key and next counter block). torch gives a ByteTensor, torch7 a table; text keeps
-- every bit and fits in a checkpoint's JSON.
local U64_MAX = 0xffffffffffffffffULL

local function u64_text(x) return (tostring(x):gsub("ULL$", "")) end

local function state_text(g)
  return u64_text(C.td_generator_seed(g)) .. ":" .. u64_text(C.td_generator_offset(g))
end

local function u64_of(call, digits, state)
  local v = 0ULL
  for i = 1, #digits do
    local d = digits:byte(i) - 48
    if v > (U64_MAX - d) / 10 then
      fail(("%s: %s is past 2^64 - 1"):format(call, describe(state)))
    end
    v = v * 10 + d
  end
  return v
end

local function set_state(call, g, state)
  local seed, offset
  if type(state) == "string" then seed, offset = state:match("^(%d+):(%d+)$") end
  if not seed then
    fail(("%s: expected a state from get_state() (\"seed:offset\"), got %s"):format(call, describe(state)))
  end
  C.td_generator_set_state(g, u64_of(call, seed, state), u64_of(call, offset, state))
end

-- g:get_state() -> "seed:offset"; g:set_state(state) continues the stream from there.
function Generator:get_state() return state_text(self.g) end
function Generator:set_state(state)
  set_state("Generator:set_state", self.g, state)
  return self
end

-- T.get_rng_state() / T.set_rng_state(state): the same for the global generator.
function M.get_rng_state() return state_text(nil) end
function M.set_rng_state(state) set_state("set_rng_state", nil, state) end

-- Whether g is a T.Generator (the sampling functions take one last, optionally).
function M.is_generator(g) return getmetatable(g) == Generator end

local function gen_arg(g, call)
  if g == nil then return nil end
  if getmetatable(g) ~= Generator then fail(("%s: expected a T.Generator, got %s"):format(call, describe(g))) end
  return g.g
end

function M.manual_seed(seed)
  C.td_generator_manual_seed(C.td_default_generator(), seed_arg("manual_seed", seed))
end

local function number(call, what, v)
  if type(v) ~= "number" then fail(("%s: %s must be a number, got %s"):format(call, what, describe(v))) end
  return v
end

function Tensor.uniform_(self, a, b, g)
  local low, high = number("uniform_", "low", a or 0), number("uniform_", "high", b or 1)
  local h = header(self)
  check(device.pick("uniform_", h).td_uniform_(h, low, high, gen_arg(g, "uniform_")))
  return self
end

function Tensor.normal_(self, mean, std, g)
  local m, sd = number("normal_", "mean", mean or 0), number("normal_", "std", std or 1)
  local h = header(self)
  check(device.pick("normal_", h).td_normal_(h, m, sd, gen_arg(g, "normal_")))
  return self
end

function Tensor.bernoulli_(self, p, g)
  local h = header(self)
  check(device.pick("bernoulli_", h).td_bernoulli_(h, number("bernoulli_", "p", p or 0.5), gen_arg(g, "bernoulli_")))
  return self
end

-- Splits "shape [, dtype] [, generator]" arguments.
local function shape_dtype_gen(call, default_dtype, ...)
  local n, nxt = util.read_shape(call, false, ...)
  local dtype, g = select(nxt, ...)
  if getmetatable(dtype) == Generator then dtype, g = nil, dtype end
  local code = dtype and dtypes.code(dtype, call) or default_dtype
  return n, code, gen_arg(g, call)
end

-- A new float32 (or dtype) tensor filled by fill(t, a, b, g).
local function filled(call, fill, a, b, ...)
  local n, code, g = shape_dtype_gen(call, dtypes.FLOAT32, ...)
  local t = adopt(C.td_tensor_empty(n, util.shape_buf, code))
  check(fill(t.h, a, b, g))
  return t
end

-- T.rand(shape [, dtype] [, generator]): uniform in [0, 1).
function M.rand(...) return filled("rand", C.td_uniform_, 0, 1, ...) end

-- T.randn(shape [, dtype] [, generator]): standard normal.
function M.randn(...) return filled("randn", C.td_normal_, 0, 1, ...) end

-- T.randint(low, high, shape [, dtype] [, generator]): integers in low..high
-- inclusive, like math.random(low, high); int64 by default. T.randint(high, shape)
-- draws from 1..high.
function M.randint(low, high, ...)
  if type(high) == "table" then return M.randint(1, low, high, ...) end
  if not util.is_int(low) or not util.is_int(high) then
    fail(("randint: low and high must be integers, got %s and %s"):format(describe(low), describe(high)))
  end
  if high < low then fail(("randint: high %d is below low %d"):format(high, low)) end
  local n, code, g = shape_dtype_gen("randint", dtypes.INT64, ...)
  local t = adopt(C.td_tensor_empty(n, util.shape_buf, code))
  check(C.td_randint_(t.h, low, high + 1, g))
  return t
end

-- T.randperm(n [, dtype] [, generator]): a random permutation of 1..n (int64).
function M.randperm(n, dtype, g)
  if getmetatable(dtype) == Generator then dtype, g = nil, dtype end
  if not util.is_int(n) or n < 0 then
    fail(("randperm: n must be a non-negative integer, got %s"):format(describe(n)))
  end
  local code = dtype and dtypes.code(dtype, "randperm") or dtypes.INT64
  local t = adopt(C.td_randperm(n, code, gen_arg(g, "randperm")))
  check(C.td_binary_scalar_(C.TD_BINARY_ADD, t.h, 1, C.TD_SCALAR_INT))
  return t
end

return M
