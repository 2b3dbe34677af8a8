-- dict/append.lua: memmap folders that grow (core/store/append.c) for Lua: an append
-- writes batches of rows into a temporary sibling of its path and commits the folder
-- atomically (until then, and after an abort or a crash, the path keeps what it held);
-- a ring is a preallocated folder of a batch's structure with another row count.
-- flow/memmap.lua's MemmapSink and flow/replay_buffer.lua's ReplayBuffer are built on these. Failures come back
-- as (nil, message), the library's message without the C call's own prefix ("append: ",
-- "commit: "), for a node to raise in its own name.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local fs = require("tensordict.fs")
local core = require("tensordict.dict.core")
local td_memmap = require("tensordict.dict.memmap")
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
-- aborted first (the GC keeps a checkpoint, as suspend does); or nil and the message.
function M.open(path, opts)
  local a = C.td_memmap_append_open(path, save_flags(opts))
  if a == nil then return nil, c_message() end
  return (setmetatable({ a = ffi.gc(a, C.td_memmap_append_free) }, Append))
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
  C.td_memmap_append_free(ffi.gc(a, nil)) -- after a commit, or an abort, or a suspend
end

-- Commits the folder; the append is done afterwards either way. true, or nil and the
-- message.
function Append:commit()
  local msg = C.td_memmap_append_commit(self.a, 0) < 0 and c_message()
  release(self)
  if msg then return nil, msg end
  return true
end

-- Removes the temporary folder (a checkpoint too): the path keeps what it held.
-- Idempotent.
function Append:abort()
  if self.a ~= nil then
    C.td_memmap_append_abort(self.a)
    release(self)
  end
end

---------------------------------------------------------------- checkpoints (resume)

-- The append continued from path's checkpoint (opts: existsok, fsync), at the rows it
-- recorded; or nil and the message ("... has no checkpoint to resume").
function M.resume(path, opts)
  local a = C.td_memmap_append_resume(path, save_flags(opts))
  if a == nil then return nil, c_message() end
  return (setmetatable({ a = ffi.gc(a, C.td_memmap_append_free) }, Append))
end

-- The rows of path's checkpoint, or nil when it has none.
function M.checkpoint_rows(path)
  local n = tonumber(C.td_memmap_append_checkpoint_rows(path))
  if n < 0 then return nil end
  return n
end

-- A fresh, empty folder whose content the next checkpoint records; or nil and the message.
function Append:stage()
  local p = C.td_memmap_append_stage(self.a)
  if p == nil then return nil, c_message() end
  return (ffi.string(p))
end

-- Records a checkpoint (the rows so far and the staged folder); the append goes on.
-- true, or nil and the message (the previous checkpoint stays).
function Append:checkpoint()
  if C.td_memmap_append_checkpoint(self.a) < 0 then return nil, c_message() end
  return true
end

-- The last checkpoint's folder (what was staged for it; after resume, what the resumed
-- run recorded), or nil before the first.
function Append:checkpoint_path()
  local p = self.a ~= nil and C.td_memmap_append_checkpoint_borrow(self.a)
  return p ~= nil and p and ffi.string(p) or nil
end

-- The temporary folder the rows go into (files added there are committed with them).
function Append:path()
  local p = self.a ~= nil and C.td_memmap_append_path_borrow(self.a)
  return p ~= nil and p and ffi.string(p) or nil
end

-- Closes the append, keeping its last checkpoint for resume (without one: aborts).
function Append:suspend()
  if self.a ~= nil then
    C.td_memmap_append_suspend(self.a)
    release(self)
  end
end

----------------------------------------------------- data-parallel (append_ranks.c)

-- Makes this append the one that the ranks of a data-parallel run write together: its
-- own rows go from row_offset on, other ranks join its folder (M.join). Before the
-- first batch. true, or nil and the message.
function Append:share(row_offset)
  if C.td_memmap_append_share(self.a, row_offset) < 0 then return nil, c_message() end
  return true
end

-- An append into folder, the temporary folder of another process's shared append of
-- path (its Append:path()), writing its rows from row_offset on (opts: fsync). Its
-- commit syncs its own writes; its abort leaves the folder. Or nil and the message.
function M.join(folder, path, row_offset, opts)
  local a = C.td_memmap_append_join(folder, path, row_offset, opts.fsync == false and C.TD_MEMMAP_NO_FSYNC or 0)
  if a == nil then return nil, c_message() end
  return (setmetatable({ a = ffi.gc(a, C.td_memmap_append_free) }, Append))
end

