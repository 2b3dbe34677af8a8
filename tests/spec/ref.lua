-- ref.lua: a plain Lua model of tensors for the randomised specs: nested tables of
-- numbers with a shape, random shapes and values, torch's promotion table, and
-- random layouts (transposed, expanded, sliced) of the same values.
local T = require("tensordict")

local M = {}
local rand = math.random

M.INTS = { "uint8", "int8", "int16", "int32", "int64" }
M.FLOATS = { "float16", "bfloat16", "float32", "float64" }
M.ALL = { "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64" }

local category = { bool = 0, uint8 = 1, int8 = 1, int16 = 1, int32 = 1, int64 = 1,
  float16 = 2, bfloat16 = 2, float32 = 2, float64 = 2 }
M.category = category

function M.is_float(d) return category[d] == 2 end
function M.is_int(d) return category[d] == 1 end

-- torch.promote_types for two dtypes.
function M.promote(a, b)
  if a == b then return a end
  local ca, cb = category[a], category[b]
  if ca ~= cb then return ca > cb and a or b end
  if ca == 2 then
    if (a == "float16" and b == "bfloat16") or (a == "bfloat16" and b == "float16") then return "float32" end
    local rank = { float16 = 1, bfloat16 = 1, float32 = 2, float64 = 3 }
    return rank[a] >= rank[b] and a or b
  end
  -- integers: signed and unsigned of equal width go one wider; otherwise the wider
  local bits = { uint8 = 8, int8 = 8, int16 = 16, int32 = 32, int64 = 64 }
  if a == "uint8" or b == "uint8" then
    local other = a == "uint8" and b or a
    if other == "int8" then return "int16" end
    return other
  end
  return bits[a] >= bits[b] and a or b
end

