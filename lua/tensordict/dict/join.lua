-- dict/join.lua: stack, cat, split, chunk, unbind, pad and pad_sequence for TensorDicts.
-- Each join is one call into core/dict/dict_join.c; dims are batch dims, 1-based.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local create = require("tensordict.tensor.create")
local core = require("tensordict.dict.core")
local tensor = require("tensordict.tensor")
local join = require("tensordict.tensor.join")
local split_rule = require("tensordict.tensor.split_rule")
local dtypes = require("tensordict.tensor.dtype")

local TD = core.methods
local cdict, wrap, check, is_td = core.cdict, core.wrap, core.check, core.is_td
local fail, describe = util.fail, util.describe

local M = {}

-- The C handles of a Lua array of TensorDicts.
local function handles(call, list)
  if type(list) ~= "table" or #list == 0 then
    fail(("%s: expected a non-empty table of TensorDicts, got %s"):format(call, describe(list)))
  end
  local arr = ffi.new("td_dict *[?]", #list)
  for i, td in ipairs(list) do
    if not is_td(td) then
      fail(("%s: element %d is %s, not a TensorDict"):format(call, i, describe(td)))
    end
    arr[i - 1] = cdict(td)
  end
  return arr, #list
end

-- The first input's names, with an unnamed dim inserted at 0-based d when given.
local function names_of_first(list, inserted_at)
  local names = core.dim_names(list[1])
  if names and inserted_at then table.insert(names, inserted_at + 1, false) end
  return names
end

-- The kind order of torch's casting rule for out= (a float cannot go into an integer
-- leaf, nor a number into a bool one).
local function kind_rank(code)
  if dtypes.is_floating(code) then return 3 end
  if dtypes.name(code) == "bool" then return 1 end
  return 2
end