-- Copies rows rows of src (from its file row src_row) into this append's files at row
-- dst_row, in the kernel where it can. true, or nil and the message.
function Append:copy_rows(dst_row, src, src_row, rows)
  if C.td_memmap_append_copy_rows(self.a, dst_row, src.a, src_row, rows) < 0 then return nil, c_message() end
  return true
end

-- The batch that fixed this append's structure (its first, or a resumed checkpoint's
-- structure, 0 rows), read-only; nil before any.
function Append:structure()
  local d = C.td_memmap_append_structure(self.a)
  if d == nil then return nil end
  return wrap(d)
end

-- The shared append's total before its commit: rows over every rank, and a batch of
-- their structure (any rows, 0 will do; nil when no rank had one). true, or nil and
-- the message.
function Append:set_total(structure, rows)
  if C.td_memmap_append_set_total(self.a, structure and cdict(structure) or nil, rows) < 0 then
    return nil, c_message()
  end
  return true
end

-- A ring: td's structure with rows rows, zero-filled, saved at path (opts: existsok,
-- fsync) and mapped read-write; or nil and the message.
function M.rows_like(td, rows, path, opts)
  local d = C.td_dict_memmap_rows_like(cdict(td), rows, path, save_flags(opts), 0)
  if d == nil then return nil, c_message() end
  return wrap(d)
end

-- A ring's counters live beside its rows in RING_FILE: four little-endian int64,
-- {format (1), capacity, filled, cursor (0-based: the next row written)}, mapped
-- read-write, so every extend leaves them in the file (a killed process loses nothing
-- the page cache holds; sync_counters makes them durable). Python tensordict loads the
-- folder without them: it reads only what meta.json names, and "%r" begins no key's
-- file name.
M.RING_FILE = "%ring"
local RING_FORMAT = 1

-- The counters of a new ring at dir (empty: filled 0, cursor 0), written atomically
-- and mapped; or nil and the message.
function M.new_ring_counters(dir, capacity, opts)
  local bytes = ffi.string(ffi.new("int64_t[4]", RING_FORMAT, capacity, 0, 0), 32)
  local ok, err = fs.write_atomic(dir .. "/" .. M.RING_FILE, bytes, opts.fsync)
  if not ok then return nil, err end
  return create.from_file(dir .. "/" .. M.RING_FILE, { 4 }, "int64", "r+")
end

-- The ring at dir mapped read-write and its counters; nil and the message when dir
-- holds no ring (no counters, or counters that do not fit its rows).
function M.open_ring(dir)
  local file = dir .. "/" .. M.RING_FILE
  if not fs.exists(file) then
    return nil, ("'%s' exists and is not a replay buffer's ring (it has no %s file)"):format(dir, M.RING_FILE)
  end
  local ok, counters = pcall(create.from_file, file, { 4 }, "int64", "r+")
  if not ok then return nil, ("'%s': %s"):format(file, (tostring(counters):gsub("^.-tensordict: ", ""))) end
  local format, cap, filled, cursor = counters[1], counters[2], counters[3], counters[4]
  if format ~= RING_FORMAT or cap < 1 or filled < 0 or filled > cap or cursor < 0 or cursor >= cap then
    return nil, ("'%s' holds no ring counters this library knows (format %d, capacity %d, filled %d, cursor %d)")
      :format(file, format, cap, filled, cursor)
  end
  local lok, ring = pcall(td_memmap.load_memmap, dir, { mode = "r+" })
  if not lok then return nil, (tostring(ring):gsub("^.-tensordict: ", "")) end
  if ring:batch_dims() == 0 or #ring ~= cap then
    return nil, ("'%s' has %s rows but its counters say %d"):format(dir,
      ring:batch_dims() == 0 and "no" or tostring(#ring), cap)
  end
  return ring, counters
end

-- The counters' bytes durable (msync).
function M.sync_counters(counters)
  if C.td_storage_sync(header(counters).storage) < 0 then return nil, c_message() end
  return true
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
  return M.gather_rows(ring, idx)
end

-- The rows of ring at idx (int64, 0-based positions the caller made in range), as a new
-- unlocked TensorDict (one C gather per leaf).
function M.gather_rows(ring, idx)
  local out = wrap(C.td_dict_index(cdict(ring), nil, 0, header(idx), 0))
  C.td_dict_set_locked(cdict(out), 0) -- a ring is locked (a memmap); a sample is the caller's
  return out
end

-- The index tensor sample_rows takes, for n rows.
function M.sample_index(n) return create.empty({ n }, "int64") end

return M