-- torch.result_type of two tensors: a 0-dim tensor only counts when its category is
-- above the dimensioned operand's.
function M.result_type(a, sa, b, sb)
  if (#sa == 0) == (#sb == 0) then return M.promote(a, b) end
  local dimensioned, zero = a, b
  if #sa == 0 then dimensioned, zero = b, a end
  if category[zero] > category[dimensioned] then return zero end
  return dimensioned
end

-- The dtype of tensor (dtype a) op Lua scalar (integral or not, or boolean).
function M.promote_scalar(a, s)
  local kind = type(s) == "boolean" and 0 or (s % 1 == 0 and 1 or 2)
  if kind <= category[a] then return a end
  return kind == 1 and "int64" or "float32"
end

function M.numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

function M.random_shape(max_dims, max_size)
  local shape = {}
  for i = 1, rand(0, max_dims or 3) do shape[i] = rand(0, max_size or 3) end
  return shape
end

-- A shape that broadcasts with shape: some dims dropped from the left, some set to 1.
function M.broadcast_partner(shape)
  local out = {}
  local drop = rand(0, #shape)
  for i = drop + 1, #shape do out[#out + 1] = rand() < 0.3 and 1 or shape[i] end
  return out
end

function M.broadcast_shape(a, b)
  local n = math.max(#a, #b)
  local out = {}
  for i = 1, n do
    local x, y = a[#a - n + i] or 1, b[#b - n + i] or 1
    assert(x == y or x == 1 or y == 1)
    out[i] = x == 1 and y or x
  end
  return out
end

-- Random value of a dtype, small enough that sums and products of a few stay exact.
function M.random_value(dtype, special)
  if dtype == "bool" then return rand() < 0.5 end
  if dtype == "uint8" then return rand(0, 9) end
  if M.is_int(dtype) then return rand(-9, 9) end
  if special and rand() < 0.08 then
    local s = { 0 / 0, 1 / 0, -1 / 0, 0 }
    return s[rand(1, #s)]
  end
  -- Multiples of 1/8 are exact in every float dtype, bfloat16 included.
  return rand(-64, 64) / 8
end

-- Nested table of random values with this shape.
function M.random_values(shape, dtype, special)
  local function build(d)
    if d > #shape then return M.random_value(dtype, special) end
    local t = {}
    for i = 1, shape[d] do t[i] = build(d + 1) end
    return t
  end
  return build(1)
end

-- Element at a 1-based multi-index, broadcasting size-1 and missing leading dims.
function M.at(values, shape, index)
  local v = values
  local offset = #index - #shape
  for d = 1, #shape do
    v = v[shape[d] == 1 and 1 or index[offset + d]]
  end
  return v
end

-- Builds a nested table of shape by calling f(index) for every multi-index.
function M.generate(shape, f)
  local index = {}
  local function build(d)
    if d > #shape then return f(index) end
    local t = {}
    for i = 1, shape[d] do
      index[d] = i
      t[i] = build(d + 1)
    end
    return t
  end
  return build(1)
end

function M.map(values, f)
  if type(values) ~= "table" then return f(values) end
  local out = {}
  for i, v in ipairs(values) do out[i] = M.map(v, f) end
  return out
end

-- The tensor of these values in a random layout: contiguous, transposed and
-- transposed back (strided), a step-2 slice of a larger tensor, or, where a dim has
-- size 1 in small_shape (a shape broadcasting to shape), expanded with stride 0.
function M.tensor(values, shape, dtype)
  local base = T.tensor(values, dtype)
  if #shape == 0 then return base end
  base = base:view(shape)
  local r = rand()
  if r < 0.3 and #shape >= 2 then
    return base:transpose(1, #shape):contiguous():transpose(1, #shape)
  elseif r < 0.6 then
    local big_shape = {}
    for i, s in ipairs(shape) do big_shape[i] = s end
    big_shape[1] = shape[1] * 2
    local view = T.zeros(big_shape, dtype)[{ { 1, -1, 2 } }]
    view:copy_(base)
    return view
  end
  return base
end

-- Values of small_shape expanded (stride 0) to shape, and the model's values for them.
function M.expanded(small_shape, shape, dtype, special)
  local values = M.random_values(small_shape, dtype, special)
  local t = T.tensor(values, dtype)
  if #small_shape > 0 then t = t:view(small_shape) end
  local full = M.generate(shape, function(index) return M.at(values, small_shape, index) end)
  return t:expand(shape), full
end

-- Compares nested tables: numbers within a relative/absolute tolerance, NaN equal to NaN.
function M.close(a, b, rtol, atol, path)
  path = path or ""
  if type(a) == "table" or type(b) == "table" then
    if type(a) ~= "table" or type(b) ~= "table" then return false, "structure differs at " .. path end
    if #a ~= #b then return false, ("length %d vs %d at %s"):format(#a, #b, path) end
    for i = 1, #a do
      local ok, why = M.close(a[i], b[i], rtol, atol, path .. "[" .. i .. "]")
      if not ok then return false, why end
    end
    return true
  end
  if type(a) == "number" and type(b) == "number" then
    if a ~= a and b ~= b then return true end
    if a == b then return true end
    if math.abs(a - b) <= (atol or 0) + (rtol or 0) * math.abs(b) then return true end
  elseif a == b then
    return true
  end
  return false, ("%s vs %s (expected) at %s"):format(tostring(a), tostring(b), path)
end

-- Wraps an integer the way a dtype of that many bits stores it.
function M.wrap(v, dtype)
  local bits = ({ uint8 = 8, int8 = 8, int16 = 16, int32 = 32 })[dtype]
  if not bits then return v end
  local m = 2 ^ bits
  v = v % m
  if dtype ~= "uint8" and v >= m / 2 then v = v - m end
  return v
end

-- What storing a double in dtype gives back, for exact expectations.
function M.store(v, dtype)
  if type(v) == "boolean" then v = v and 1 or 0 end
  if dtype == "bool" then return v ~= 0 end
  if M.is_int(dtype) then return M.wrap(v, dtype) end
  return T.tensor({ v }, "float64"):to(dtype):to("float64")[1]
end

-- Relative tolerance for results computed in a dtype.
function M.rtol(dtype)
  return ({ float16 = 2e-3, bfloat16 = 1.6e-2, float32 = 2e-6, float64 = 1e-12 })[dtype] or 0
end

return M
