-- host/inspect.lua: `tdflow inspect PATH`: a memmap folder, a consolidated file or an
-- HDF5 file (Python-written ones too) as a tree: keys, dtypes, shapes, bytes, batch sizes, dim
-- names and non-tensor values. Nothing is read beyond the metadata.
local T = require("tensordict")
local dtypes = require("tensordict.tensor.dtype")
local fs = require("tensordict.fs")
local json = require("tensordict.json")
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local h5 = require("tensordict.h5.dict")
local flow = require("tensordict.flow")
local provenance = require("tensordict.host.provenance")
local progress = require("tensordict.host.progress")

local M = {}

local human = util.bytes_text

local function leaf_bytes(t)
  return t:numel() * dtypes.itemsize(t:dtype())
end

local function batch_text(td)
  local text = util.format_list(td:batch_size())
  local names = not h5.is_h5(td) and not T.is_lazy_stack(td) and td_core.dim_names(td)
  if names then
    local parts = {}
    for i, n in ipairs(names) do parts[i] = n or "_" end
    text = text .. " names " .. util.format_list(parts)
  end
  return text
end

local function value_text(v)
  local ok, text = pcall(json.encode, v)
  text = ok and text or tostring(v)
  if #text > 60 then text = text:sub(1, 57) .. "..." end
  return text
end

-- An HDF5 dataset's dtype and shape, read from its header, as a tensor would give them.
local function h5_leaf(h, k)
  local shape = h:shape(k)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return { dtype = function() return h:dtype(k) end, shape = function() return shape end,
           numel = function() return n end }
end

