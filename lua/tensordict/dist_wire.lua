-- dist_wire.lua: a TensorDict as the messages tensordict.dist sends (docs/dist.md).
--
-- A container travels as
--   1. a header: two int64, the structure's byte count and the number of leaf messages;
--   2. its structure, packed by the core's shipping format (td_ship_pack, the one the Map
--      workers use): keys in order, batch sizes, dim names, nested containers, non-tensor
--      values, every tensor leaf's dtype and shape, and the data of the small leaves.
--      A leaf of LEAF_MESSAGE_BYTES or more is packed as a zero-stride view of a small
--      placeholder storage passed as ship's `ref`, so it adds no bytes to the structure;
--   3. one message per such large leaf, its bytes in C order, sent from (and received
--      into) the leaf's own memory.
-- Why (measured with tests/bench/bench_dist.lua, docs/dist.md): a message per leaf skips
-- a copy of each byte, which wins for large leaves, while each message of a small leaf
-- costs a round of MPI's rendezvous; one region for the small ones costs a memcpy of a
-- few KiB. Gathers, whose pieces are copied by the join anyway, ship each rank's
-- container whole (pack_whole / unpack_whole).
local ffi = require("ffi")
local C = require("tensordict.lib").C
local td_core = require("tensordict.td_core")
local tensor = require("tensordict.tensor")

local M = {}

local D, wrap, check = td_core.D, td_core.wrap, td_core.check

-- Leaves of at least this many bytes travel as messages of their own.
M.LEAF_MESSAGE_BYTES = 256 * 1024

-- The placeholder every large leaf of a structure views (never read: zero strides).
local placeholder = require("tensordict.once")("dist_placeholder", function()
  return C.td_storage_new_heap(64)
end)
local zero_strides = ffi.new("int64_t[?]", C.TD_MAX_DIMS)

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

function M.nbytes(t)
  local h = t.h
  return tonumber(C.td_tensor_numel(h)) * tonumber(h.itemsize)
end

-- Same dtype and shape.
function M.same_layout(a, b)
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

function M.data(t) return C.td_tensor_data_borrow(t.h) end

local function new_region(nbytes)
  local s = C.td_storage_new_heap(nbytes)
  if s == nil then td_core.check(-1) end
  return ffi.gc(s, C.td_storage_release)
end

local function pack(td, ref)
  local size = tonumber(check(tonumber(C.td_ship_size(D(td), ref))))
  local region = new_region(size)
  check(tonumber(C.td_ship_pack(D(td), region, ref)))
  return region, size
end

-- What to send for td: { header = int64[2], region, size, tensors (the large leaves,
-- C-contiguous) }.
function M.outgoing(td)
  local structure = td:contiguous() -- a new container; its leaves C-contiguous, shared when already so
  local paths, all = leaves(structure)
  local tensors = {}
  for i, t in ipairs(all) do
    if M.nbytes(t) >= M.LEAF_MESSAGE_BYTES then
      local h = t.h
      tensors[#tensors + 1] = t
      structure:set(paths[i], tensor.adopt(C.td_tensor_from_storage(placeholder, 0, h.ndim, h.shape,
        zero_strides, h.dtype)))
    end
  end
  local region, size = pack(structure, placeholder)
  return { header = ffi.new("int64_t[2]", size, #tensors), region = region, size = size, tensors = tensors }
end

function M.header() return ffi.new("int64_t[2]") end

function M.region(nbytes) return new_region(nbytes) end

function M.region_data(region) return C.td_storage_data_borrow(region) end

-- The received structure: the container (small leaves viewing the region, large ones
-- placeholders carrying their dtype and shape), its tensor leaves' paths and tensors.
function M.structure(region)
  local td = wrap(C.td_ship_unpack(region, placeholder))
  C.td_dict_set_locked(td._td_p, 0)
  local paths, tensors = leaves(td)
  return td, paths, tensors
end

local function is_placeholder(t) return t.h.storage == placeholder end

-- A new C-contiguous tensor shaped like placeholder p.
function M.empty_like(p)
  return tensor.adopt(C.td_tensor_empty(p.h.ndim, p.h.shape, p.h.dtype))
end

-- Where the received leaf messages go (targets.tensors, in message order): new
-- tensors set into the structure td (the result; its small leaves stay views of the
-- region), or like's leaves, checked against the message. A temporary stands in for a
-- leaf of like that is not C-contiguous and writable; finish copies temporaries and the
-- small leaves into like. Non-tensor values of the message are set into like.
-- fail(msg) raises.
function M.targets(td, paths, tensors, like, fail)
  local out = { tensors = {}, copies = {}, result = like or td }
  if not like then
    for i, t in ipairs(tensors) do
      if is_placeholder(t) then
        local new = M.empty_like(t)
        td:set(paths[i], new)
        out.tensors[#out.tensors + 1] = new
      end
    end
    return out
  end
  local lpaths, ltensors = leaves(like)
  if #lpaths ~= #paths then
    fail(("like has %d tensor leaves, the message %d"):format(#lpaths, #paths))
  end
  for i, t in ipairs(tensors) do
    local lt = ltensors[i]
    local want, have = td_core.key_text(paths[i]), td_core.key_text(lpaths[i])
    if want ~= have or not M.same_layout(lt, t) then
      fail(("like's leaf %s (%s) does not match the message's leaf %s (%s)"):format(
        have, M.layout_text(lt), want, M.layout_text(t)))
    end
    if not is_placeholder(t) then
      out.copies[#out.copies + 1] = { lt, t }
    elseif C.td_tensor_is_contiguous(lt.h) == 1 and C.td_tensor_is_writable(lt.h) == 1 then
      out.tensors[#out.tensors + 1] = lt
    else
      local tmp = M.empty_like(t)
      out.copies[#out.copies + 1] = { lt, tmp }
      out.tensors[#out.tensors + 1] = tmp
    end
  end
  for _, path in ipairs(td:keys({ include_nested = true, leaves_only = true })) do
    local v = td:get(path)
    if not tensor.is_tensor(v) then like:set(path, v) end
  end
  return out
end

function M.finish(targets)
  for _, pair in ipairs(targets.copies) do pair[1]:copy_(pair[2]) end
  return targets.result
end

-- The whole container (data included) in one shipped region, and back.
function M.pack_whole(td) return pack(td, nil) end
function M.unpack_whole(region)
  local td = wrap(C.td_ship_unpack(region, nil))
  C.td_dict_set_locked(td._td_p, 0)
  return td
end

return M
