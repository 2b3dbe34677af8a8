-- Randomised check of the index grammar against a plain Lua model. The tensor under
-- test holds unique ids (an arange, maybe permuted), so what a key selects can be read
-- back as a set of ids, both for reads and for assignments.
local T = require("tensordict")

local rand = math.random

local function random_shape()
  local shape = {}
  for i = 1, rand(1, 4) do shape[i] = rand(0, 4) end
  return shape
end

local numel = require("random_keys").numel

-- Nested Lua table of the ids of a tensor of this shape, element [i1][i2]... holding
-- its row-major position before the permutation perm is applied.
local function reference(shape, perm)
  local base_strides, s = {}, 1
  for d = #shape, 1, -1 do
    base_strides[d] = s
    s = s * shape[d]
  end
  local pshape = {}
  for d, p in ipairs(perm) do pshape[d] = shape[p] end
  local function build(d, offset)
    if d > #pshape then return offset end
    local t = {}
    for i = 1, pshape[d] do t[i] = build(d + 1, offset + (i - 1) * base_strides[perm[d]]) end
    return t
  end
  return build(1, 1), pshape
end

local function random_perm(n)
  local p = {}
  for i = 1, n do p[i] = i end
  for i = n, 2, -1 do
    local j = rand(1, i)
    p[i], p[j] = p[j], p[i]
  end
  return p
end

local random_entry = require("random_keys").entry

-- A random key for a tensor of this shape, and the same key with the ellipsis expanded
-- into whole dims. Entries before an ellipsis address the first dims, entries after it
-- the last ones; new axes go anywhere.
local function random_key(shape)
  local key, expanded = {}, {}
  local function push(e, times)
    if rand() < 0.15 then
      key[#key + 1] = T.newaxis
      expanded[#expanded + 1] = T.newaxis
    end
    key[#key + 1] = e
    for _ = 1, times or 1 do expanded[#expanded + 1] = e == T.ellipsis and {} or e end
  end
  local ndim = #shape
  local prefix = rand(0, ndim)
  for d = 1, prefix do push(random_entry(shape[d])) end
  if rand() < 0.4 then
    local suffix = rand(0, ndim - prefix)
    local covered = ndim - prefix - suffix
    if covered == 0 then
      key[#key + 1] = T.ellipsis
    else
      push(T.ellipsis, covered)
    end
    for d = ndim - suffix + 1, ndim do push(random_entry(shape[d])) end
  end
  if rand() < 0.2 then
    key[#key + 1] = T.newaxis
    expanded[#expanded + 1] = T.newaxis
  end
  return key, expanded
end

-- The model: applies the expanded key to a nested table; returns value and shape.
local function apply(value, shape, key, k, d)
  local e = key[k]
  if e == nil then -- remaining dims whole
    local rest = {}
    for i = d, #shape do rest[#rest + 1] = shape[i] end
    return value, rest
  end
  if e == T.newaxis then
    local v, s = apply(value, shape, key, k + 1, d)
    table.insert(s, 1, 1)
    return { v }, s
  end
  local size = shape[d]
  if type(e) == "number" then
    local i = e > 0 and e or size + e + 1
    return apply(value and value[i], shape, key, k + 1, d + 1)
  end
  local a, b, step = e[1] or 1, e[2] or e[1] or -1, e[3] or 1
  if a < 0 then a = size + a + 1 end
  if b < 0 then b = size + b + 1 end
  if a < 1 then a = 1 end
  if b > size then b = size end
  local out, count, sub_shape = {}, 0, nil
  for i = a, b, step do
    local v, s = apply(value and value[i], shape, key, k + 1, d + 1)
    count = count + 1
    out[count] = v
    sub_shape = s
  end
  if not sub_shape then -- empty: the shape of what one element would have given
    sub_shape = select(2, apply(nil, shape, key, k + 1, d + 1))
  end
  table.insert(sub_shape, 1, count)
  return out, sub_shape
end

local show = require("random_keys").show

local function flatten_ids(v, out)
  if type(v) == "table" then
    for _, x in ipairs(v) do flatten_ids(x, out) end
  elseif v ~= nil then
    out[v] = true
  end
  return out
end

describe("the index grammar against a plain Lua model", function()
  it("reads and writes what the model selects, for 600 random keys", function()
    math.randomseed(20261202)
    for case = 1, 600 do
      local shape = random_shape()
      local perm = random_perm(#shape)
      local t = T.arange(1, numel(shape), "int64"):view(shape):permute(perm)
      local ref, pshape = reference(shape, perm)
      local key, expanded = random_key(pshape)
      local want, want_shape = apply(ref, pshape, expanded, 1, 1)
      local got = t[key]
      local where = ("case %d: shape %s perm %s key %s")
        :format(case, table.concat(shape, "x"), table.concat(perm, ","), show(key))
      if type(want) == "number" then
        assert.are.equal(want, got, where)
      else
        assert.are.same(want_shape, got:shape(), where)
        assert.are.same(flatten_ids(want, {}), flatten_ids(got:totable(), {}), where)
        assert.are.same(want, got:totable(), where)
        -- Writing through the same key changes exactly the selected ids.
        local before = t:clone()
        t[key] = 0
        local selected = flatten_ids(want, {})
        local b, a = before:flatten():totable(), t:flatten():totable()
        for i = 1, #b do
          assert.are.equal(selected[b[i]] and 0 or b[i], a[i], where)
        end
      end
    end
  end)
end)
