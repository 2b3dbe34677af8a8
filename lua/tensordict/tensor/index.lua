-- tensor/index.lua: the one parser of the index grammar (DESIGN.md, "Index grammar").
-- It turns a Lua key into 0-based td_index entries, checking every position against
-- the dim it lands on so errors speak in the user's 1-based terms; td_tensor_index
-- (core/src/views.c) then executes the entries in one call.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local dtypes = require("tensordict.tensor.dtype")

local M = {}
local fail, describe = util.fail, util.describe
local SELECT, SLICE, NEWAXIS, ELLIPSIS =
  C.TD_INDEX_SELECT, C.TD_INDEX_SLICE, C.TD_INDEX_NEWAXIS, C.TD_INDEX_ELLIPSIS
local TO_END = 0x7fffffffffffffffLL

-- Sentinels of the grammar; tostring shows their names in the REPL.
M.newaxis, M.ellipsis = unpack(require("tensordict.once")("index_sentinels", function()
  return {
    setmetatable({}, { __tostring = function() return "tensordict.newaxis" end }),
    setmetatable({}, { __tostring = function() return "tensordict.ellipsis" end }),
  }
end))

local MAX_ENTRIES = 2 * C.TD_MAX_DIMS + 1
M.entries = ffi.new("td_index[?]", MAX_ENTRIES)

-- Position i (1-based, negative from the end) in a dim of this size -> 0-based.
function M.position(i, size, dim)
  if not util.is_int(i) then
    fail(("index: %s is not an integer index (dim %d)"):format(describe(i), dim))
  end
  if i >= 1 and i <= size then return i - 1 end
  if i < 0 and i >= -size then return size + i end
  fail(("index: index %.0f is out of range for dim %d of size %d (valid: 1..%d or -%d..-1)")
    :format(i, dim, size, size, size))
end

-- A range bound b (inclusive) -> exclusive stop for td_index.
local function range_stop(b)
  if b == -1 then return TO_END end
  return b < 0 and b + 1 or b
end

local FAR = 2 ^ 62
local function clamp_far(x) return x > FAR and FAR or x < -FAR and -FAR or x end

local function fill_range(e, r, dim)
  local n = #r
  local a, b, step = r[1], r[2], r[3]
  if n == 0 then
    a, b, step = 1, -1, 1
  elseif n == 1 then
    b = a
  end
  step = step or 1
  if n > 3 or not util.is_int(a) or not util.is_int(b) or not util.is_int(step) then
    fail(("index: range %s for dim %d must be {a, b} or {a, b, step} with integers")
      :format(util.format_list(r), dim))
  end
  if a == 0 or b == 0 then
    fail(("index: range %s for dim %d holds 0; indices are 1-based (negative from the end)")
      :format(util.format_list(r), dim))
  end
  if step <= 0 then
    fail(("index: range step must be positive, got %.0f (dim %d)"):format(step, dim))
  end
  -- Bounds and steps past any size mean the same as 2^62 (no dim holds 2^60 elements);
  -- clamped here, they cannot wrap when they become int64 (2^63 would be -2^63).
  a, b, step = clamp_far(a), clamp_far(b), clamp_far(step)
  e.kind, e.start, e.stop, e.step = SLICE, a > 0 and a - 1 or a, range_stop(b), step
end

-- Set by tensor/core.lua: the metatable of tensors, to recognise mask and index entries.
M.tensor_mt = nil

local function whole(entry)
  entry.kind, entry.start, entry.stop, entry.step = SLICE, 0, TO_END, 1
end

-- Dims an entry consumes: none for newaxis and the ellipsis, a mask as many as it has.
local function dims_consumed(e)
  if e == M.ellipsis or e == M.newaxis then return 0 end
  if getmetatable(e) == M.tensor_mt then return e.h.dtype == C.TD_BOOL and e.h.ndim or 1 end
  return 1
end

local function too_many(key, n, ndim, what)
  local consuming = 0
  for k = 1, n do consuming = consuming + dims_consumed(key[k]) end
  fail(("index: %d indices for %s"):format(consuming, (what or "a tensor of %d dims"):format(ndim)))
end

-- Fills M.entries from key for the tensor handle h; returns the entry count, and for a
-- key holding a mask or index tensor, {tensor =, mask =, dim =, in_dim =}: the entries
-- then hold whole dims in its place, dim is where those dims sit in the view they
-- select and in_dim the first dim of h they cover (0-based). At most one tensor entry
-- per key. One pass over the key: only an ellipsis looks ahead, to count the dims the
-- entries after it consume. what names h's dims in messages ("a tensor of %d dims").
function M.parse(h, key, what)
  local ndim = h.ndim
  local entries = M.entries
  if type(key) ~= "table" then
    fail(("index: cannot index a tensor with %s"):format(describe(key)))
  end
  -- t[mask], t[idx], t[T.newaxis], t[T.ellipsis]: one entry, not a table of them
  if getmetatable(key) == M.tensor_mt or key == M.newaxis or key == M.ellipsis then key = { key } end
  local n = #key
  if n > MAX_ENTRIES then fail(("index: %d entries, at most %d"):format(n, MAX_ENTRIES)) end
  local dim, out_dim, count = 0, 0, 0 -- input dim, output dim, entries written
  local adv, seen_ellipsis = nil, false
  for k = 1, n do
    local e = key[k]
    local te = type(e)
    if te == "table" and getmetatable(e) == M.tensor_mt and e.h.ndim == 0 then
      -- a 0-dim integer tensor indexes as its number, as in torch
      if e.h.dtype == C.TD_BOOL or dtypes.is_floating(e.h.dtype) then
        fail(("index: a 0-dim %s tensor cannot index; use a number or an integer tensor")
          :format(dtypes.name(e.h.dtype)))
      end
      e, te = e:item(), "number"
    end
    local entry = entries[count]
    count = count + 1
    if te == "number" then
      if dim >= ndim then too_many(key, n, ndim, what) end
      entry.kind, entry.start = SELECT, M.position(e, tonumber(h.shape[dim]), dim + 1)
      dim = dim + 1
    elseif e == M.newaxis then
      entry.kind = NEWAXIS
      out_dim = out_dim + 1
    elseif e == M.ellipsis then
      if seen_ellipsis then fail("index: at most one ellipsis per index") end
      seen_ellipsis = true
      local after = 0
      for j = k + 1, n do after = after + dims_consumed(key[j]) end
      local covered = ndim - dim - after
      if covered < 0 then too_many(key, n, ndim, what) end
      entry.kind = ELLIPSIS
      dim, out_dim = dim + covered, out_dim + covered
    elseif te == "table" and getmetatable(e) == M.tensor_mt then
      if adv then fail("index: at most one mask or index tensor per index") end
      adv = { tensor = e, mask = e.h.dtype == C.TD_BOOL, dim = out_dim, in_dim = dim }
      local covered = adv.mask and e.h.ndim or 1
      if dim + covered > ndim then too_many(key, n, ndim, what) end
      whole(entry)
      for _ = 2, covered do
        whole(entries[count])
        count = count + 1
      end
      dim, out_dim = dim + covered, out_dim + covered
    elseif te == "table" then
      if dim >= ndim then too_many(key, n, ndim, what) end
      fill_range(entry, e, dim + 1)
      dim, out_dim = dim + 1, out_dim + 1
    else
      fail(("index: entry %d is %s; expected a number, a range table, newaxis, ellipsis or a tensor")
        :format(k, describe(e)))
    end
  end
  return count, adv
end

return M
