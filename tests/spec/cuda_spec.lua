-- The CUDA backend (docs/cuda.md). Without a device (this development machine, CI),
-- the CPU-side behaviour runs: is_available() and its reason, the error of every entry
-- point, ToDevice to the host, device routing and the mixed-device error (through a
-- tensor whose storage claims device memory), the library's presence where nvcc is.
-- With a device, every device op is compared with the CPU's result; without one those
-- tests are pending (counted as skipped).
local ffi = require("ffi")
local T = require("tensordict")
local H = require("helpers")
local flow = require("tensordict.flow")
local lib = require("tensordict.lib")
local device = require("tensordict.tensor.device")
local tensor = require("tensordict.tensor")

local C = lib.C
local available, reason = T.cuda.is_available()

local function nvcc_present()
  local ok = os.execute("command -v nvcc >/dev/null 2>&1 || test -x /usr/local/cuda/bin/nvcc")
  return ok == 0 or ok == true
end

describe("CUDA build", function()
  it("builds libtensordict_cuda.so next to libtensordict.so where nvcc is found", function()
    if not nvcc_present() then return pending("nvcc is not installed here") end
    local path = lib.path:match("^(.*)/[^/]*$") .. "/libtensordict_cuda.so"
    local f = io.open(path, "rb")
    assert.is_truthy(f, path .. " is missing although nvcc is installed")
    f:close()
  end)

  it("keeps the CPU library free of CUDA", function()
    local p = io.popen("ldd " .. lib.path)
    local deps = p:read("*a")
    p:close()
    assert.is_nil(deps:find("cuda", 1, true))
    assert.is_nil(deps:find("cublas", 1, true))
  end)
end)

