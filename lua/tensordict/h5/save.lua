-- h5/save.lua: td:to_h5(path [, opts]) in Python tensordict's HDF5 layout (a group per
-- nested container, a dataset per leaf, a non-tensor string as a scalar UTF-8 string
-- dataset marked "__tensordict_str__"), written to a temporary sibling, fsynced and
-- renamed into place: a failure leaves what was at path.
local ffi = require("ffi")
local T = require("tensordict")
local TC = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local dtype = require("tensordict.tensor.dtype")
local file = require("tensordict.h5.file")
local h5lib = require("tensordict.h5.lib")

local fail, describe = util.fail, util.describe
local M = {}

local shape_buf = ffi.new("int64_t[?]", 32)
local chunk_buf = ffi.new("int64_t[?]", 32)

local function join(group, name) return group == "/" and "/" .. name or group .. "/" .. name end

-- Checks a key HDF5 can name: no "/" (a path separator) and not "." (the group itself).
local function check_key(key, group, call)
  if type(key) ~= "string" or key == "" or key == "." or key:find("/", 1, true) or key:find("\0", 1, true) then
    fail(("%s: key %s under %s cannot name an HDF5 link ('/', '.', NUL and \"\" cannot)")
      :format(call, describe(key), group))
  end
end

-- Writes one tensor at path with the save's options (gzip level, rows per chunk).
function M.write_tensor(f, path, t, opts, call, extendible)
  if t:device() ~= nil and t:device() ~= "cpu" then t = t:cpu() end
  t = t:contiguous()
  local shape = t:shape()
  for i, s in ipairs(shape) do shape_buf[i - 1] = s end
  local chunk = nil
  if #shape > 0 and (opts.chunks or extendible) then
    local rows = opts.chunks
    if rows == true or rows == nil then
      chunk = nil -- the C side picks about 1 MiB
    else
      chunk_buf[0] = rows
      for i = 2, #shape do chunk_buf[i - 1] = math.max(shape[i], 1) end
      chunk = chunk_buf
    end
  end
  local data = TC.td_tensor_data_borrow(tensor.handle(t))
  if f.C.td_h5_write(file.id(f, call), path, dtype.code(t:dtype()), #shape, shape_buf, data, chunk,
      opts.gzip or -1, extendible and 1 or 0) < 0 then
    file.fail(call, f.C)
  end
  return t
end

-- Appends the rows of t (contiguous, rows of them) to the extendible dataset at path.
function M.append(f, path, t, rows, call)
  local d = file.dataset(f, path, call)
  if f.C.td_h5_append(d, dtype.code(t:dtype()), rows, TC.td_tensor_data_borrow(tensor.handle(t))) < 0 then
    file.fail(call .. ": " .. path, f.C)
  end
end

-- Writes the entries of td under group (recursively).
function M.write_entries(f, group, td, opts, call)
  for _, key in ipairs(td:keys()) do
    check_key(key, group, call)
    local path = join(group, key)
    local v = td:get(key)
    if T.is_tensordict(v) then
      if f.C.td_h5_create_group(file.id(f, call), path) < 0 then file.fail(call, f.C) end
      M.write_entries(f, path, v, opts, call)
    elseif T.is_tensor(v) then
      M.write_tensor(f, path, v, opts, call)
    elseif type(v) == "string" then
      if f.C.td_h5_write_string(file.id(f, call), path, v, #v) < 0 then file.fail(call, f.C) end
    else
      fail(("%s: the non-tensor value at %s is %s: HDF5 files hold non-tensor strings only (Python "
        .. "tensordict pickles the others)"):format(call, path, describe(v)))
    end
  end
end

local OPTS = { compression = "string", compression_opts = "number", chunks = true }

-- The gzip level and chunk rows of a save's options.
function M.options(call, opts)
  opts = util.options(call, opts, OPTS)
  local out = {}
  if opts.compression ~= nil then
    if opts.compression ~= "gzip" then
      fail(("%s: compression must be 'gzip' or nil, got %s"):format(call, describe(opts.compression)))
    end
    out.gzip = opts.compression_opts or 4
    if not util.is_int(out.gzip) or out.gzip < 0 or out.gzip > 9 then
      fail(("%s: compression_opts must be a gzip level 0 .. 9, got %s"):format(call, describe(opts.compression_opts)))
    end
  elseif opts.compression_opts ~= nil then
    fail(("%s: compression_opts %s without compression = 'gzip'"):format(call, describe(opts.compression_opts)))
  end
  local c = opts.chunks
  if c ~= nil and c ~= true and (not util.is_int(c) or c < 1) then
    fail(("%s: chunks must be true or a positive number of rows per chunk, got %s"):format(call, describe(c)))
  end
  out.chunks = c
  return out
end

-- A temporary sibling of path, its writer and the commit or cleanup, for the saves.
function M.begin(path, call)
  if type(path) ~= "string" or path == "" then
    fail(("%s: path must be a non-empty string, got %s"):format(call, describe(path)))
  end
  local C = h5lib.need(call)
  local tmp = ("%s.tmp-%d-%d"):format(path, os.time(), math.random(1, 2 ^ 30))
  local id = C.td_h5_create(tmp)
  if id < 0 then file.fail(call, C) end
  local f = { C = C, path = tmp, writable = true, box = ffi.new("int64_t[1]", id), dsets = {} }
  local function abort()
    if f.box[0] >= 0 then C.td_h5_close(f.box[0]); f.box[0] = -1 end
    os.remove(tmp)
  end
  local function commit()
    local fid = f.box[0]
    f.box[0] = -1
    if C.td_h5_commit(fid, tmp, path) < 0 then
      os.remove(tmp)
      file.fail(call, C)
    end
  end
  return f, commit, abort
end

-- td:to_h5(path [, {compression = "gzip" | nil, compression_opts =, chunks =}])
function M.to_h5(td, path, opts)
  if not T.is_tensordict(td) then fail(("to_h5: expected a TensorDict, got %s"):format(describe(td))) end
  local o = M.options("to_h5", opts)
  local f, commit, abort = M.begin(path, "to_h5")
  local ok, err = pcall(M.write_entries, f, "/", td, o, "to_h5")
  if not ok then
    abort()
    error(err, 0)
  end
  commit()
  return td
end

return M
