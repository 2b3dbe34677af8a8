-- dist/wire.lua: the Lua half of how containers travel in tensordict.dist (docs/dist.md).
--
-- Point to point and broadcast go through libtensordict_mpi's transfers
-- (core/mpi/mpi_dict.c): the structure in one message, then the leaves' bytes straight
-- from the sender's leaves into the receiver's (like's leaves when like has the
-- message's structure and C-contiguous writable leaves). Here: wrapping a received
-- container, and filling a like that could not take the bytes directly (a strided or
-- read-only leaf, other non-tensor values, a stack of values) or does not match (an
-- error naming the leaf). Gathers, whose pieces are copied by the join anyway, ship each
-- rank's container whole in one region (pack_whole / unpack_whole).
local ffi = require("ffi")
local C = require("tensordict.lib").C
local td_core = require("tensordict.dict")
local tensor = require("tensordict.tensor")

local M = {}

local cdict, wrap, check = td_core.cdict, td_core.wrap, td_core.check

-- The tensor leaves of td, in key order: their paths and tensors.
local function leaves(td)
  local paths, tensors = {}, {}
  for _, path in ipairs(td:keys({ include_nested = true, leaves_only = true })) do
    local v = td:get(path)
    if tensor.is_tensor(v) then
      paths[#paths + 1], tensors[#tensors + 1] = path, v
    end
  end
  return paths, tensors
end
M.leaves = leaves

-- Same dtype and shape.
local function same_layout(a, b)
  local ha, hb = a.h, b.h
  if ha.dtype ~= hb.dtype or ha.ndim ~= hb.ndim then return false end
  for d = 0, ha.ndim - 1 do
    if ha.shape[d] ~= hb.shape[d] then return false end
  end
  return true
end

function M.layout_text(t)
  local h, dims = t.h, {}
  for d = 0, h.ndim - 1 do dims[#dims + 1] = tostring(tonumber(h.shape[d])) end
  return ("%s [%s]"):format(ffi.string(C.td_dtype_name(h.dtype)), table.concat(dims, ", "))
end

function M.data(t) return (C.td_tensor_data_borrow(t.h)) end

-- A received container (a new C reference), unlocked like any new one.
function M.received(d)
  local td = wrap(d)
  C.td_dict_set_locked(td._td_p, 0)
  return td
end

-- Fills like from msg, a received container: the same tensor leaves in key order, with
-- the same dtypes and shapes (else fail(text) raises, naming the first that differs),
-- copied in; msg's non-tensor values are set into like.
function M.fill_like(msg, like, fail)
  local paths, tensors = leaves(msg)
  local lpaths, ltensors = leaves(like)
  if #lpaths ~= #paths then
    fail(("like has %d tensor leaves, the message %d"):format(#lpaths, #paths))
  end
  for i, t in ipairs(tensors) do
    local lt = ltensors[i]
    local want, have = td_core.key_text(paths[i]), td_core.key_text(lpaths[i])
    if want ~= have or not same_layout(lt, t) then
      fail(("like's leaf %s (%s) does not match the message's leaf %s (%s)"):format(
        have, M.layout_text(lt), want, M.layout_text(t)))
    end
  end
  for i, t in ipairs(tensors) do ltensors[i]:copy_(t) end
  for _, path in ipairs(msg:keys({ include_nested = true, leaves_only = true })) do
    local v = msg:get(path)
    if not tensor.is_tensor(v) then like:set(path, v) end
  end
  return like
end

local function new_region(nbytes)
  local s = C.td_storage_new_heap(nbytes)
  if s == nil then td_core.check(-1) end
  return (ffi.gc(s, C.td_storage_release))
end

function M.region(nbytes) return new_region(nbytes) end

function M.region_data(region) return (C.td_storage_data_borrow(region)) end

-- The whole container (data included) in one shipped region, and back.
function M.pack_whole(td)
  local size = tonumber(check(tonumber(C.td_ship_size(cdict(td), nil))))
  local region = new_region(size)
  check(tonumber(C.td_ship_pack(cdict(td), region, nil)))
  return region, size
end

function M.unpack_whole(region) return M.received(C.td_ship_unpack(region, nil)) end

return M