describe("without a CUDA device", function()
  if available then
    it("(a device is present: the CPU-only errors do not apply)", function()
      pending("a CUDA device is available")
    end)
    return
  end

  local function not_available(call) return call .. ": CUDA is not available (" .. reason .. ")" end

  it("is_available() is false with the reason", function()
    assert.is_false(available)
    assert.are.equal("string", type(reason))
    assert.is_true(#reason > 0)
    assert.are.equal(0, T.cuda.device_count())
  end)

  it("every CUDA entry point raises, naming the call and the reason", function()
    local t = T.arange(4)
    local td = T.TensorDict({ a = T.ones(2), sub = { b = T.zeros(2, 3) } }, { 2 })
    H.raises(function() local _ = t:to("cuda") end, not_available("to"))
    H.raises(function() local _ = t:to("cuda:1") end, not_available("to"))
    H.raises(function() local _ = t:cuda() end, not_available("cuda"))
    H.raises(function() local _ = t:pin_memory() end, not_available("pin_memory"))
    H.raises(function() local _ = td:to("cuda:0") end, not_available("to"))
    H.raises(function() local _ = td:to({ device = "cuda", dtype = "float64" }) end, not_available("to"))
    H.raises(function() local _ = td:cuda() end, not_available("cuda"))
    H.raises(function() local _ = td:pin_memory() end, not_available("pin_memory"))
    H.raises(function() T.cuda.synchronize() end, not_available("synchronize"))
    H.raises(function() T.cuda.empty_cache() end, not_available("empty_cache"))
    H.raises(function() T.cuda.memory_stats() end, not_available("memory_stats"))
    H.raises(function() T.cuda.current_device() end, not_available("current_device"))
    H.raises(function() T.cuda.set_device(0) end, not_available("set_device"))
    H.raises(function() T.TensorDict({ a = T.ones(2) }, { 2 }, { device = "cuda" }) end,
      not_available("TensorDict"))
    local dir = os.tmpname()
    os.remove(dir)
    td:memmap(dir)
    H.raises(function() T.load_memmap(dir, { device = "cuda" }) end, not_available("load_memmap"))
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("keeps host calls working: to('cpu'), cpu(), is_pinned()", function()
    local t = T.arange(3)
    assert.are.equal(t, t:to("cpu"))
    assert.are.equal(t, t:cpu())
    assert.is_false(t:is_pinned())
    local td = T.TensorDict({ a = T.ones(2) }, { 2 })
    local moved = td:to("cpu")
    assert.are.equal("cpu", moved:device())
    assert.are.same({ 1, 1 }, moved.a:totable())
    assert.is_nil(td:device()) -- the source keeps its own setting
    assert.are.same({ 1, 1 }, td:cpu().a:totable())
  end)

  it("flow.ToDevice raises at open and at the first batch; MemmapSource{device} at open", function()
    local node = flow.ToDevice { device = "cuda" }
    H.raises(function() node:open({}) end, "ToDevice: CUDA is not available (" .. reason .. ")")
    H.raises(function() node(T.TensorDict({ a = T.ones(2) }, { 2 })) end,
      "ToDevice: CUDA is not available")
    local dir = os.tmpname()
    os.remove(dir)
    T.TensorDict({ a = T.ones(4) }, { 4 }):memmap(dir)
    local src = flow.MemmapSource { path = dir, batch_size = 2, device = "cuda:0" }
    H.raises(function() src:open({}) end, "MemmapSource: CUDA is not available (" .. reason .. ")")
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("flow.ToDevice", function()
  it("moves batches to the host (any machine) and round-trips its spec", function()
    local node = flow.ToDevice { device = "cpu" }
    node:open({})
    local out = node(T.TensorDict({ x = T.tensor({ 0, 1, 2 }), n = { y = T.ones(3, 2) } }, { 3 }))
    assert.are.equal("cpu", out:device())
    assert.are.same({ 0, 1, 2 }, out.x:totable())
    assert.are.same({ 3, 2 }, out.n.y:shape())
    local again = flow.build(node:spec())
    assert.are.same(node:spec(), again:spec())
    assert.are.same({ device = "cpu", non_blocking = false }, { device = again.p.device,
      non_blocking = again.p.non_blocking })
  end)

  it("refuses an unknown device when made", function()
    H.raises(function() local _ = flow.ToDevice { device = "tpu" } end,
      "ToDevice: device: unknown device 'tpu' (expected 'cpu', 'cuda' or 'cuda:N')")
    H.raises(function() local _ = flow.ToDevice {} end, "ToDevice", "device")
  end)

  it("MemmapSource with device = 'cpu' yields host batches", function()
    local dir = os.tmpname()
    os.remove(dir)
    T.TensorDict({ a = T.tensor({ 0, 1, 2, 3, 4 }) }, { 5 }):memmap(dir)
    local src = flow.MemmapSource { path = dir, batch_size = 2, device = "cpu" }
    src:open({})
    local seen = {}
    for b in src:iter({ seed = 0 }) do seen[#seen + 1] = b.a:totable() end
    src:close()
    assert.are.same({ { 0, 1 }, { 2, 3 }, { 4 } }, seen)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

-- A tensor whose storage says "device memory" (TD_STORAGE_DEVICE) over host bytes: it
-- exercises the routing and the refusals without a GPU. Nothing may read it as host
-- memory: the CPU kernels refuse it, and with no CUDA library nothing else runs.
describe("device routing", function()
  local saved
  local freed = 0
  local free_cb = ffi.cast("td_storage_free_fn", function(data) freed = freed + 1; ffi.C.free(data) end)
  ffi.cdef [[ void *malloc(size_t); void free(void *); ]]

  local function fake_device_tensor(n)
    local p = ffi.C.malloc(n * 4)
    local s = C.td_storage_new_external(C.TD_STORAGE_DEVICE, p, n * 4, C.TD_DEVICE_CUDA, 0, free_cb, nil)
    assert(s ~= nil)
    local shape = ffi.new("int64_t[1]", n)
    local h = C.td_tensor_from_storage(s, 0, 1, shape, nil, C.TD_FLOAT32)
    C.td_storage_release(s)
    return tensor.adopt(h)
  end

  before_each(function()
    saved = { device.watching, device.kernels, device.unavailable }
    device.watching = true -- as once the CUDA library is open
    device.kernels = nil
    device.unavailable = "test: no CUDA library"
    -- the storage's free callback is Lua: no compiled trace may be running when C
    -- calls it, so the JIT is off (and its traces flushed) for these tests
    jit.flush()
    jit.off()
  end)
  after_each(function()
    jit.on()
    device.watching, device.kernels, device.unavailable = saved[1], saved[2], saved[3]
  end)

  it("names both devices when an op mixes them", function()
    local d, h = fake_device_tensor(4), T.ones(4)
    assert.are.equal("cuda:0", d:device())
    H.raises(function() local _ = h:add(d) end,
      "add: expected all tensors on one device, but got cpu and cuda:0")
    H.raises(function() local _ = d + h end, "add: expected all tensors on one device, but got cuda:0 and cpu")
    H.raises(function() local _ = T.where(h:gt(0), d, h) end, "where: expected all tensors on one device")
    H.raises(function() local _ = T.cat({ h, d }) end,
      "cat: expected all tensors on one device, but got cpu and cuda:0")
    H.raises(function() local _ = T.matmul(d, h) end, "matmul: expected all tensors on one device")
    d:free()
    assert.are.equal(1, freed)
  end)

  it("routes device tensors to the CUDA kernels, which must be there", function()
    local d = fake_device_tensor(4)
    H.raises(function() local _ = d:add(1) end, "add: CUDA is not available (test: no CUDA library)")
    H.raises(function() local _ = d:sum(1) end, "sum: CUDA is not available")
    H.raises(function() local _ = d:exp() end, "exp: CUDA is not available")
    H.raises(function() local _ = d:clone() end, "clone: CUDA is not available")
    H.raises(function() local _ = d:uniform_() end, "uniform_: CUDA is not available")
    -- the ops given device twins later (clamp, mm, ..., std) route there too
    H.raises(function() local _ = d:clamp(0, 1) end, "clamp: CUDA is not available")
    H.raises(function() d:clamp_min_(0) end, "clamp_min_: CUDA is not available")
    H.raises(function() local _ = d:clamp_max(1) end, "clamp_max: CUDA is not available")
    H.raises(function() local _ = d:dot(d) end, "dot: CUDA is not available")
    H.raises(function() local _ = d:view(2, 2):mm(d:view(2, 2)) end, "mm: CUDA is not available")
    H.raises(function() local _ = d:view(1, 2, 2):bmm(d:view(1, 2, 2)) end, "bmm: CUDA is not available")
    H.raises(function() local _ = d:view(2, 2):mv(d[{ { 1, 2 } }]) end, "mv: CUDA is not available")
    H.raises(function() local _ = d:max(1) end, "max: CUDA is not available")
    H.raises(function() local _ = d:argmin() end, "argmin: CUDA is not available")
    H.raises(function() local _ = d:softmax(1) end, "softmax: CUDA is not available")
    H.raises(function() local _ = d:log_softmax(1, "float64") end, "to: CUDA is not available")
    H.raises(function() local _ = d:cumsum(1) end, "cumsum: CUDA is not available")
    H.raises(function() local _ = d:cumprod(1) end, "cumprod: CUDA is not available")
    H.raises(function() local _ = d:std() end, "std: CUDA is not available")
    H.raises(function() local _ = d:var(1) end, "var: CUDA is not available")
    H.raises(function() local _ = d:dot(T.ones(4)) end,
      "dot: expected all tensors on one device, but got cuda:0 and cpu")
    -- an op with no CUDA kernel: the CPU kernel refuses device memory itself
    H.raises(function() local _ = d:nonzero() end, "nonzero: the tensor is in device memory")
    d:free()
  end)

  it("keeps host ops on the CPU library while watching", function()
    local a = T.tensor({ 0, 1, 2, 3 }, "float32")
    assert.are.same({ 0, 2, 4, 6 }, (a + a):totable())
    assert.are.equal(6, a:sum())
    assert.are.same({ 0, 1, 0, 1, 2, 3 }, T.cat({ a[{ { 1, 2 } }], a }):totable())
  end)
end)

-- Device ops against the CPU's results (only with a device).
describe("on a CUDA device", function()
  local function on_device(name, fn)
    it(name, function()
      if not available then return pending("no CUDA device: " .. tostring(reason)) end
      fn()
    end)
  end

  local function same(cpu_result, dev_result, tol)
    assert.are.equal(cpu_result:dtype(), dev_result:dtype())
    assert.are.same(cpu_result:shape(), dev_result:shape())
    local ok, why = H.near(cpu_result:totable(), dev_result:cpu():totable(), tol or 0)
    assert(ok, why)
  end

  on_device("moves tensors both ways, strided ones included, and pins memory", function()
    local x = T.arange(12):reshape(3, 4):float()
    local d = x:cuda()
    assert.are.equal("cuda:0", d:device())
    same(x, d)
    same(x:t(), x:cuda():t():contiguous())
    local p = x:pin_memory()
    assert.is_true(p:is_pinned())
    same(x, p:to("cuda", { non_blocking = true }))
    T.cuda.synchronize()
    local td = T.TensorDict({ a = x, n = { b = T.ones(3) } }, { 3 }):to("cuda")
    assert.are.equal("cuda:0", td:device())
    same(x, td.a)
    assert.is_true(T.cuda.memory_stats().allocated_bytes > 0)
    T.cuda.empty_cache()
  end)

  on_device("elementwise ops, comparisons, where and masked_fill match the CPU", function()
    local a = T.randn(5, 4)
    local b = T.randn(4)
    local i = T.randint(-5, 5, { 5, 4 })
    for _, op in ipairs({ "add", "sub", "mul", "div", "maximum", "minimum", "eq", "lt", "ge" }) do
      same(a[op](a, b), a:cuda()[op](a:cuda(), b:cuda()), 1e-6)
      same(i[op](i, 2), i:cuda()[op](i:cuda(), 2), 1e-6)
    end
    same(i:floor_divide(3), i:cuda():floor_divide(3))
    same(i:remainder(3), i:cuda():remainder(3))
    H.raises(function() local _ = i:cuda():floor_divide(0) end, "integer division by zero")
    for _, op in ipairs({ "neg", "abs", "exp", "sqrt", "sigmoid", "round", "isnan" }) do
      same(a[op](a), a:cuda()[op](a:cuda()), 1e-5)
    end
    local m = a:gt(0)
    same(T.where(m, a, 0), T.where(m:cuda(), a:cuda(), 0))
    same(a:masked_fill(m, 7), a:cuda():masked_fill(m:cuda(), 7))
    same(a:masked_select(m), a:cuda():masked_select(m:cuda()))
    H.raises(function() local _ = a:cuda() + a end, "add: expected all tensors on one device, but got cuda:0 and cpu")
  end)

  on_device("reductions, gathers, joins and matmul match the CPU", function()
    local a = T.randn(6, 5, 3)
    local dev = a:cuda()
    for _, op in ipairs({ "sum", "mean", "max", "min", "prod" }) do
      assert(math.abs(a[op](a) - dev[op](dev)) <= 1e-4 * math.max(1, math.abs(a[op](a))))
    end
    for _, op in ipairs({ "sum", "mean", "amax", "amin", "prod" }) do
      same(a[op](a, 2), dev[op](dev, 2), 1e-4)
      same(a[op](a, { 1, 3 }, true), dev[op](dev, { 1, 3 }, true), 1e-4)
    end
    assert.are.equal(T.arange(10):sum(), T.arange(10):cuda():sum())
    local idx = T.tensor({ 3, 1, 3 }, "int64")
    same(a:index_select(1, idx), a:cuda():index_select(1, idx:cuda()))
    local g = T.randint(1, 5, { 6, 2, 3 })
    same(a:gather(2, g), a:cuda():gather(2, g:cuda()))
    same(T.cat({ a, a }, 2), T.cat({ a:cuda(), a:cuda() }, 2))
    same(T.stack({ a, a }, 1), T.stack({ a:cuda(), a:cuda() }, 1))
    local m, n = T.randn(7, 9), T.randn(9, 4)
    same(T.matmul(m, n), T.matmul(m:cuda(), n:cuda()), 1e-4)
    local batch = T.randn(3, 7, 9)
    same(T.matmul(batch, n), T.matmul(batch:cuda(), n:cuda()), 1e-4)
    local v = T.randn(9)
    same(T.matmul(m, v), T.matmul(m:cuda(), v:cuda()), 1e-4)
    local k = T.randint(-3, 3, { 4, 5 })
    same(T.matmul(k, k:t()), T.matmul(k:cuda(), k:t():cuda()))
  end)

  on_device("clamp, clamp_min and clamp_max match the CPU, in place too", function()
    local a = T.randn(6, 5)
    local i = T.randint(-300, 300, { 4, 3 }, "int16")
    same(a:clamp(-0.5, 0.5), a:cuda():clamp(-0.5, 0.5))
    same(a:t():clamp(-0.5), a:cuda():t():clamp(-0.5))
    same(a:clamp_min(0.25), a:cuda():clamp_min(0.25))
    same(a:clamp_max(-0.25), a:cuda():clamp_max(-0.25))
    same(a:clamp(1, -1), a:cuda():clamp(1, -1)) -- min > max: max everywhere
    same(a:clamp(0 / 0, 1), a:cuda():clamp(0 / 0, 1)) -- a NaN bound: NaN everywhere
    same(i:clamp(-100, 100), i:cuda():clamp(-100, 100))
    same(i:clamp(-0.5, 0.5), i:cuda():clamp(-0.5, 0.5)) -- promotes to float32
    same(i:clamp(-1e9, 1e9), i:cuda():clamp(-1e9, 1e9)) -- saturating bounds
    same(T.tensor({ true, false }):clamp(0, 1), T.tensor({ true, false }):cuda():clamp(0, 1))
    same(a:half():clamp(-1, 1), a:half():cuda():clamp(-1, 1))
    local d = a:cuda()
    assert.are.equal(d, d:clamp_(-0.1, 0.1))
    same(a:clone():clamp_(-0.1, 0.1), d)
    same(i:clone():clamp_min_(7), i:cuda():clamp_min_(7))
    H.raises(function() i:cuda():clamp_(0.5, 1) end,
      "clamp_: result type float32 can't be cast to the desired output type int16")
    H.raises(function() local _ = a:half():cuda():clamp(-1e6) end, "clamp", "float16")
  end)

  on_device("mm, bmm, mv and dot go through cuBLAS and match the CPU", function()
    local m, n, v = T.randn(7, 9), T.randn(9, 4), T.randn(9)
    same(m:mm(n), m:cuda():mm(n:cuda()), 1e-4)
    same(n:t():mm(m:t()), n:cuda():t():mm(m:cuda():t()), 1e-4)
    local b1, b2 = T.randn(3, 7, 9), T.randn(3, 9, 4)
    same(b1:bmm(b2), b1:cuda():bmm(b2:cuda()), 1e-4)
    same(m:mv(v), m:cuda():mv(v:cuda()), 1e-4)
    local w = T.randn(9)
    local cpu, dev = v:dot(w), v:cuda():dot(w:cuda())
    assert.are.equal("number", type(dev))
    assert(math.abs(cpu - dev) <= 1e-4 * math.max(1, math.abs(cpu)))
    local k = T.randint(-3, 3, { 4, 5 })
    same(k:mm(k:t()), k:cuda():mm(k:t():cuda()))
    same(m:double():mm(n:double()), m:double():cuda():mm(n:double():cuda()), 1e-12)
    H.raises(function() local _ = m:cuda():mm(v:cuda()) end,
      "mm: expected 2-D and 2-D tensors, but got shapes [7, 9] and [9]")
    H.raises(function() local _ = b1:cuda():bmm(T.randn(2, 9, 4):cuda()) end,
      "bmm: batch sizes differ: shapes [3, 7, 9] and [2, 9, 4]")
    H.raises(function() local _ = v:cuda():dot(m:cuda()) end, "dot: expected 1-D and 1-D tensors")
    H.raises(function() local _ = m:cuda():mm(n:double():cuda()) end,
      "mm: expected m1 and m2 to have the same dtype, but got: float32 != float64")
  end)

  on_device("max and min along a dim give the CPU's values and indices; argmax, argmin too", function()
    local a = T.randn(6, 50, 3)
    local dev = a:cuda()
    for _, op in ipairs({ "max", "min" }) do
      for _, dim in ipairs({ 1, 2, 3, -1 }) do
        local v, i = a[op](a, dim)
        local dv, di = dev[op](dev, dim)
        same(v, dv)
        same(i, di)
        v, i = a[op](a, dim, true)
        dv, di = dev[op](dev, dim, true)
        same(v, dv)
        same(i, di)
      end
    end
    for _, op in ipairs({ "argmax", "argmin" }) do
      assert.are.equal(a[op](a), dev[op](dev))
      same(a[op](a, 2), dev[op](dev, 2))
      same(a[op](a, 1, true), dev[op](dev, 1, true))
    end
    -- ties: the first position; NaN: the first NaN wins, as on the CPU
    local t = T.tensor({ { 1, 3, 3, 0 }, { 0 / 0, 2, 0 / 0, 5 } })
    for _, op in ipairs({ "max", "min" }) do
      local v, i = t[op](t, 2)
      local dv, di = t:cuda()[op](t:cuda(), 2)
      same(v, dv)
      same(i, di)
    end
    local long = T.randn(5000)
    long[4321] = 100
    assert.are.equal(4321, long:cuda():argmax())
    local ints = T.randint(-9, 9, { 4, 300 }, "int32")
    local v, i = ints:max(2)
    local dv, di = ints:cuda():max(2)
    same(v, dv)
    same(i, di)
    H.raises(function() local _ = T.empty(0, 3):cuda():max(1) end, "max: cannot reduce over dim 1 of size 0")
  end)

  on_device("softmax and log_softmax match the CPU along every dim", function()
    local a = T.randn(4, 33, 5) * 10
    local dev = a:cuda()
    for _, op in ipairs({ "softmax", "log_softmax" }) do
      for _, dim in ipairs({ 1, 2, 3 }) do
        same(a[op](a, dim), dev[op](dev, dim), 1e-6)
      end
      same(a:permute(3, 1, 2)[op](a:permute(3, 1, 2), 3), dev:permute(3, 1, 2)[op](dev:permute(3, 1, 2), 3), 1e-6)
      same(a:double()[op](a:double(), 2), dev:double()[op](dev:double(), 2), 1e-12)
      same(a:half()[op](a:half(), 2), dev:half()[op](dev:half(), 2), 1e-3)
      same(a[op](a, 2, "float64"), dev[op](dev, 2, "float64"), 1e-12)
    end
    H.raises(function() local _ = T.arange(4):cuda():softmax(1) end,
      "softmax: expected a floating tensor (float16, bfloat16, float32, float64), got int64")
    H.raises(function() local _ = dev:softmax(4) end, "softmax", "dim")
  end)

  on_device("cumsum and cumprod match the CPU, integers in int64", function()
    local a = T.randn(5, 40, 3)
    local dev = a:cuda()
    for _, op in ipairs({ "cumsum", "cumprod" }) do
      for _, dim in ipairs({ 1, 2, 3 }) do
        same(a[op](a, dim), dev[op](dev, dim), 1e-5)
      end
      same(a:transpose(1, 3)[op](a:transpose(1, 3), 2), dev:transpose(1, 3)[op](dev:transpose(1, 3), 2), 1e-5)
    end
    local i = T.randint(-4, 4, { 3, 30 }, "int8")
    same(i:cumsum(2), i:cuda():cumsum(2))
    same(i:cumprod(2), i:cuda():cumprod(2)) -- wraps in int64, as the CPU
    local b = T.tensor({ true, false, true })
    same(b:cumsum(1), b:cuda():cumsum(1))
    same(T.tensor(3.5):cumsum(1), T.tensor(3.5):cuda():cumsum(1))
  end)

  on_device("std and var follow the CPU's correction", function()
    local a = T.randn(6, 40, 3) * 3 + 100
    local dev = a:cuda()
    for _, op in ipairs({ "std", "var" }) do
      local cpu, d = a[op](a), dev[op](dev)
      assert(math.abs(cpu - d) <= 1e-5 * math.abs(cpu))
      same(a[op](a, 2), dev[op](dev, 2), 1e-4)
      same(a[op](a, { 1, 3 }, true), dev[op](dev, { 1, 3 }, true), 1e-4)
      same(a[op](a, 2, { unbiased = false }), dev[op](dev, 2, { unbiased = false }), 1e-4)
      same(a[op](a, 1, { correction = 3 }), dev[op](dev, 1, { correction = 3 }), 1e-4)
      same(a:double()[op](a:double(), 2), dev:double()[op](dev:double(), 2), 1e-10)
      -- n - correction <= 0: inf or NaN, as the CPU
      same(a[op](a, 1, { correction = 6 }), dev[op](dev, 1, { correction = 6 }))
    end
    H.raises(function() local _ = T.arange(4):cuda():std() end, "std", "int64")
    -- reductions with no device kernel say so
    H.raises(function() local _ = dev:norm() end, "norm: op 9 has no CUDA kernel")
    H.raises(function() local _ = dev:logsumexp(1) end, "logsumexp: op 12 has no CUDA kernel")
  end)

  on_device("random numbers follow the CPU's Philox stream", function()
    for _, dtype in ipairs({ "float32", "float64" }) do
      T.manual_seed(5)
      local cpu = T.empty({ 1000 }, dtype):uniform_()
      T.manual_seed(5)
      local dev = T.empty({ 1000 }, dtype):cuda():uniform_()
      same(cpu, dev)
      T.manual_seed(9)
      cpu = T.empty({ 999 }, dtype):normal_()
      T.manual_seed(9)
      dev = T.empty({ 999 }, dtype):cuda():normal_()
      same(cpu, dev, 1e-12)
    end
  end)
end)