-- Writes the joined result r into out (opts.out of T.stack / T.cat): out's batch size
-- must be r's, and out must hold every leaf of r, of a dtype r's values may be cast to
-- as torch's out= allows; its other keys stay. Leaves are written in place, so a locked
-- out takes them (as Python's). Returns out.
local function into_out(call, r, out)
  if not is_td(out) then fail(("%s: out must be a TensorDict, got %s"):format(call, describe(out))) end
  cdict(out)
  local want, have = r:batch_size(), out:batch_size()
  if table.concat(want, ",") ~= table.concat(have, ",") then
    fail(("%s: out has batch size %s; the %s batch size is %s"):format(call, util.format_list(have),
      call == "stack" and "stacked" or "joined", util.format_list(want)))
  end
  for _, key in ipairs(TD.keys(r, { include_nested = true, leaves_only = true })) do
    local src, dst = TD.get(r, key), TD.get(out, key)
    if dst == nil then
      fail(("%s: out has no key %s (it must hold every leaf of the result)"):format(call, core.key_text(key)))
    end
    if tensor.is_tensor(src) and tensor.is_tensor(dst) then
      local from, to = tensor.handle(src).dtype, tensor.handle(dst).dtype
      if kind_rank(from) > kind_rank(to) then
        fail(("%s: the result's %s leaf %s cannot be cast to out's %s leaf"):format(call, dtypes.name(from),
          core.key_text(key), dtypes.name(to)))
      end
    end
  end
  check(C.td_dict_update_(cdict(out), cdict(r)))
  return out
end

local JOIN_OPTS = { out = "any" }

-- T.stack(tds [, dim [, {out =}]]): a new batch dim at dim; with out, written into out.
function M.stack(list, dim, opts)
  opts = util.options("stack", opts, JOIN_OPTS)
  local arr, n = handles("stack", list)
  local d = core.batch_dim("stack", list[1], dim or 1, 1)
  local r = wrap(C.td_dict_stack(arr, n, d))
  local names = names_of_first(list, d)
  if names then core.set_names(r, names, "stack") end
  if opts.out ~= nil then return into_out("stack", r, opts.out) end
  return r
end

-- T.cat(tds [, dim [, {out =}]]): joined along batch dim dim; with out, written into out.
function M.cat(list, dim, opts)
  opts = util.options("cat", opts, JOIN_OPTS)
  local arr, n = handles("cat", list)
  if list[1]._td_head.ndim == 0 then fail("cat: TensorDicts with batch size [] have no dim to join") end
  local d = core.batch_dim("cat", list[1], dim or 1)
  local r = wrap(C.td_dict_cat(arr, n, d))
  local names = names_of_first(list)
  if names then core.set_names(r, names, "cat") end
  if opts.out ~= nil then return into_out("cat", r, opts.out) end
  return r
end

-- Pieces of the given sizes along dim 0-based d: a Lua array of views.
local function split_sizes(self, d, sizes)
  local n = #sizes
  local buf = ffi.new("int64_t[?]", math.max(n, 1))
  for i, s in ipairs(sizes) do buf[i - 1] = s end
  local out = ffi.new("td_dict *[?]", math.max(n, 1))
  check(C.td_dict_split(cdict(self), d, n, buf, out))
  local names = core.dim_names(self)
  local pieces = {}
  for i = 1, n do
    pieces[i] = wrap(out[i - 1])
    if names then core.set_names(pieces[i], names, "split") end
  end
  return pieces
end

-- The name of batch dim 0-based d, for split's messages: "dim 1 of batch size [5]".
local function dim_of_batch(self, d)
  return ("dim %d of batch size %s"):format(d + 1, util.format_list(self:batch_size()))
end

-- td:split(size, dim) (pieces of size, the last smaller) or td:split({sizes}, dim):
-- the rule of t:split (tensor/split_rule.lua).
function TD.split(self, size, dim)
  cdict(self)
  if self._td_head.ndim == 0 then fail("split: the TensorDict has no batch dims (batch size [])") end
  local d = core.batch_dim("split", self, dim or 1)
  return split_sizes(self, d, split_rule.split(size, tonumber(self._td_head.shape[d]), dim_of_batch, self, d))
end

-- td:chunk(n, dim): at most n pieces of ceil(size / n), as t:chunk.
function TD.chunk(self, n, dim)
  cdict(self)
  if self._td_head.ndim == 0 then fail("chunk: the TensorDict has no batch dims (batch size [])") end
  local d = core.batch_dim("chunk", self, dim or 1)
  return split_sizes(self, d, split_rule.chunk(n, tonumber(self._td_head.shape[d])))
end

-- The slices along dim with that dim removed (views).
function TD.unbind(self, dim)
  cdict(self)
  if self._td_head.ndim == 0 then fail("unbind: the TensorDict has no batch dims (batch size [])") end
  local d = core.batch_dim("unbind", self, dim or 1)
  local out = {}
  local key = {}
  for i = 1, d do key[i] = {} end
  for i = 1, tonumber(self._td_head.shape[d]) do
    key[d + 1] = i
    out[i] = self[key]
  end
  return out
end

-- T.pad(td, pads, value): pads = {before_1, after_1, before_2, ...} for batch dims from
-- the first (tensordict.pad's order; negative amounts crop).
function M.pad(td, pads, value)
  cdict(td)
  local buf, n, v = join.pad_args(pads, value)
  local r = wrap(C.td_dict_pad(cdict(td), buf, n, v))
  local names = core.dim_names(td)
  if names then core.set_names(r, names, "pad") end
  return r
end

-- T.pad_sequence(tds, {padding_value =, return_mask =}): pads every TensorDict along
-- its first batch dim to the longest, then stacks them (batch [n, longest, ...]). With
-- return_mask, key "masks" holds a bool [n, longest] mask per leaf key (true: data).
function M.pad_sequence(list, opts)
  opts = util.options("pad_sequence", opts, { padding_value = "number", return_mask = "boolean|string" })
  handles("pad_sequence", list)
  local longest = 0
  for i, td in ipairs(list) do
    if td._td_head.ndim == 0 then
      fail(("pad_sequence: TensorDict %d has batch size []; each needs a first dim to pad"):format(i))
    end
    longest = math.max(longest, tonumber(td._td_head.shape[0]))
  end
  local padded = {}
  for i, td in ipairs(list) do
    padded[i] = M.pad(td, { 0, longest - tonumber(td._td_head.shape[0]) }, opts.padding_value or 0)
  end
  local out = M.stack(padded, 1)
  if opts.return_mask then
    local mask = create.zeros({ #list, longest }, "bool")
    for i, td in ipairs(list) do
      local len = tonumber(td._td_head.shape[0])
      if len > 0 then mask[{ i, { 1, len } }] = true end
    end
    local mask_key = type(opts.return_mask) == "string" and opts.return_mask or "masks"
    local masks = core.construct(nil, { #list, longest })
    for _, key in ipairs(TD.keys(list[1], { include_nested = true, leaves_only = true })) do
      if tensor.is_tensor(TD.get(list[1], key)) then
        TD.set(masks, key, mask:clone())
      end
    end
    TD.set(out, mask_key, masks)
  end
  return out
end

return M
