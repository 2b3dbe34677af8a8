-- dict/apply.lua: td:apply(fn, ...others) and td:apply_(fn, ...others): a Lua function
-- over every tensor leaf. fn is Lua, so this walk is Lua too (C never calls Lua); the
-- leaves it reads come from the container's cache.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local core = require("tensordict.dict.core")
local struct = require("tensordict.dict.struct")

local TD = core.methods
local cdict, wrap, check, is_td = core.cdict, core.wrap, core.check, core.is_td
local fail, describe = util.fail, util.describe
local is_tensor = tensor.is_tensor
local KIND_TENSOR, KIND_DICT = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT

local function check_fn(call, fn)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    fail(("%s: expected a function, got %s"):format(call, describe(fn)))
  end
end

local APPLY_OPTS = { named = true, batch_size = true, filter_empty = true, default = true,
                     call_on_nested = true, out = true }
local APPLY__OPTS = { named = true, default = true }

-- Splits (...others, opts) where opts is a trailing plain table.
local function others_and_opts(call, allowed, ...)
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
  opts = util.options(call, opts, allowed)
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

-- Stands for an other TensorDict that has no entry at a key (with opts.default): the
-- leaves under it get the default.
local ABSENT = {}

-- The entries of the others at key k. One that lacks it raises, or, when opts has a
-- default, gives the default (ABSENT for a nested TensorDict of self).
local function aligned(call, others, n, k, path, opts, nested)
  local vals = {}
  for j = 1, n do
    local v = others[j] ~= ABSENT and core.get_string(others[j], k) or nil
    if v == nil then
      if opts.default == nil then
        fail(("%s: TensorDict argument %d has no key '%s'"):format(call, j + 1, path_text(path)))
      end
      v = nested and ABSENT or opts.default
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

local function call_fn(fn, opts, path, x, vals, n)
  if opts.named then return fn(path, x, unpack(vals, 1, n)) end
  return fn(x, unpack(vals, 1, n))
end

-- Sets fn's result r for key k (nil: nothing); nested: r stands for a nested TensorDict
-- (call_on_nested), else for a tensor leaf.
local function keep_result(result, k, r, path, nested)
  if r == nil then return end
  if nested and not is_td(r) then
    fail(("apply: the function returned %s for the TensorDict '%s'; expected a TensorDict or nil")
      :format(describe(r), path_text(path)))
  elseif not nested and not is_tensor(r) then
    fail(("apply: the function returned %s for '%s'; expected a tensor or nil")
      :format(describe(r), path_text(path)))
  end
  core.set_string(result, k, r, "apply")
end

-- One level of apply; results go into out (opts.out's container at this level) when
-- given, else into a new container of the batch size asked for, or like self's.
-- Returns the result and whether self and the result are empty (no leaf at any depth),
-- found on the way: asking is_empty at every level walked a deep tree once per level.
local function apply_level(self, fn, others, n, opts, prefix, batch, out)
  local result = out or (batch and with_batch(batch)) or struct.new_like(self)
  local d = cdict(self)
  local self_empty, result_empty = true, true
  for _, k in ipairs(core.key_list(self)) do
    local i = C.td_dict_find(d, k, #k)
    local kind = C.td_dict_kind(d, i)
    local path = path_of(prefix, k)
    if kind == KIND_TENSOR or (kind == KIND_DICT and opts.call_on_nested) then
      local vals = aligned("apply", others, n, k, path, opts, false)
      local x = core.get_string(self, k)
      local r = call_fn(fn, opts, path, x, vals, n)
      keep_result(result, k, r, path, kind == KIND_DICT)
      if kind == KIND_DICT then
        self_empty = self_empty and TD.is_empty(x)
        result_empty = result_empty and (r == nil or TD.is_empty(r))
      else
        self_empty = false
        result_empty = result_empty and r == nil
      end
    elseif kind == KIND_DICT then
      local sub_others = aligned("apply", others, n, k, path, opts, true)
      local child = core.get_string(self, k)
      local sub_out = out and core.get_string(out, k)
      if sub_out ~= nil and not is_td(sub_out) then sub_out = nil end
      local sub, child_empty, sub_empty = apply_level(child, fn, sub_others, n, opts,
        prefix and path or { k }, batch, out and (sub_out or struct.new_like(child)))
      if out then sub_empty = TD.is_empty(sub) end -- out's own keys count too
      self_empty = self_empty and child_empty
      -- A nested TensorDict that lost every leaf goes too, unless filter_empty = false
      -- (one that was empty to begin with stays).
      if not (opts.filter_empty ~= false and sub_empty and not child_empty) then
        if sub ~= sub_out then core.set_string(result, k, sub, "apply") end
        result_empty = result_empty and sub_empty
      end
    else
      -- a new container: its own copy of a stacked value (a view shares it, a copy never)
      check(C.td_dict_copy_entry(cdict(result), k, #k, d, i))
      self_empty, result_empty = false, false
    end
  end
  if out then result_empty = TD.is_empty(result) end
  return result, self_empty, result_empty
end

-- A new TensorDict with fn(leaf, other_leaf...) for every tensor leaf; a nil result
-- drops the key. Options (a table last): named = true passes the key (or key path)
-- first; batch_size = {...} for results of another batch size; filter_empty = false
-- keeps nested TensorDicts that end up empty; default = v is passed for a key an
-- other TensorDict lacks (instead of raising); call_on_nested = true calls fn on
-- nested TensorDicts too (whole, not their leaves); out = td2 sets the results into
-- td2 (its other keys stay) and returns it.
function TD.apply(self, fn, ...)
  check_fn("apply", fn)
  local others, n, opts = others_and_opts("apply", APPLY_OPTS, ...)
  local batch = opts.batch_size
  if type(batch) == "number" then batch = { batch } end
  local out = opts.out
  if out ~= nil and not is_td(out) then
    fail(("apply: out must be a TensorDict, got %s"):format(describe(out)))
  end
  if out and out._td_head.locked ~= 0 then
    fail("apply: out is locked (the results are set into it): unlock() it first")
  end
  if out then
    local want, have = batch or TD.batch_size(self), TD.batch_size(out)
    if table.concat(want, ",") ~= table.concat(have, ",") then
      fail(("apply: out has batch size [%s]; the results have [%s]")
        :format(table.concat(have, ", "), table.concat(want, ", ")))
    end
  end
  return (apply_level(self, fn, others, n, opts, nil, batch, out))
end

-- In place: each non-nil result is copied into its leaf (cast and broadcast). Options:
-- named, default (as apply's).
function TD.apply_(self, fn, ...)
  check_fn("apply_", fn)
  local others, n, opts = others_and_opts("apply_", APPLY__OPTS, ...)
  local function walk(td, subs, prefix)
    local d = cdict(td)
    for _, k in ipairs(core.key_list(td)) do
      local i = C.td_dict_find(d, k, #k)
      local kind = C.td_dict_kind(d, i)
      local path = path_of(prefix, k)
      if kind == KIND_DICT then
        walk(core.get_string(td, k), aligned("apply_", subs, n, k, path, opts, true), prefix and path or { k })
      elseif kind == KIND_TENSOR then
        local leaf = core.get_string(td, k)
        local r = call_fn(fn, opts, path, leaf, aligned("apply_", subs, n, k, path, opts, false), n)
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
