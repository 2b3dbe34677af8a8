-- tensor/sampling.lua: torch's sampling functions over tensors of parameters, drawn from
-- the library's Philox streams (tensor/random.lua; the global one or a T.Generator given
-- last): bernoulli (per-element probabilities), normal (tensor means and deviations) and
-- multinomial (1-based category indices). The same seed gives the same draws; they are
-- not torch's draws (another generator), only its distributions.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local create = require("tensordict.tensor.create")
local dtypes = require("tensordict.tensor.dtype")
local random = require("tensordict.tensor.random")

local fail, describe = util.fail, util.describe
local header = tensor.handle -- raises, naming the method, for a self that is no live tensor
local Tensor, is_tensor = tensor.Tensor, tensor.is_tensor

local M = {}

local function floating(t) return dtypes.is_floating(header(t).dtype) end

-- Uniform draws in [0, 1) of a shape: float64 for float64 parameters, else float32 (a
-- float16 draw would have 11 bits).
local function uniform(shape, like, g)
  return (create.empty(shape, like:dtype() == "float64" and "float64" or "float32"):uniform_(0, 1, g))
end

local function generator_arg(call, g)
  if g ~= nil and not random.is_generator(g) then
    fail(("%s: expected a T.Generator, got %s"):format(call, describe(g)))
  end
  return g
end

-- bernoulli([generator]): 1 with probability self[i], else 0, in self's (floating) dtype.
function Tensor.bernoulli(self, g)
  header(self)
  generator_arg("bernoulli", g)
  if not floating(self) then
    fail(("bernoulli: expected a floating point tensor of probabilities, got %s"):format(self:dtype()))
  end
  if self:numel() > 0 and (self:lt(0):any() or self:gt(1):any() or self:isnan():any()) then
    fail("bernoulli: every probability must be in [0, 1]")
  end
  return (uniform(self:shape(), self, g):lt(self):to(self:dtype()))
end

-- T.normal(mean, std [, size] [, generator]): normal draws, mean and std numbers (then
-- size gives the shape, float32) or tensors (broadcast together; std >= 0).
function M.normal(mean, std, size, g)
  if g == nil and random.is_generator(size) then size, g = nil, size end
  generator_arg("normal", g)
  local tm, ts = is_tensor(mean), is_tensor(std)
  if not tm and type(mean) ~= "number" then
    fail(("normal: mean must be a number or a tensor, got %s"):format(describe(mean)))
  end
  if not ts and type(std) ~= "number" then
    fail(("normal: std must be a number or a tensor, got %s"):format(describe(std)))
  end
  if (ts and std:numel() > 0 and std:lt(0):any()) or (not ts and std < 0) then
    fail("normal: std must be >= 0 everywhere")
  end
  for _, t in ipairs({ tm and mean or nil, ts and std or nil }) do
    if not floating(t) then fail(("normal: expected floating point tensors, got %s"):format(t:dtype())) end
  end
  if not tm and not ts then
    if type(size) ~= "table" then fail(("normal: with numbers for mean and std, size must be a shape table, got %s")
      :format(describe(size))) end
    return (create.empty(size, "float32"):normal_(mean, std, g))
  end
  if size ~= nil then fail("normal: size is taken only when mean and std are numbers (tensors give the shape)") end
  local like = tm and mean or std
  local shape = (tm and ts) and (mean + std):shape() or like:shape()
  return (create.empty(shape, like:dtype()):normal_(0, 1, g) * std + mean)
end

local function multinomial_arg(self, n, replacement)
  header(self)
  if self:dim() ~= 1 and self:dim() ~= 2 then
    fail(("multinomial: expected a 1-D or 2-D tensor of weights, got %d dims"):format(self:dim()))
  end
  if not floating(self) then fail(("multinomial: expected floating point weights, got %s"):format(self:dtype())) end
  local k = self:size(self:dim())
  if not util.is_int(n) or n < 1 then
    fail(("multinomial: num_samples must be an integer >= 1, got %s"):format(describe(n)))
  end
  if replacement ~= nil and type(replacement) ~= "boolean" then
    fail(("multinomial: replacement must be a boolean, got %s"):format(describe(replacement)))
  end
  if not replacement and n > k then
    fail(("multinomial: cannot draw %d samples without replacement from %d categories"):format(n, k))
  end
  local w = self:dim() == 1 and self:view(1, k) or self
  if k == 0 or w:lt(0):any() or w:isnan():any() or w:isinf():any() then
    fail("multinomial: the weights must be finite and >= 0 (and there must be at least one category)")
  end
  if w:sum(2):le(0):any() then fail("multinomial: the weights of a row sum to 0") end
  if not replacement and w:gt(0):sum(2):lt(n):any() then
    fail(("multinomial: a row has fewer than %d categories of weight > 0 to draw without replacement"):format(n))
  end
  return w, k
