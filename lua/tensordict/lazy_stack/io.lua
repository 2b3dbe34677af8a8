-- lazy_stack/io.lua: lazy stacks on disk in Python tensordict 0.15's layouts, both ways
-- (core/store/memmap_wrapped.c): a memmap folder holds one TensorDict folder per
-- member, "0", "1", ..., and a meta.json with the class and the 0-based stack_dim; a
-- consolidated file's metadata root is {"cls": "LazyStackedTensorDict", ...} with the
-- members under "0", "1", .... T.load_memmap and T.from_consolidated give a lazy stack
-- for those and a TensorDict for the rest.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local core = require("tensordict.dict")
local td_memmap = require("tensordict.dict.memmap")
local ls = require("tensordict.lazy_stack.core")
local late = require("tensordict.late")

local TD, LS = core.methods, ls.methods
local stack_state, new = ls.state_of, ls.new
local wrap, check, cdict = core.wrap, core.check, core.cdict
local path_arg, save_flags, load_mode = td_memmap.path_arg, td_memmap.save_flags, td_memmap.load_mode

local M = {}

local function member_handles(s)
  local n = #s.members
  local arr = ffi.new("td_dict *[?]", n)
  for i, m in ipairs(s.members) do arr[i - 1] = cdict(m) end
  return arr, n
end

-- ls:memmap(prefix [, {existsok =, num_threads =, fsync =}]): the stack saved in Python's
-- layout, atomically as a whole; a lazy stack of the saved members (locked, as Python's).
function LS.memmap(self, prefix, opts)
  local s = stack_state(self)
  local flags, threads = save_flags("memmap", opts)
  local arr, n = member_handles(s)
  local out = ffi.new("td_dict *[?]", n)
  check(C.td_dict_memmap_stack(arr, n, s.dim, path_arg("memmap", prefix), flags, threads, out))
  local members = {}
  for i = 1, n do members[i] = td_memmap.keep_names(s.members[i], wrap(out[i - 1])) end
  return new(members, s.dim, prefix)
end

-- ls:memmap_(prefix [, opts]): the same, and ls takes the saved members; returns ls.
function LS.memmap_(self, prefix, opts)
  local saved = stack_state(LS.memmap(self, prefix, opts))
  local s = stack_state(self)
  s.members, s.prefix = saved.members, saved.prefix
  return self
end

function LS.is_memmap(self) return stack_state(self).prefix ~= nil end
function LS.memmap_prefix(self) return stack_state(self).prefix end

-- ls:consolidate([filename [, {existsok =, fsync =}]]): one file in tensordict's
-- consolidated layout; returns ls. Without a filename, a lazy stack of contiguous copies.
function LS.consolidate(self, filename, opts)
  local s = stack_state(self)
  if filename == nil then
    local out = {}
    for i, m in ipairs(s.members) do out[i] = TD.contiguous(m) end
    return new(out, s.dim)
  end
  local flags = save_flags("consolidate", opts)
  local arr, n = member_handles(s)
  check(C.td_dict_consolidate_stack(arr, n, s.dim, path_arg("consolidate", filename, "the filename"), flags))
  return self
end

-- A loaded holder (members under "0", "1", ...) as a lazy stack.
local function from_holder(holder, dim, prefix)
  local members = {}
  for i = 1, holder._td_head.nkeys do members[i] = TD.get(holder, tostring(i - 1)) end
  return new(members, dim, prefix)
end

local stack_dim = ffi.new("int32_t[1]")

-- T.load_memmap(prefix [, {mode =, device =}]): a TensorDict, or a lazy stack for a
-- LazyStackedTensorDict's folder.
-- With a CUDA device, the leaves (of every member) are then copied to it.
function M.load_memmap(prefix, opts)
  local mode, device = load_mode("load_memmap", opts, true)
  local d = wrap(C.td_dict_load_memmap_any(path_arg("load_memmap", prefix), mode, stack_dim))
  local dim = stack_dim[0]
  if device ~= nil and device ~= "cpu" then d = late.td_device.to(d, device, false, "load_memmap") end
  if dim < 0 then return d end
  return from_holder(d, dim, prefix)
end

-- T.from_consolidated(filename [, {mode =}]): likewise for a consolidated file.
function M.from_consolidated(filename, opts)
  local mode = load_mode("from_consolidated", opts)
  local d = wrap(C.td_dict_from_consolidated_any(path_arg("from_consolidated", filename, "the filename"),
    mode, stack_dim))
  if stack_dim[0] < 0 then return d end
  return from_holder(d, stack_dim[0])
end

return M
