-- tensor.lua: the Tensor type. A Lua tensor is a small cdata struct holding one
-- reference to a C td_tensor; its metatype gives methods, indexing and printing.
-- free() releases early and leaves a NULL handle, so later use raises instead of
-- touching freed memory. No numeric loops here: they are all in the C kernels.
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local dtypes = require("tensordict.dtype")
local index = require("tensordict.index")
local memory = require("tensordict.memory")

local C = lib.C
local fail, c_fail, describe, dim0 = util.fail, util.c_fail, util.describe, util.dim0
local shape_buf, dims_buf = util.shape_buf, util.dims_buf
local BOOL, FLOAT64 = dtypes.BOOL, dtypes.FLOAT64
local tonumber, type = tonumber, type

-- The type is made once per Lua state; a reload rebinds the metamethods below.
local mt, Ref = unpack(require("tensordict.once")("tensor_type", function()
  ffi.cdef [[ typedef struct td_tensor_ref { td_tensor *h; } td_tensor_ref; ]]
  local meta = { __metatable = "tensordict.Tensor" }
  return { meta, ffi.metatype("td_tensor_ref", meta) }
end))
local Tensor = {} -- methods; user code may add more (torch7's habit)

local idx_buf = ffi.new("int64_t[?]", C.TD_MAX_DIMS)
local out_buf = ffi.new("double[1]")

local function release(ref)
  local h = ref.h
  if h ~= nil then
    ref.h = nil
    C.td_tensor_release(h)
  end
end

-- Takes ownership of a fresh reference h (NULL: raise the C library's error).
local function wrap(h)
  if h == nil then c_fail() end
  return ffi.gc(Ref(h), release)
end

-- As wrap, for results that may own new storage: lets the GC see the bytes.
local function wrap_new(h)
  local t = wrap(h)
  memory.after_alloc()
  return t
end

local function is_tensor(x) return ffi.istype(Ref, x) end

-- The C handle of a live tensor (raises once freed).
local function H(self)
  local h = self.h
  if h == nil then fail("tensor used after free()") end
  return h
end

local function tensor_arg(x, call, what)
  if not is_tensor(x) then
    fail(("%s: %s must be a tensor, got %s"):format(call, what, describe(x)))
  end
  return H(x)
end

local function check(status)
  if status ~= 0 then c_fail() end
end

-- The element at idx_buf of h as a Lua value.
local function read(h)
  check(C.td_tensor_read_f64(h, idx_buf, out_buf))
  local v = out_buf[0]
  if C.td_tensor_dtype(h) == BOOL then return v ~= 0 end
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

function Tensor.dim(self) return C.td_tensor_ndim(H(self)) end

function Tensor.shape(self)
  local h = H(self)
  return util.int64_list(C.td_tensor_shape_borrow(h), C.td_tensor_ndim(h))
end

function Tensor.size(self, d)
  local h = H(self)
  if d == nil then return util.int64_list(C.td_tensor_shape_borrow(h), C.td_tensor_ndim(h)) end
  return tonumber(C.td_tensor_size(h, dim0("size", d, C.td_tensor_ndim(h))))
end

function Tensor.stride(self, d)
  local h = H(self)
  if d == nil then return util.int64_list(C.td_tensor_strides_borrow(h), C.td_tensor_ndim(h)) end
  return tonumber(C.td_tensor_stride(h, dim0("stride", d, C.td_tensor_ndim(h))))
end

function Tensor.numel(self) return tonumber(C.td_tensor_numel(H(self))) end
function Tensor.dtype(self) return dtypes.name(C.td_tensor_dtype(H(self))) end
function Tensor.is_contiguous(self) return C.td_tensor_is_contiguous(H(self)) ~= 0 end

function Tensor.device(self)
  local h = H(self)
  if C.td_tensor_device_type(h) == C.TD_DEVICE_CPU then return "cpu" end
  return "cuda:" .. C.td_tensor_device_index(h)
end

function Tensor.item(self)
  local h = H(self)
  local n = tonumber(C.td_tensor_numel(h))
  if n ~= 1 then
    fail(("item: the tensor has %d elements, item() needs exactly 1"):format(n))
  end
  -- Any index of a one-element tensor is 0 in every dim.
  for i = 0, C.td_tensor_ndim(h) - 1 do idx_buf[i] = 0 end
  return read(h)
end

-- Nested Lua tables of numbers (booleans for bool tensors); a 0-dim tensor gives a value.
function Tensor.totable(self)
  local h = H(self)
  local ndim = C.td_tensor_ndim(h)
  if ndim == 0 then return Tensor.item(self) end
  -- One C cast into a contiguous float64 copy, then plain reads.
  local copy = wrap_new(C.td_tensor_empty(ndim, C.td_tensor_shape_borrow(h), FLOAT64))
  check(C.td_tensor_copy_(copy.h, h))
  local data = ffi.cast("const double *", C.td_tensor_data_borrow(copy.h))
  local shape = C.td_tensor_shape_borrow(h)
  local as_bool = C.td_tensor_dtype(h) == BOOL
  local pos = 0
  local function build(d)
    local t, n = {}, tonumber(shape[d])
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

------------------------------------------------------------------------------ views

local function shape_view(call, fn, self, ...)
  local h = H(self)
  local n = util.read_shape(call, true, ...)
  return wrap(fn(h, n, shape_buf))
end

function Tensor.view(self, ...) return shape_view("view", C.td_tensor_view, self, ...) end
function Tensor.expand(self, ...) return shape_view("expand", C.td_tensor_expand, self, ...) end

function Tensor.reshape(self, ...)
  local t = shape_view("reshape", C.td_tensor_reshape, self, ...)
  memory.after_alloc()
  return t
end

function Tensor.permute(self, ...)
  local h = H(self)
  local dims = type(...) == "table" and ... or { ... }
  local ndim = C.td_tensor_ndim(h)
  if #dims ~= ndim then
    fail(("permute: %d dims given for a tensor of %d dims"):format(#dims, ndim))
  end
  local seen = {}
  for i = 1, ndim do
    local d = dim0("permute", dims[i], ndim)
    if seen[d] then fail(("permute: dim %d appears twice in %s"):format(dims[i], util.format_list(dims))) end
    seen[d] = true
    dims_buf[i - 1] = d
  end
  return wrap(C.td_tensor_permute(h, dims_buf))
end

function Tensor.transpose(self, a, b)
  local h = H(self)
  local ndim = C.td_tensor_ndim(h)
  return wrap(C.td_tensor_transpose(h, dim0("transpose", a, ndim), dim0("transpose", b, ndim)))
end

function Tensor.squeeze(self, d)
  local h = H(self)
  if d == nil then return wrap(C.td_tensor_squeeze_all(h)) end
  return wrap(C.td_tensor_squeeze(h, dim0("squeeze", d, C.td_tensor_ndim(h))))
end

function Tensor.unsqueeze(self, d)
  local h = H(self)
  return wrap(C.td_tensor_unsqueeze(h, dim0("unsqueeze", d, C.td_tensor_ndim(h), 1)))
end

-- flatten() merges every dim; flatten(a [, b]) merges dims a..b (b defaults to -1).
function Tensor.flatten(self, a, b)
  local h = H(self)
  local ndim = C.td_tensor_ndim(h)
  if ndim == 0 then return wrap_new(C.td_tensor_flatten(h, 0, 0)) end
  local s, e = dim0("flatten", a or 1, ndim), dim0("flatten", b or -1, ndim)
  if s > e then fail(("flatten: start dim %d comes after end dim %d"):format(a, b or -1)) end
  return wrap_new(C.td_tensor_flatten(h, s, e))
end

function Tensor.unflatten(self, d, sizes)
  local h = H(self)
  local dim = dim0("unflatten", d, C.td_tensor_ndim(h))
  if type(sizes) ~= "table" then
    fail(("unflatten: sizes must be a table such as {2, 3}, got %s"):format(describe(sizes)))
  end
  local n = util.read_shape("unflatten", true, sizes)
  return wrap(C.td_tensor_unflatten(h, dim, n, shape_buf))
end

----------------------------------------------------------------------------- copies

function Tensor.contiguous(self) return wrap_new(C.td_tensor_contiguous(H(self))) end
function Tensor.clone(self) return wrap_new(C.td_tensor_clone(H(self))) end

-- to(dtype) casts (returning self's data when the dtype already matches, like torch);
-- to("cpu") is the identity, since every tensor of this build lives on the CPU.
function Tensor.to(self, target)
  local h = H(self)
  if target == "cpu" then
    C.td_tensor_retain(h)
    return wrap(h)
  end
  return wrap_new(C.td_tensor_to_dtype(h, dtypes.code(target, "to")))
end

function Tensor.copy_(self, src)
  check(C.td_tensor_copy_(H(self), tensor_arg(src, "copy_", "source")))
  return self
end

function Tensor.fill_(self, value)
  check(C.td_tensor_fill_(H(self), number_arg(value, "fill_")))
  return self
end

-- Releases the C tensor now; the handle then raises on use. Views keep the storage alive.
function Tensor.free(self)
  local h = self.h
  if h ~= nil then
    ffi.gc(self, nil)
    self.h = nil
    C.td_tensor_release(h)
  end
end

--------------------------------------------------------------------------- indexing

-- Handle of the view key selects (a new reference).
local function index_view(h, key)
  if type(key) == "number" then
    if C.td_tensor_ndim(h) == 0 then
      fail(("index: cannot index a 0-dim tensor with %s"):format(key))
    end
    local i = index.position(key, tonumber(C.td_tensor_size(h, 0)), 1)
    return C.td_tensor_select(h, 0, i)
  end
  local n = index.parse(h, key)
  return C.td_tensor_index(h, index.entries, n)
end

function mt.__index(self, key)
  local method = Tensor[key]
  if method ~= nil then return method end
  if type(key) == "string" then fail(("Tensor has no method or field '%s'"):format(key)) end
  local h = H(self)
  -- t[i] on a 1-D tensor reads the element without making a view.
  if type(key) == "number" and C.td_tensor_ndim(h) == 1 then
    idx_buf[0] = index.position(key, tonumber(C.td_tensor_size(h, 0)), 1)
    return read(h)
  end
  local v = index_view(h, key)
  if v == nil then c_fail() end
  if C.td_tensor_ndim(v) == 0 then -- every dim selected: the element itself
    local ok, value = pcall(read, v)
    C.td_tensor_release(v)
    if not ok then error(value, 0) end
    return value
  end
  return wrap(v)
end

-- Copies value into the positions key selects: a number or boolean fills, a tensor
-- (or nested table) broadcasts to the selection and is cast to its dtype.
function mt.__newindex(self, key, value)
  local h = H(self)
  local target = wrap(index_view(h, key))
  if is_tensor(value) then
    check(C.td_tensor_copy_(target.h, H(value)))
  elseif type(value) == "table" then
    local src = require("tensordict.create").from_table(value, C.td_tensor_dtype(h), "assignment")
    check(C.td_tensor_copy_(target.h, src.h))
    src:free()
  else
    check(C.td_tensor_fill_(target.h, number_arg(value, "assignment")))
  end
  target:free()
end

function mt.__len(self)
  local h = H(self)
  if C.td_tensor_ndim(h) == 0 then fail("#: a 0-dim tensor has no length") end
  return tonumber(C.td_tensor_size(h, 0))
end

function mt.__tostring(self)
  if self.h == nil then return "tensor(<freed>)" end
  return require("tensordict.print").tensor(self)
end

return {
  Tensor = Tensor,
  Ref = Ref,
  wrap = wrap,
  wrap_new = wrap_new,
  is_tensor = is_tensor,
  handle = H,
  check = check,
}
