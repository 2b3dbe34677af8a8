-- td_apply.lua: td:apply(fn, ...others) and td:apply_(fn, ...others): a Lua function
-- over every tensor leaf. fn is Lua, so this walk is Lua too (C never calls Lua); the
-- leaves it reads come from the container's cache.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local core = require("tensordict.td_core")
local struct = require("tensordict.td_struct")

local TD = core.methods
local D, wrap, check, is_td = core.D, core.wrap, core.check, core.is_td
local fail, describe = util.fail, util.describe
local is_tensor = tensor.is_tensor
local KIND_TENSOR, KIND_DICT = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT

local function check_fn(call, fn)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    fail(("%s: expected a function, got %s"):format(call, describe(fn)))
  end
end

-- Splits (...others, opts) where opts is a trailing plain table.
local function others_and_opts(call, ...)
  local others = { ... }
  local n = select("#", ...)
  local opts = {}
  if n > 0 and type(others[n]) == "table" and not is_td(others[n]) then
    opts = others[n]
    others[n] = nil
    n = n - 1
  end
  for i = 1, n do
    if not is_td(others[i]) then
      fail(("%s: argument %d must be a TensorDict (or a table of options last), got %s")
        :format(call, i + 1, describe(others[i])))
    end
  end
  return others, n, opts
end

local function path_of(prefix, k)
  if not prefix then return k end
  local p = { unpack(prefix) }
  p[#p + 1] = k
  return p
end

local function path_text(path)
  return type(path) == "table" and table.concat(path, ".") or path
end

-- The entries of the others at key k (each must have it).
local function aligned(call, others, n, k, path)
  local vals = {}
  for j = 1, n do
    local v = core.get_string(others[j], k)
    if v == nil then
      fail(("%s: TensorDict argument %d has no key '%s'"):format(call, j + 1, path_text(path)))
    end
    vals[j] = v
  end
  return vals
end

-- An empty TensorDict with the batch size given as a Lua list.
local function with_batch(batch)
  local n = util.read_shape("apply", false, batch)
  return wrap(C.td_dict_new(n, util.shape_buf))
end

local function apply_level(self, fn, others, n, opts, prefix, batch)
  local result = batch and with_batch(batch) or struct.new_like(self)
  local d = D(self)
  for _, k in ipairs(core.key_list(self)) do
    local i = C.td_dict_find(d, k, #k)
    local kind = C.td_dict_kind(d, i)
    local path = path_of(prefix, k)
    if kind == KIND_DICT then
      local sub_others = aligned("apply", others, n, k, path)
      local sub = apply_level(core.get_string(self, k), fn, sub_others, n, opts,
        prefix and path or { k }, batch)
      -- A nested TensorDict that lost every leaf goes too, unless filter_empty = false
      -- (one that was empty to begin with stays).
      if not (opts.filter_empty ~= false and TD.is_empty(sub) and not TD.is_empty(core.get_string(self, k))) then
        core.set_string(result, k, sub, "apply")
      end
    elseif kind == KIND_TENSOR then
      local vals = aligned("apply", others, n, k, path)
      local r
      if opts.named then
        r = fn(path, core.get_string(self, k), unpack(vals, 1, n))
      else
        r = fn(core.get_string(self, k), unpack(vals, 1, n))
      end
      if r ~= nil then
        if not is_tensor(r) then
          fail(("apply: the function returned %s for '%s'; expected a tensor or nil")
            :format(describe(r), path_text(path)))
        end
        core.set_string(result, k, r, "apply")
      end
    else
      check(C.td_dict_set_entry(D(result), k, #k, d, i))
    end
  end
  return result
end

-- A new TensorDict with fn(leaf, other_leaf...) for every tensor leaf; a nil result
-- drops the key. Options (a table last): named = true passes the key (or key path)
-- first; batch_size = {...} for results of another batch size; filter_empty = false
-- keeps nested TensorDicts that end up empty.
function TD.apply(self, fn, ...)
  check_fn("apply", fn)
  local others, n, opts = others_and_opts("apply", ...)
  local batch = opts.batch_size
  if type(batch) == "number" then batch = { batch } end
  return apply_level(self, fn, others, n, opts, nil, batch)
end

-- In place: each non-nil result is copied into its leaf (cast and broadcast).
function TD.apply_(self, fn, ...)
  check_fn("apply_", fn)
  local others, n, opts = others_and_opts("apply_", ...)
  local function walk(td, subs, prefix)
    local d = D(td)
    for _, k in ipairs(core.key_list(td)) do
      local i = C.td_dict_find(d, k, #k)
      local kind = C.td_dict_kind(d, i)
      local path = path_of(prefix, k)
      if kind == KIND_DICT then
        walk(core.get_string(td, k), aligned("apply_", subs, n, k, path), prefix and path or { k })
      elseif kind == KIND_TENSOR then
        local leaf = core.get_string(td, k)
        local vals = aligned("apply_", subs, n, k, path)
        local r
        if opts.named then r = fn(path, leaf, unpack(vals, 1, n)) else r = fn(leaf, unpack(vals, 1, n)) end
        if r ~= nil and r ~= leaf then
          if not is_tensor(r) then
            fail(("apply_: the function returned %s for '%s'; expected a tensor or nil")
              :format(describe(r), path_text(path)))
          end
          leaf:copy_(r)
        end
      end
    end
  end
  walk(self, others, nil)
  return self
end

return {}