-- A lazy stack's leaf whose members differ in shape (a Python-written folder may hold
-- one), which cannot be read as one tensor: its dtype, its shape as Python prints the
-- stack's (the members' sizes, -1 where they differ, the member count at the stack
-- dim) and its members' elements, read from the members (as_list).
local function ragged_leaf(ls, k)
  local members = ls:get(k, nil, { as_list = true })
  local shape, n = members[1]:shape(), 0
  for _, m in ipairs(members) do
    local sh = m:shape()
    for d = 1, #shape do
      if sh[d] ~= shape[d] then shape[d] = -1 end
    end
    n = n + m:numel()
  end
  table.insert(shape, ls:stack_dim(), #members)
  local dtype = members[1]:dtype()
  return { dtype = function() return dtype end, shape = function() return shape end,
           numel = function() return n end }
end

-- td's value at k: a tensor, a TensorDict, a value, or what ragged_leaf describes.
local function value_at(td, k)
  local ok, v = pcall(td.get, td, k)
  if ok then return v end
  if T.is_lazy_stack(td) then
    local members = td:get(k, nil, { as_list = true })
    if T.is_tensor(members[1]) then return ragged_leaf(td, k), true end
  end
  error(v, 0)
end

-- The tree's lines for td (indent: the prefix drawn before each line); an HDF5
-- container's datasets are described from their headers, not read.
local function walk(td, indent, lines, totals)
  local keys = td:keys()
  local is_h5 = h5.is_h5(td)
  for i, k in ipairs(keys) do
    local last = i == #keys
    local branch, child_indent = last and "`-- " or "|-- ", indent .. (last and "    " or "|   ")
    local tensor_leaf = is_h5 and td:kind(k) == "tensor"
    local v
    if tensor_leaf then v = h5_leaf(td, k) else v, tensor_leaf = value_at(td, k) end
    if h5.is_h5(v) then
      lines[#lines + 1] = ("%s%s%s/  group batch %s"):format(indent, branch, k, batch_text(v))
      walk(v, child_indent, lines, totals)
    elseif T.is_tensordict(v) or T.is_lazy_stack(v) then
      lines[#lines + 1] = ("%s%s%s/  %s batch %s"):format(indent, branch, k,
        T.is_lazy_stack(v) and "LazyStackedTensorDict" or "TensorDict", batch_text(v))
      walk(v, child_indent, lines, totals)
    elseif tensor_leaf or T.is_tensor(v) then
      local bytes = leaf_bytes(v)
      totals.leaves, totals.bytes = totals.leaves + 1, totals.bytes + bytes
      lines[#lines + 1] = ("%s%s%-16s %-8s %-20s %s"):format(indent, branch, k, v:dtype(),
        util.format_list(v:shape()), human(bytes))
    else
      totals.values = totals.values + 1
      lines[#lines + 1] = ("%s%s%-16s %s (non-tensor)"):format(indent, branch, k, value_text(v))
    end
  end
end

-- A line on the checkpoint of an unfinished run beside path, or nil.
local function checkpoint_line(path)
  local rows = flow.MemmapSink.checkpoint_rows(path)
  if not rows then return nil end
  return ("a checkpoint of an unfinished run (%s rows) is beside it: tdflow run RECIPE --resume continues it")
    :format(progress.grouped(rows))
end

-- Whether the file at path ends as a consolidated file does: a little-endian length n
-- in its last 8 bytes, and n bytes of JSON (an object) before them. Only then is a
-- reader's error about it worth showing; anything else is another kind of file.
local function ends_like_consolidated(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local size = f:seek("end")
  local n = 0
  if size and size > 9 then
    f:seek("set", size - 8)
    local tail = f:read(8) or ""
    for i = #tail, 1, -1 do n = n * 256 + tail:byte(i) end
  end
  local first
  if n >= 2 and n <= size - 8 then
    f:seek("set", size - 8 - n)
    first = f:read(1)
  end
  f:close()
  return first == "{"
end

local NEITHER = "is neither a memmap folder, a consolidated file nor an HDF5 file"

-- Whether the file at path starts with HDF5's signature.
local function is_hdf5(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local head = f:read(8)
  f:close()
  return head == "\137HDF\r\n\26\n"
end

-- The container at path (memmap folder and consolidated file: a TensorDict over the mapped
-- files; HDF5 file: tensordict.h5's reader) and what it is ("memmap folder", ...); raises a
-- clear error when path holds none. --stats, --head and --hist (host/inspect_*.lua) open
-- it here too.
function M.open(path)
  local td, what
  if fs.is_dir(path) then
    if not fs.exists(path .. "/meta.json") then
      util.fail(("inspect: %s %s (a folder without meta.json)"):format(path, NEITHER))
    end
    td, what = T.load_memmap(path), "memmap folder"
  elseif fs.exists(path) and is_hdf5(path) then
    td, what = T.from_h5(path), "HDF5 file"
  elseif fs.exists(path) then
    if not ends_like_consolidated(path) then
      util.fail(("inspect: %s %s (a file that does not end in a metadata length and JSON)"):format(path, NEITHER))
    end
    td, what = T.from_consolidated(path), "consolidated file"
  else
    local ckpt = checkpoint_line(path)
    util.fail(("inspect: %s: no such file or folder%s"):format(path, ckpt and (" (" .. ckpt .. ")") or ""))
  end
  return td, what
end

-- The text of the tree for path, and of the provenance record of the run that wrote it;
-- raises a clear error when path holds no container.
function M.text(path)
  local td, what = M.open(path)
  local lines, totals = {}, { leaves = 0, bytes = 0, values = 0 }
  walk(td, "", lines, totals)
  table.insert(lines, 1, ("%s  (%s, batch size %s, %d tensor leaves, %s%s)"):format(path, what, batch_text(td),
    totals.leaves, human(totals.bytes), totals.values > 0 and (", " .. totals.values .. " non-tensor values") or ""))
  if what == "memmap folder" and fs.exists(path .. "/" .. provenance.FILE) then
    local rec, why = provenance.read(path)
    lines[#lines + 1] = rec and provenance.text(rec) or ("provenance: " .. why)
  end
  local ckpt = checkpoint_line(path)
  if ckpt then lines[#lines + 1] = ckpt end
  return (table.concat(lines, "\n"))
end

return M