end

-- multinomial(num_samples [, replacement = false] [, generator]): 1-based category
-- indices (int64) drawn by the weights along the last dim. Without replacement by
-- exponential races (the n smallest of E_i / w_i, E_i ~ Exp(1), are an ordered sample
-- without replacement); with replacement by inverting each row's running sum.
function Tensor.multinomial(self, n, replacement, g)
  if g == nil and random.is_generator(replacement) then replacement, g = nil, replacement end
  generator_arg("multinomial", g)
  local w, k = multinomial_arg(self, n, replacement)
  local rows = w:size(1)
  local out
  if not replacement then
    local e = uniform({ rows, k }, w, g):neg():log1p():neg()
    local _, idx = (e / w:to(e:dtype())):topk(n, 2, false)
    out = idx
  else
    local cdf = w:to("float64"):cumsum(2)
    local u = uniform({ rows, n }, cdf, g) * cdf:narrow(2, k, 1)
    -- the category is one past how many running sums are <= the draw
    out = (cdf:view(rows, 1, k):le(u:view(rows, n, 1)):sum(3) + 1):clamp(1, k)
  end
  return self:dim() == 1 and out:view(n) or out
end

-- In-place draws of torch's other distributions, made from uniform draws u in [0, 1)
-- (float64 for a float64 tensor): exponential_(lambd = 1): -log(1 - u) / lambd;
-- geometric_(p): the number of trials to the first success, ceil(log(1 - u) / log(1 - p));
-- cauchy_(median = 0, sigma = 1): median + sigma * tan(pi * (u - 1/2)); log_normal_(mean
-- = 0, std = 1): exp of a normal draw.
local function number_arg(call, what, v, default, ok)
  if v == nil then return default end
  if type(v) ~= "number" or not ok(v) then
    fail(("%s: %s must be %s, got %s"):format(call, what, ok(nil), describe(v)))
  end
  return v
end
local function positive(v) if v == nil then return "a number > 0" end return v > 0 end
local function probability(v) if v == nil then return "a number in (0, 1]" end return v > 0 and v <= 1 end
local function finite(v) if v == nil then return "a finite number" end return v == v and math.abs(v) ~= math.huge end

local function fill_from_uniform(call, self, g, fn)
  header(self)
  generator_arg(call, g)
  if not floating(self) then fail(("%s: expected a floating point tensor, got %s"):format(call, self:dtype())) end
  self:copy_(fn(uniform(self:shape(), self, g)))
  return self
end

function Tensor.exponential_(self, lambd, g)
  if g == nil and random.is_generator(lambd) then lambd, g = nil, lambd end
  local l = number_arg("exponential_", "lambd", lambd, 1, positive)
  return fill_from_uniform("exponential_", self, g, function(u) return u:neg():log1p():neg() / l end)
end

function Tensor.geometric_(self, p, g)
  local q = number_arg("geometric_", "p", p, nil, probability)
  if q == nil then fail("geometric_: p must be a number in (0, 1], got nil") end
  return fill_from_uniform("geometric_", self, g, function(u)
    if q == 1 then return u:mul(0):add(1) end
    return (u:neg():log1p() / math.log(1 - q)):ceil():clamp_min(1)
  end)
end

function Tensor.cauchy_(self, median, sigma, g)
  local m = number_arg("cauchy_", "median", median, 0, finite)
  local s = number_arg("cauchy_", "sigma", sigma, 1, positive)
  return fill_from_uniform("cauchy_", self, g, function(u) return ((u - 0.5) * math.pi):tan() * s + m end)
end

function Tensor.log_normal_(self, mean, std, g)
  local m = number_arg("log_normal_", "mean", mean, 0, finite)
  local s = number_arg("log_normal_", "std", std, 1, positive)
  header(self)
  generator_arg("log_normal_", g)
  if not floating(self) then fail(("log_normal_: expected a floating point tensor, got %s"):format(self:dtype())) end
  return (self:normal_(m, s, g):exp_())
end

return M
