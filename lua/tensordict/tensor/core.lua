-- tensor/core.lua: the Tensor type.
--
-- A Lua tensor is a table { h = header, o = owner }:
--   h  a td_tensor header in Lua-managed memory (ffi.new), caller-owned in the C
--      sense: it holds no storage reference of its own;
--   o  the owner: a small cdata holding the one C reference to the storage (an owned
--      td_tensor), released once the GC finds the owner dead (tensor/slots.lua: a sweep per
--      GC cycle, no finaliser per owner) or by free().
-- Every tensor made from the same storage shares one owner, so a view costs one
-- header and one table. free() releases the owner: the tensor and every tensor that
-- shares its storage raise on use afterwards. No numeric loops here: they are all in
-- the C kernels.
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local dtypes = require("tensordict.tensor.dtype")
local index = require("tensordict.tensor.index")
local memory = require("tensordict.tensor.memory")
local late = require("tensordict.late") -- gather, create, print, cuda: they require this module
local device = require("tensordict.tensor.device") -- which kernels an op's tensors go to
local slots = require("tensordict.tensor.slots")

local C = lib.C
local fail, c_fail, describe, dim0 = util.fail, util.c_fail, util.describe, util.dim0
local shape_buf, dims_buf = util.shape_buf, util.dims_buf
local pick, pick_copy = device.pick, device.pick_copy
local BOOL, FLOAT64 = dtypes.BOOL, dtypes.FLOAT64
local tonumber, type, setmetatable, getmetatable = tonumber, type, setmetatable, getmetatable

-- Made once per Lua state; a reload rebinds the metamethods below and keeps serving
-- the owners already made.
local mt, Owner, owners = unpack(require("tensordict.once")("tensor_type", function()
  ffi.cdef [[
    typedef struct td_owner { td_tensor *const _td_p; const int32_t _td_slot; } td_owner;
    typedef struct td_owner_mut { td_tensor *_td_p; int32_t _td_slot; } td_owner_mut;
  ]]
  return { {}, ffi.typeof("td_owner"), slots.new("td_tensor *", lib.C.td_tensor_release_slots) }
end))
local OwnerMut = ffi.typeof("td_owner_mut *")
local Header = ffi.typeof("td_tensor")
local istype = ffi.istype
local HEADER_BYTES = ffi.sizeof(Header)
local take_slot, hold_slot = slots.take, slots.hold
local Tensor = {} -- methods; user code may add more (torch7's habit)
index.tensor_mt = mt

local idx_buf = ffi.new("int64_t[?]", C.TD_MAX_DIMS)
local out_buf = ffi.new("double[1]")

-- free(): the owner's field is const to Lua; only this writes it (through the mutable
-- twin), and the slot then waits for the owner to be collected.
local function release_owner(o)
  local t = o._td_p
  if t ~= nil then
    ffi.cast(OwnerMut, o)._td_p = nil
    slots.released(owners, o._td_slot)
    C.td_tensor_release(t)
  end
end

local function new_tensor(h, o) return (setmetatable({ h = h, o = o }, mt)) end

