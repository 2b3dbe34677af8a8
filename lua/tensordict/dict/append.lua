-- dict/append.lua: memmap folders that grow (core/store/append.c) for Lua: an append
-- writes batches of rows into a temporary sibling of its path and commits the folder
-- atomically (until then, and after an abort or a crash, the path keeps what it held);
-- a ring is a preallocated folder of a batch's structure with another row count.
-- flow/memmap.lua's MemmapSink and ReplayBuffer are built on these. Failures come back
-- as (nil, message), the library's message without the C call's own prefix ("append: ",
-- "commit: "), for a node to raise in its own name.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local core = require("tensordict.dict.core")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")

local cdict, wrap, header = core.cdict, core.wrap, tensor.handle

local M = {}

local function c_message() return (ffi.string(C.td_last_error()):gsub("^%a[%w_]*: ", "", 1)) end

-- The C save flags of {existsok =, fsync =}.
local function save_flags(opts)
  local flags = 0
  if opts.existsok then flags = flags + C.TD_MEMMAP_EXISTSOK end
  if opts.fsync == false then flags = flags + C.TD_MEMMAP_NO_FSYNC end
  return flags
end

local Append = {}
Append.__index = Append

-- An append to path (opts: existsok, fsync), freed by the GC unless committed or
-- aborted first; or nil and the message.
function M.open(path, opts)
  local a = C.td_memmap_append_open(path, save_flags(opts))
  if a == nil then return nil, c_message() end
  return setmetatable({ a = ffi.gc(a, C.td_memmap_append_free) }, Append)
end

-- Appends td's rows (the first batch fixes the structure). true, or nil and the message.
function Append:write(td)
  if C.td_memmap_append_write(self.a, cdict(td)) < 0 then return nil, c_message() end
  return true
end

-- Rows appended so far.
function Append:rows() return self.a ~= nil and tonumber(C.td_memmap_append_rows(self.a)) or 0 end

local function release(self)
  local a = self.a
  self.a = nil
  C.td_memmap_append_free(ffi.gc(a, nil)) -- aborts unless committed
end

-- Commits the folder; the append is done afterwards either way. true, or nil and the
-- message.
function Append:commit()
  local msg = C.td_memmap_append_commit(self.a, 0) < 0 and c_message()
  release(self)
  if msg then return nil, msg end
  return true
end

-- Removes the temporary folder: the path keeps what it held. Idempotent.
function Append:abort()
  if self.a ~= nil then release(self) end
end

-- A ring: td's structure with rows rows, zero-filled, saved at path (opts: existsok,
-- fsync) and mapped read-write; or nil and the message.
function M.rows_like(td, rows, path, opts)
  local d = C.td_dict_memmap_rows_like(cdict(td), rows, path, save_flags(opts), 0)
  if d == nil then return nil, c_message() end
  return wrap(d)
end

-- true when batch can be rows of ring (keys, kinds, dtypes, dims after the first); else
-- nil and the message, naming the key, both shapes and what.
function M.check_rows_like(ring, batch, what)
  if C.td_dict_check_rows_like(cdict(ring), cdict(batch), what) < 0 then return nil, c_message() end
  return true
end

-- n rows drawn uniformly with replacement from the first filled rows of ring (gen: a
-- T.Generator, or nil for the global one), as a new unlocked TensorDict of batch {n}.
-- idx, an int64 tensor of n elements, is reused across calls: the 0-based positions
-- go straight to the C gather, without the index grammar's checks and conversion.
function M.sample_rows(ring, filled, idx, gen)
  if C.td_randint_(header(idx), 0, filled, gen and gen.g or nil) < 0 then return nil, c_message() end
  local out = wrap(C.td_dict_index(cdict(ring), nil, 0, header(idx), 0))
  C.td_dict_set_locked(cdict(out), 0) -- a ring is locked (a memmap); a sample is the caller's
  return out
end

-- The index tensor sample_rows takes, for n rows.
function M.sample_index(n) return create.empty({ n }, "int64") end

return M
