-- tensor/einsum.lua: T.einsum(equation, ...), torch's Einstein summation: letters label
-- dims, "..." the broadcast dims, "->" the output (without it: the letters used once,
-- sorted, after the broadcast dims). A letter repeated in one operand takes its
-- diagonal; a letter no later operand and not the output uses is summed out at once;
-- operands are then contracted pairwise, left to right, each pair as one batched matrix
-- product (OpenBLAS through bmm) for floating dtypes, a broadcast product and sum for
-- the others.
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local dtypes = require("tensordict.tensor.dtype")

local C = lib.C
local fail, describe = util.fail, util.describe
local is_tensor, header = tensor.is_tensor, tensor.handle

local M = {}

local ELLIPSIS_BASE = 0x100 -- labels of the broadcast dims: 0x100 + k (never a letter's byte)

local function efail(eq, msg, ...) fail(("einsum: %s (in '%s')"):format(msg:format(...), eq)) end

-- A term's labels: letters' bytes, with the "..." expanded to the operand's extra dims
-- (nil ndim: the output, whose "..." takes every broadcast dim).
local function parse_term(eq, term, ndim, nell_all)
  local labels, seen_ellipsis = {}, false
  local i = 1
  while i <= #term do
    local c = term:sub(i, i)
    if term:sub(i, i + 2) == "..." then
      if seen_ellipsis then efail(eq, "'...' appears twice in the term '%s'", term) end
      seen_ellipsis = true
      labels[#labels + 1] = "..."
      i = i + 3
    elseif c:match("%a") then
      labels[#labels + 1] = c:byte()
      i = i + 1
    else
      efail(eq, "'%s' is not a letter, '...', ',' or '->'", c)
    end
  end
  local letters = #labels - (seen_ellipsis and 1 or 0)
  local nell = ndim and ndim - letters or nell_all
  if ndim and (nell < 0 or (nell > 0 and not seen_ellipsis)) then
    efail(eq, "the term '%s' has %d labels for an operand of %d dims", term, letters, ndim)
  end
  local out = {}
  for _, l in ipairs(labels) do
    if l == "..." then
      for k = nell_all - nell + 1, nell_all do out[#out + 1] = ELLIPSIS_BASE + k end
    else
      out[#out + 1] = l
    end
  end
  return out, seen_ellipsis, nell
end

local function index_of(list, x)
  for i, v in ipairs(list) do if v == x then return i end end
end

-- Sums out the dims of t whose labels are not in keep; returns t and its labels.
local function sum_out(t, labels, keep)
  local dims, left = {}, {}
  for i, l in ipairs(labels) do
    if keep[l] then left[#left + 1] = l else dims[#dims + 1] = i end
  end
  if #dims == 0 then return t, labels end
  return t:sum(dims), left
end

-- The diagonal of every label repeated in one operand, moved last.
local function take_diagonals(t, labels)
  local i = 1
  while i <= #labels do
    local j = index_of({ unpack(labels, i + 1) }, labels[i])
    if j then
      local l = labels[i]
      t = t:diagonal(0, i, i + j)
      table.remove(labels, i + j)
      table.remove(labels, i)
      labels[#labels + 1] = l
    else
      i = i + 1
    end
  end
  return t, labels
end

-- t's dims in the order of the labels wanted (each present), as a view.
local function arrange(t, labels, wanted)
  local perm = {}
  for i, l in ipairs(wanted) do perm[i] = index_of(labels, l) end
  if #perm == 0 then return t end
  return t:permute(perm)
end

local function concat(...)
  local out = {}
  for _, list in ipairs({ ... }) do
    for _, x in ipairs(list) do out[#out + 1] = x end
  end
  return out
end

-- The sizes of a list of labels, and their product.
local function sizes_of(list, size)
  local s, n = {}, 1
  for i, l in ipairs(list) do
    s[i] = size[l]
    n = n * size[l]
  end
  return s, n
end

-- t expanded to shape (its size-1 dims broadcast); a 0-dim t as it is.
local function expand_to(t, shape)
  if #shape == 0 then return t end
  return t:expand(shape)
end

-- t viewed with a dim for every label of all (in that order; 1 where t has none).
local function spread(t, labels, all)
  local present = {}
  for _, l in ipairs(all) do
    if index_of(labels, l) then present[#present + 1] = l end
  end
  local v = arrange(t, labels, present)
  local view, k = {}, 0
  for i, l in ipairs(all) do
    if index_of(labels, l) then
      k = k + 1
      view[i] = v:size(k)
    else
      view[i] = 1
    end
  end
  return #view > 0 and v:reshape(view) or v
end

-- Whether bmm (OpenBLAS) takes this dtype.
local function blas_dtype(code)
  return code == dtypes.code("float32", "einsum") or code == dtypes.code("float64", "einsum")
end

-- Contracts a (labels la) with b (lb), keeping the labels in keep: the labels of both
-- kept are batch dims, those of both not kept are summed over.
local function contract(a, la, b, lb, keep, size)
  local batch, contracted, a_only, b_only = {}, {}, {}, {}
  for _, l in ipairs(la) do
    if index_of(lb, l) then
      if keep[l] then batch[#batch + 1] = l else contracted[#contracted + 1] = l end
    else
      a_only[#a_only + 1] = l
    end
  end
  for _, l in ipairs(lb) do
    if not index_of(la, l) then b_only[#b_only + 1] = l end
  end
  local out_labels = concat(batch, a_only, b_only)
  local shape = sizes_of(out_labels, size)
  local common = C.td_result_type(header(a), header(b))
  if common ~= header(a).dtype then a = a:to(dtypes.name(common)) end
  if common ~= header(b).dtype then b = b:to(dtypes.name(common)) end
  if blas_dtype(common) then
    local sb, nb = sizes_of(batch, size)
    local sa, na = sizes_of(a_only, size)
    local sk, nk = sizes_of(contracted, size)
    local so, no = sizes_of(b_only, size)
    local am = expand_to(arrange(a, la, concat(batch, a_only, contracted)), concat(sb, sa, sk))
    local bm = expand_to(arrange(b, lb, concat(batch, contracted, b_only)), concat(sb, sk, so))
    return am:reshape(nb, na, nk):bmm(bm:reshape(nb, nk, no)):reshape(shape), out_labels
  end
  -- other dtypes: a broadcast product over every label, then the sum over the contracted
  local all = concat(out_labels, contracted)
  local r = spread(a, la, all) * spread(b, lb, all)
  if #contracted > 0 then
    local dims = {}
    for i = #out_labels + 1, #all do dims[#dims + 1] = i end
    r = r:sum(dims)
  end
  return expand_to(r, shape), out_labels
end

-- T.einsum(equation, a, b, ...) or T.einsum(equation, {a, b, ...}).
function M.einsum(eq, ...)
  if type(eq) ~= "string" then fail(("einsum: the equation must be a string, got %s"):format(describe(eq))) end
  local ops = { ... }
  if #ops == 1 and type(ops[1]) == "table" and not is_tensor(ops[1]) then ops = ops[1] end
  if #ops == 0 then fail("einsum: expected at least one operand") end
  for i, t in ipairs(ops) do
    if not is_tensor(t) then fail(("einsum: operand %d is %s, not a tensor"):format(i, describe(t))) end
  end
  local spec = eq:gsub("%s", "")
  local lhs, rhs = spec:match("^(.-)%->(.*)$")
  if not lhs then lhs = spec end
  local terms = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
  if #terms ~= #ops then efail(eq, "%d terms for %d operands", #terms, #ops) end
  -- the broadcast dims: as many as the operand with most
  local nell_all = 0
  for i, term in ipairs(terms) do
    if term:find("...", 1, true) then
      local letters = select(2, term:gsub("%a", ""))
      nell_all = math.max(nell_all, ops[i]:dim() - letters)
    end
  end
  local labels, size, count = {}, {}, {}
  for i, term in ipairs(terms) do
    labels[i] = parse_term(eq, term, ops[i]:dim(), nell_all)
    for k, l in ipairs(labels[i]) do
      local n = ops[i]:size(k)
      if size[l] == nil or size[l] == 1 then
        size[l] = n
      elseif n ~= size[l] and n ~= 1 then
        local name = l >= ELLIPSIS_BASE and "a '...' dim" or ("'%s'"):format(string.char(l))
        efail(eq, "%s has size %d in operand %d but %d before", name, n, i, size[l])
      end
      count[l] = (count[l] or 0) + 1
    end
  end
  local out
  if rhs then
    out = parse_term(eq, rhs, nil, nell_all)
    for _, l in ipairs(out) do
      if size[l] == nil then efail(eq, "the output label '%s' is in no operand", string.char(l)) end
    end
    local seen = {}
    for _, l in ipairs(out) do
      if seen[l] then efail(eq, "the output label '%s' appears twice", string.char(l)) end
      seen[l] = true
    end
  else
    out = {}
    for k = 1, nell_all do out[#out + 1] = ELLIPSIS_BASE + k end
    local once = {}
    for l, c in pairs(count) do
      if l < ELLIPSIS_BASE and c == 1 then once[#once + 1] = l end
    end
    table.sort(once)
    for _, l in ipairs(once) do out[#out + 1] = l end
  end
  -- the labels still needed after operand i: the output's and those of operands > i
  local function needed_after(i)
    local keep = {}
    for _, l in ipairs(out) do keep[l] = true end
    for j = i + 1, #ops do
      for _, l in ipairs(labels[j]) do keep[l] = true end
    end
    return keep
  end
  local acc, acc_labels
  for i, t in ipairs(ops) do
    local lt = { unpack(labels[i]) }
    t, lt = take_diagonals(t, lt)
    local keep = needed_after(i)
    if acc then for _, l in ipairs(acc_labels) do keep[l] = keep[l] or index_of(lt, l) ~= nil end end
    t, lt = sum_out(t, lt, keep)
    if acc == nil then
      acc, acc_labels = t, lt
    else
      acc, acc_labels = contract(acc, acc_labels, t, lt, needed_after(i), size)
    end
  end
  acc, acc_labels = sum_out(acc, acc_labels, needed_after(#ops))
  local shape = {}
  for i, l in ipairs(out) do shape[i] = size[l] end
  local r = arrange(acc, acc_labels, out)
  if #shape > 0 then r = r:expand(shape) end
  return (r:contiguous())
end

return M