-- A tensor from an owned C header p (NULL: raise the C library's error). When p views
-- the storage of `like`, it joins like's owner instead of making a new one.
local function adopt(p, like)
  if p == nil then c_fail() end
  local h = Header()
  ffi.copy(h, p, HEADER_BYTES)
  h.refcount = 0
  if like ~= nil and p.storage == like.h.storage then
    C.td_tensor_release(p)
    return new_tensor(h, like.o)
  end
  local slot = take_slot(owners)
  local o = Owner(p, slot)
  hold_slot(owners, slot, o, p)
  local t = new_tensor(h, o)
  memory.after_alloc() -- p may own new storage: let the GC see its bytes
  return t
end

local function is_tensor(x) return getmetatable(x) == mt end

-- The header of a live tensor (raises once its storage was freed). The header must
-- view its owner's storage: a script that swapped h or o between tensors (a.h = b.h)
-- would otherwise reach memory freed with the other one.
local function header(self)
  if getmetatable(self) ~= mt then util.bad_self("a tensor", self, Tensor) end
  local o = self.o
  local p = o._td_p
  if p == nil then fail("tensor used after free()") end
  local h = self.h
  -- (a TensorDict's leaves are owned by its handle, which pins their storages)
  if istype(Owner, o) and h.storage ~= p.storage then
    fail("tensor: its fields h and o were changed from Lua and no longer belong together")
  end
  return h
end

local function tensor_arg(x, call, what)
  if not is_tensor(x) then
    fail(("%s: %s must be a tensor, got %s"):format(call, what, describe(x)))
  end
  return header(x)
end

local function check(status)
  if status ~= 0 then c_fail() end
end

-- The element at idx_buf of header h as a Lua value (one element copied to the host
-- first when h is in device memory).
local function read(h)
  if device.on_device(h) then
    local one = late.cuda.host_element(h, idx_buf)
    local v = one:item()
    one:free()
    return v
  end
  check(C.td_tensor_read_f64(h, idx_buf, out_buf))
  local v = out_buf[0]
  if h.dtype == BOOL then return v ~= 0 end
  return v
end

-- The value of an owned 0-dim C tensor p (a full reduction's result), released at once:
-- no Lua tensor, owner and slot are made for a number.
local function value_of(p)
  if p == nil then c_fail() end
  local status = C.td_tensor_read_f64(p, idx_buf, out_buf)
  local v, is_bool = out_buf[0], p.dtype == BOOL
  C.td_tensor_release(p)
  check(status)
  if is_bool then return v ~= 0 end
  return v
end

local function number_arg(v, call)
  if type(v) == "boolean" then return v and 1 or 0 end
  if type(v) ~= "number" then
    fail(("%s: value must be a number or boolean, got %s"):format(call, describe(v)))
  end
  return v
end

---------------------------------------------------------------------------- inspection

function Tensor.dim(self) return header(self).ndim end

function Tensor.shape(self)
  local h = header(self)
  return util.int64_list(h.shape, h.ndim)
end

function Tensor.size(self, d)
  local h = header(self)
  if d == nil then return util.int64_list(h.shape, h.ndim) end
  return (tonumber(h.shape[dim0("size", d, h.ndim)]))
end

function Tensor.stride(self, d)
  local h = header(self)
  if d == nil then return util.int64_list(h.strides, h.ndim) end
  return (tonumber(h.strides[dim0("stride", d, h.ndim)]))
end

function Tensor.numel(self) return (tonumber(C.td_tensor_numel(header(self)))) end
function Tensor.dtype(self) return dtypes.name(header(self).dtype) end
function Tensor.is_contiguous(self) return C.td_tensor_is_contiguous(header(self)) ~= 0 end

function Tensor.device(self)
  local h = header(self)
  if C.td_tensor_device_type(h) == C.TD_DEVICE_CPU then return "cpu" end
  return "cuda:" .. C.td_tensor_device_index(h)
end

function Tensor.item(self)
  local h = header(self)
  local n = tonumber(C.td_tensor_numel(h))
  if n ~= 1 then fail(("item: the tensor has %d elements, item() needs exactly 1"):format(n)) end
  for i = 0, h.ndim - 1 do idx_buf[i] = 0 end -- the one element is at 0 in every dim
  return read(h)
end

-- Nested Lua tables of numbers (booleans for bool tensors); a 0-dim tensor gives a value.
function Tensor.totable(self)
  local h = header(self)
  local ndim = h.ndim
  if ndim == 0 then return Tensor.item(self) end
  -- One C cast into a contiguous float64 copy, then plain reads.
  local copy = adopt(C.td_tensor_empty(ndim, h.shape, FLOAT64))
  check(pick_copy("totable", copy.h, h).td_tensor_copy_(copy.h, h))
  check(C.td_tensor_canonicalize_nan_(copy.h)) -- NaN payloads would read as bogus values
  local data = ffi.cast("const double *", C.td_tensor_data_borrow(copy.h))
  local as_bool = h.dtype == BOOL
  local pos = 0
  local function build(d)
    local t, n = {}, tonumber(h.shape[d])
    if d == ndim - 1 then
      for i = 1, n do
        local v = data[pos + i - 1]
        if as_bool then t[i] = v ~= 0 else t[i] = v end
      end
      pos = pos + n
    else
      for i = 1, n do t[i] = build(d + 1) end
    end
    return t
  end
  local result = build(0)
  copy:free()
  return result
end

-- Python's spelling (torch's Tensor.tolist).
Tensor.tolist = Tensor.totable

------------------------------------------------------------------------------ views

-- A view of self written by a C view function; it shares self's owner.
local function view_of(self, status, h)
  if status ~= 0 then c_fail() end
  return new_tensor(h, self.o)
end

local function shape_call(call, self, ...)
  local h = header(self)
  return h, util.read_shape(call, true, ...)
end

function Tensor.view(self, ...)
  local h, n = shape_call("view", self, ...)
  local out = Header()
  return view_of(self, C.td_tensor_view(h, n, shape_buf, out), out)
end

function Tensor.expand(self, ...)
  local h, n = shape_call("expand", self, ...)
  local out = Header()
  return view_of(self, C.td_tensor_expand(h, n, shape_buf, out), out)
end

function Tensor.reshape(self, ...)
  local h, n = shape_call("reshape", self, ...)
  return adopt(C.td_tensor_reshape(h, n, shape_buf), self)
end

function Tensor.permute(self, ...)
  local h = header(self)
  if select("#", ...) == 0 then fail("permute: expected the new order of the dims") end
  local dims = util.list_args("permute", ...)
  local ndim = h.ndim
  if #dims ~= ndim then fail(("permute: %d dims given for a tensor of %d dims"):format(#dims, ndim)) end
  local seen = {}
  for i = 1, ndim do
    local d = dim0("permute", dims[i], ndim)
    if seen[d] then fail(("permute: dim %d appears twice in %s"):format(dims[i], util.format_list(dims))) end
    seen[d] = true
    dims_buf[i - 1] = d
  end
  local out = Header()
  return view_of(self, C.td_tensor_permute(h, dims_buf, out), out)
end

function Tensor.transpose(self, a, b)
  local h = header(self)
  local out = Header()
  return view_of(self, C.td_tensor_transpose(h, dim0("transpose", a, h.ndim), dim0("transpose", b, h.ndim), out), out)
end

-- diagonal([offset = 0 [, dim1 = 1 [, dim2 = 2]]]): the diagonal of dims dim1 and dim2
-- as the last dim (offset > 0 above the main one, < 0 below), a view.
function Tensor.diagonal(self, offset, d1, d2)
  local h = header(self)
  offset = offset == nil and 0 or offset
  if not util.is_int(offset) then
    fail(("diagonal: offset must be an integer, got %s"):format(util.describe(offset)))
  end
  if h.ndim < 2 then fail(("diagonal: expected a tensor of at least 2 dims, got %d"):format(h.ndim)) end
  local a, b = dim0("diagonal", d1 == nil and 1 or d1, h.ndim), dim0("diagonal", d2 == nil and 2 or d2, h.ndim)
  if a == b then fail(("diagonal: dim1 and dim2 must be different dims, both are %d"):format(a + 1)) end
  local out = Header()
  return view_of(self, C.td_tensor_diagonal(h, offset, a, b, out), out)
end

-- torch's other views, in Lua's 1-based manners (torch7's narrow and select).
-- narrow(dim, start, length): length elements of dim from start (1-based, negative
-- from the end), a view.
function Tensor.narrow(self, d, start, length)
  local h = header(self)
  local dim = dim0("narrow", d, h.ndim)
  local size = tonumber(h.shape[dim])
  if not util.is_int(start) or not util.is_int(length) or length < 0 then
    fail(("narrow: start and length must be integers (length >= 0), got %s and %s")
      :format(describe(start), describe(length)))
  end
  local s = start < 0 and size + start + 1 or start
  if s < 1 or s + length - 1 > size or (start == 0) then
    fail(("narrow: start %d and length %d do not fit dim %d of size %d (start in 1..%d or -%d..-1)")
      :format(start, length, d, size, size, size))
  end
  local out = Header()
  return view_of(self, C.td_tensor_slice(h, dim, s - 1, s - 1 + length, 1, out), out)
end

-- select(dim, index): the slice at index (1-based, negative from the end), dim removed.
function Tensor.select(self, d, i)
  local h = header(self)
  local dim = dim0("select", d, h.ndim)
  local size = tonumber(h.shape[dim])
  if not util.is_int(i) or i == 0 or i > size or i < -size then
    fail(("select: index %s is out of range for dim %d of size %d (valid: 1..%d or -%d..-1)")
      :format(describe(i), d, size, size, size))
  end
  local out = Header()
  return view_of(self, C.td_tensor_select(h, dim, i > 0 and i - 1 or size + i, out), out)
end

-- movedim(source, destination): dims (one, or lists of the same length) moved to the
-- new places, the others keeping their order (a permute).
function Tensor.movedim(self, src, dst)
  local h = header(self)
  local ndim = h.ndim
  local s = type(src) == "table" and src or { src }
  local t = type(dst) == "table" and dst or { dst }
  if #s ~= #t then
    fail(("movedim: %d source dims but %d destinations"):format(#s, #t))
  end
  local order, taken, placed = {}, {}, {}
  for i = 1, #s do
    local a, b = dim0("movedim", s[i], ndim), dim0("movedim", t[i], ndim)
    if taken[a] then fail(("movedim: source dim %d appears twice"):format(s[i])) end
    if placed[b] then fail(("movedim: destination dim %d appears twice"):format(t[i])) end
    taken[a], placed[b], order[b] = true, true, a
  end
  local rest = {}
  for a = 0, ndim - 1 do if not taken[a] then rest[#rest + 1] = a end end
  local k = 1
  for b = 0, ndim - 1 do
    if order[b] == nil then order[b], k = rest[k], k + 1 end
    dims_buf[b] = order[b]
  end
  local out = Header()
  return view_of(self, C.td_tensor_permute(h, dims_buf, out), out)
end
Tensor.moveaxis = Tensor.movedim
Tensor.swapaxes = Tensor.transpose
Tensor.swapdims = Tensor.transpose

-- broadcast_to(shape): expand to shape (torch's name); view_as(other): view to other's shape.
function Tensor.broadcast_to(self, ...) return (Tensor.expand(self, ...)) end
function Tensor.view_as(self, other)
  if not is_tensor(other) then fail(("view_as: expected a tensor, got %s"):format(describe(other))) end
  return (Tensor.view(self, other:size()))
end

function Tensor.squeeze(self, d)
  local h = header(self)
  local out = Header()
  if d == nil then return view_of(self, C.td_tensor_squeeze_all(h, out), out) end
  return view_of(self, C.td_tensor_squeeze(h, dim0("squeeze", d, h.ndim), out), out)
end

function Tensor.unsqueeze(self, d)
  local h = header(self)
  local out = Header()
  return view_of(self, C.td_tensor_unsqueeze(h, dim0("unsqueeze", d, h.ndim, 1), out), out)
end

-- flatten() merges every dim; flatten(a [, b]) merges dims a..b (b defaults to -1).
function Tensor.flatten(self, a, b)
  local h = header(self)
  local ndim = h.ndim
  if ndim == 0 then return adopt(C.td_tensor_flatten(h, 0, 0), self) end
  local s, e = dim0("flatten", a or 1, ndim), dim0("flatten", b or -1, ndim)
  if s > e then fail(("flatten: start dim %d comes after end dim %d"):format(a, b or -1)) end
  return adopt(C.td_tensor_flatten(h, s, e), self)
end

function Tensor.unflatten(self, d, sizes)
  local h = header(self)
  local dim = dim0("unflatten", d, h.ndim)
  if type(sizes) ~= "table" then
    fail(("unflatten: sizes must be a table such as {2, 3}, got %s"):format(describe(sizes)))
  end
  local n = util.read_shape("unflatten", true, sizes)
  local out = Header()
  return view_of(self, C.td_tensor_unflatten(h, dim, n, shape_buf, out), out)
end

----------------------------------------------------------------------------- copies

function Tensor.contiguous(self)
  local h = header(self)
  return adopt(pick("contiguous", h).td_tensor_contiguous(h), self)
end
function Tensor.clone(self)
  local h = header(self)
  return adopt(pick("clone", h).td_tensor_clone(h))
end

-- to(dtype) casts (sharing self's data when the dtype already matches, like torch);
-- to("cpu"), to("cuda"), to("cuda:N") move it (self when it is there already; see
-- tensor/cuda.lua), to(device, {non_blocking = true}) queues the copy from pinned memory.
function Tensor.to(self, target, opts)
  local h = header(self)
  if target == "cpu" and not device.on_device(h) then return self end
  if late.cuda.is_device_name(target) then
    opts = util.options("to", opts, { non_blocking = "boolean" })
    return late.cuda.tensor_to(self, target, opts.non_blocking)
  end
  return adopt(pick("to", h).td_tensor_to_dtype(h, dtypes.code(target, "to")), self)
end

-- torch's cast methods: t:float() is t:to("float32"), and so on (self when the dtype
-- already matches, as torch).
for name, dtype in pairs(dtypes.CASTS) do
  Tensor[name] = function(self) return Tensor.to(self, dtype) end
end

function Tensor.copy_(self, src)
  local h, s = header(self), tensor_arg(src, "copy_", "source")
  check(pick_copy("copy_", h, s).td_tensor_copy_(h, s))
  return self
end

function Tensor.fill_(self, value)
  local h = header(self)
  check(pick("fill_", h).td_tensor_fill_(h, number_arg(value, "fill_")))
  return self
end

-- Returns the storage's memory now. This tensor and every tensor sharing its storage
-- (views of it, and what it is a view of) raise on use afterwards.
function Tensor.free(self)
  if getmetatable(self) ~= mt then util.bad_self("a tensor", self, Tensor) end
  local o = self.o
  if not ffi.istype(Owner, o) then
    fail("free: this tensor is a leaf of a TensorDict, which owns its storage; free() the TensorDict instead")
  end
  release_owner(o)
end

--------------------------------------------------------------------------- indexing

-- Writes the view key selects into out; returns the C status, and the mask or index
-- entry of the key if it has one (see index.parse).
local function index_into(h, key, out)
  if type(key) == "number" then
    if h.ndim == 0 then fail(("index: cannot index a 0-dim tensor with %s"):format(key)) end
    return (C.td_tensor_select(h, 0, index.position(key, tonumber(h.shape[0]), 1), out))
  end
  local n, adv = index.parse(h, key)
  return C.td_tensor_index(h, index.entries, n, out), adv
end

function mt.__index(self, key)
  local method = Tensor[key]
  if method ~= nil then return method end
  if type(key) == "string" then fail(("Tensor has no method or field '%s'"):format(key)) end
  local h = header(self)
  -- t[i] on a 1-D tensor reads the element without making a view.
  if type(key) == "number" and h.ndim == 1 then
    idx_buf[0] = index.position(key, tonumber(h.shape[0]), 1)
    return read(h)
  end
  local out = Header()
  local status, adv = index_into(h, key, out)
  check(status)
  if adv then return late.gather.read(out, adv) end -- a copy
  if out.ndim == 0 then return read(out) end -- every dim selected: the element itself
  return new_tensor(out, self.o)
end

-- Copies value into the positions key selects: a number or boolean fills, a tensor
-- (or nested table) broadcasts to the selection and is cast to its dtype.
function mt.__newindex(self, key, value)
  if type(key) == "string" then fail(("cannot set field '%s' of a tensor"):format(key)) end
  local h = header(self)
  local target = Header()
  local status, adv = index_into(h, key, target)
  check(status)
  if adv then return late.gather.write(target, adv, value) end
  if is_tensor(value) then
    local v = header(value)
    check(pick_copy("assignment", target, v).td_tensor_copy_(target, v))
  elseif type(value) == "table" then
    local src = late.create.from_table(value, h.dtype, "assignment")
    check(pick_copy("assignment", target, src.h).td_tensor_copy_(target, src.h))
    src:free()
  else
    check(pick("assignment", target).td_tensor_fill_(target, number_arg(value, "assignment")))
  end
end

function mt.__tostring(self)
  if self.o._td_p == nil then return "tensor(<freed>)" end
  return late.print.tensor(self)
end

return {
  Tensor = Tensor,
  metatable = mt,
  Header = Header,
  new_tensor = new_tensor,
  adopt = adopt,
  value_of = value_of,
  is_tensor = is_tensor,
  handle = header,
  check = check,
}
