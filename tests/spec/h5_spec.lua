-- HDF5 files (docs/h5.md): T.from_h5 and td:to_h5 in Python tensordict's layout, read
-- lazily and by rows, atomic saves, clear errors; cross-checked value by value with h5py
-- 3 and Python tensordict where TD_PYTHON has h5py (pending otherwise).
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")

local has_h5 = require("tensordict.h5.lib").open() ~= nil

local function values(t) return t:to("float64"):tolist() end

describe("HDF5 files", function()
  if not has_h5 then
    pending("libtensordict_h5 is not built (install libhdf5-dev and run make)")
    return
  end
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  -- A TensorDict with every dtype, a nested container, a string.
  local function sample()
    local td = T.TensorDict({}, { 4 })
    for i, d in ipairs(T.dtypes) do
      td:set(d, T.arange(8):reshape(4, 2):add(i):remainder(2):to(d))
    end
    td:set({ "n", "m" }, T.arange(4, "int64"):mul(7))
    td:set_non_tensor("s", "h\u{e9}llo")
    return td
  end

  it("writes and reads back every dtype, nested groups and strings", function()
    local path = dir .. "/a.h5"
    local td = sample()
    assert.are.equal(td, td:to_h5(path))
    local h = T.from_h5(path)
    assert.are.same({ 4 }, h:batch_size())
    for _, d in ipairs(T.dtypes) do
      assert.are.equal(d, h:dtype(d))
      assert.are.same({ 4, 2 }, h:shape(d))
      assert.are.same(values(td:get(d)), values(h:get(d)))
    end
    assert.are.same({ 7, 14, 21, 28 }, h:get({ "n", "m" }):tolist())
    assert.are.equal("h\u{e9}llo", h:get("s"))
    assert.are.same({ 4 }, h:get("n"):batch_size())
    local back = h:to_tensordict()
    assert.is_true(T.is_tensordict(back))
    assert.are.same({ 4 }, back:batch_size())
    assert.are.equal("h\u{e9}llo", back:get("s"))
    assert.are.same(values(td:get("float32")), values(back:get("float32")))
  end)

  it("reads rows through hyperslabs: a number, a range, an index tensor", function()
    local path = dir .. "/rows.h5"
    T.TensorDict({ x = T.arange(10, "int64"), y = T.arange(20):reshape(10, 2) }, { 10 }):to_h5(path)
    local h = T.from_h5(path)
    local r = h[3]
    assert.are.same({}, r:batch_size())
    assert.are.equal(3, r:get("x"):item())
    local s = h[{ { 2, 4 } }]
    assert.are.same({ 3 }, s:batch_size())
    assert.are.same({ 2, 3, 4 }, s:get("x"):tolist())
    assert.are.same({ { 3, 4 }, { 5, 6 }, { 7, 8 } }, s:get("y"):tolist())
    assert.are.same({ 1, 3, 5 }, h[{ { 1, 5, 2 } }]:get("x"):tolist())
    assert.are.same({ 10, 1, 10 }, h[T.tensor({ 10, 1, -1 }, "int64")]:get("x"):tolist())
    assert.are.same({ 7, 8 }, h[{ 4 }]:get("y"):tolist())
    assert.are.same({ 9, 10 }, h:read_rows(9, 2):get("x"):tolist())
    assert.are.same({ 6, 2 }, h:read_index({ 6, 2 }):get("x"):tolist())
    assert.are.same(H.range(1, 10), h[{ "x" }]:tolist()) -- a key path, as td[{"a", "b"}]
    assert.are.same(0, h[{ { 5, 4 } }]:batch_size()[1])
    H.raises(function() return h[11] end, "index: 11 is out of range for a batch dim of size 10")
    H.raises(function() h:read_rows(10, 2) end, "read_rows: rows 10 .. +2 are outside 1 .. 10")
    H.raises(function() h:read_index({ 0 }) end, "read_index: row 0 is outside 1 .. 10")
  end)

  it("takes batch_size and group, and names the datasets that do not fit", function()
    local path = dir .. "/b.h5"
    T.TensorDict({ a = T.zeros(3, 2), g = T.TensorDict({ c = T.zeros(3, 2, 5) }, { 3, 2 }) }, { 3 }):to_h5(path)
    assert.are.same({ 3, 2 }, T.from_h5(path):batch_size())
    assert.are.same({ 3 }, T.from_h5(path, { batch_size = { 3 } }):batch_size())
    local g = T.from_h5(path, { group = "g" })
    assert.are.same({ 3, 2, 5 }, g:batch_size()) -- its own largest, as Python's auto_batch_size
    assert.are.same({ "c" }, g:keys())
    H.raises(function() T.from_h5(path, { batch_size = { 2 } }) end,
      "from_h5: batch_size [2] does not fit group /: its datasets do not all start with it: "
        .. "/a [3, 2], /g (group) [3, 2, 5]")
    H.raises(function() T.from_h5(path, { group = "nope" }) end, "from_h5: " .. path .. " has no group /nope")
  end)

  it("compresses and chunks on request", function()
    local path = dir .. "/c.h5"
    T.TensorDict({ a = T.arange(1000):reshape(100, 10) }, { 100 }):to_h5(path,
      { compression = "gzip", compression_opts = 9, chunks = 16 })
    local h = T.from_h5(path)
    assert.are.same({ 16, 10 }, h:chunks("a"))
    assert.are.same(values(T.arange(1000):reshape(100, 10)), values(h:get("a")))
    assert.are.same({ 991, 992 }, { unpack(values(h[{ { 100, 100 } }]:get("a"))[1], 1, 2) })
    T.TensorDict({ a = T.zeros(4) }, { 4 }):to_h5(path)
    assert.is_nil(T.from_h5(path):chunks("a"))
  end)

  it("saves atomically: a failed save leaves the previous file and no temporary", function()
    local path = dir .. "/d.h5"
    T.TensorDict({ a = T.ones(2) }, { 2 }):to_h5(path)
    local bad = T.TensorDict({ a = T.zeros(2) }, { 2 })
    bad:set_non_tensor("z", 3)
    H.raises(function() bad:to_h5(path) end,
      "to_h5: the non-tensor value at /z is 3: HDF5 files hold non-tensor strings only")
    assert.are.same({ 1, 1 }, T.from_h5(path):get("a"):tolist())
    assert.are.same({ "d.h5" }, H.output_lines("ls " .. dir))
  end)

  it("writes through r+ and refuses writes to a read-only file", function()
    local path = dir .. "/e.h5"
    T.TensorDict({ a = T.ones(2) }, { 2 }):to_h5(path)
    local ro = T.from_h5(path)
    H.raises(function() ro:set("b", T.ones(2)) end, "set: " .. path .. " is open read-only")
    ro:close() -- HDF5 opens a file once per process: read-only and read-write cannot mix
    local h = T.from_h5(path, { mode = "r+" })
    h:set("b", T.full({ 2 }, 3))
    h:set("note", "hi")
    h:close()
    local r = T.from_h5(path)
    assert.are.same({ "a", "b", "note" }, r:keys())
    assert.are.same({ 3, 3 }, r:get("b"):tolist())
    H.raises(function() h:get("a") end, "is closed")
  end)

  it("gives clear errors for bad arguments and damaged files", function()
    H.raises(function() T.from_h5(42) end, "from_h5: path must be a non-empty string, got 42")
    H.raises(function() T.from_h5(dir .. "/none.h5") end, "from_h5: open: " .. dir .. "/none.h5: no such readable file")
    H.write(dir .. "/text.h5", "not hdf5 at all")
    H.raises(function() T.from_h5(dir .. "/text.h5") end, "is not an HDF5 file (no HDF5 signature)")
    H.raises(function() T.from_h5(dir .. "/x.h5", { mode = "w" }) end, "from_h5: mode must be 'r' or 'r+', got 'w'")
    local td = T.TensorDict({ a = T.zeros(3) }, { 3 })
    H.raises(function() td:to_h5(dir .. "/f.h5", { compression = "lzf" }) end,
      "to_h5: compression must be 'gzip' or nil, got 'lzf'")
    H.raises(function() td:to_h5(dir .. "/f.h5", { compression = "gzip", compression_opts = 12 }) end,
      "to_h5: compression_opts must be a gzip level 0 .. 9, got 12")
    H.raises(function() td:to_h5(dir .. "/f.h5", { chunks = 0 }) end,
      "to_h5: chunks must be true or a positive number of rows per chunk, got 0")
    H.raises(function() td:to_h5("") end, "to_h5: path must be a non-empty string")
    H.raises(function() T.TensorDict({ ["a/b"] = T.zeros(3) }, { 3 }):to_h5(dir .. "/f.h5") end,
      "to_h5: key 'a/b' under / cannot name an HDF5 link")
    H.raises(function() T.from_h5(dir .. "/none.h5", { bogus = 1 }) end, "bogus")
    -- a truncated file: its contiguous data lies past the end
    local path = dir .. "/big.h5"
    T.TensorDict({ a = T.zeros(100000) }, { 100000 }):to_h5(path)
    H.sh("truncate -s 200000 " .. path)
    local ok, h = pcall(T.from_h5, path)
    if ok then
      H.raises(function() h:get("a") end, "get: /a: read: reading failed (a damaged or truncated file?)")
    else
      assert.truthy(tostring(h):find("tensordict: from_h5: ", 1, true))
    end
    H.sh("truncate -s 1000 " .. path)
    H.raises(function() T.from_h5(path) end, "from_h5: open: " .. path .. " cannot be opened (truncated or damaged?)")
  end)
end)

describe("HDF5 files with h5py and Python tensordict", function()
  local py = os.getenv("TD_PYTHON") or "python3"
  local has_h5py = has_h5 and H.sh(py .. " -c 'import h5py' >/dev/null 2>&1")
  if not has_h5py then
    pending("h5py is not installed where TD_PYTHON points (or libtensordict_h5 is not built)")
    return
  end
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  local function python(...)
    local p = io.popen(py .. " tests/interop/h5_interop.py " .. table.concat({ ... }, " ") .. " 2>&1")
    local out = p:read("*a")
    p:close()
    return out
  end

  it("reads what h5py writes: every dtype, nested groups, attributes, strings, gzip chunks, 0-dim, empty", function()
    python("write", dir)
    local h = T.from_h5(dir .. "/py.h5")
    assert.are.same({ 3 }, h:batch_size())
    assert.are.same({ { 0, 0.25 }, { 0.5, 0.75 }, { 1, 1.25 } }, values(h:get("f32")))
    assert.are.same({ 1.5, -2.25, 3e100 }, h:get("f64"):tolist())
    assert.are.same({ 0.5, -1, 65504 }, values(h:get("f16")))
    assert.are.equal("float16", h:dtype("f16"))
    assert.are.same({ -128, 0, 127 }, h:get("i8"):tolist())
    assert.are.same({ -32768, 1, 32767 }, h:get("i16"):tolist())
    assert.are.same({ -2 ^ 31, 2, 2 ^ 31 - 1 }, h:get("i32"):tolist())
    assert.are.equal("int64", h:dtype("i64"))
    assert.are.same({ 0, 7, 255 }, h:get("u8"):tolist())
    assert.are.same({ true, false, true }, h:get("b"):tolist())
    assert.are.equal("bool", h:dtype("b"))
    assert.are.same({ 2, 5 }, h:chunks("gz"))
    assert.are.same({ 10, 11, 12, 13, 14, 15, 16, 17, 18, 19 }, h[2]:get("gz"):tolist())
    assert.are.same({ 0, 10, 20 }, h:get({ "nested", "deep", "x" }):tolist())
    assert.are.equal("h\u{e9}llo", h:get("s"))
    assert.are.equal("abc", h:get("fixed"))
    assert.are.same({ title = "run 1", lr = 0.5 }, h:attrs())
    assert.are.same({ k = { 1, 2, 3 } }, h:attrs("nested"))
    local z = T.from_h5(dir .. "/zero.h5")
    assert.are.same({}, z:batch_size())
    assert.are.equal(2.5, z:get("scalar"):item())
    assert.are.same({ 3, 0 }, z:get("empty"):shape())
  end)

  it("writes what h5py and Python tensordict read, value by value", function()
    local td = T.TensorDict({}, { 2 })
    for i, d in ipairs(T.dtypes) do td:set(d, T.arange(4):reshape(2, 2):add(i):remainder(2):to(d)) end
    td:set({ "n", "m" }, T.tensor({ -1.5, 2.5 }, "float64"))
    td:set_non_tensor("s", "h\u{e9}")
    td:to_h5(dir .. "/lua.h5", { compression = "gzip", chunks = 1 })
    local got = json.decode(python("read", dir .. "/lua.h5"))
    assert.are.same({ 2 }, got.__batch_size__)
    for _, d in ipairs(T.dtypes) do
      local e = got[d]
      assert.are.same({ 2, 2 }, e.shape)
      assert.are.same({ 1, 2 }, e.chunks)
      assert.are.equal("gzip", e.compression)
      -- h5py reads bfloat16 (a 16-bit float with an 8-bit exponent) as float32
      assert.are.equal(d == "bfloat16" and "float32" or d, e.dtype)
      local want = values(td:get(d))
      if d == "bool" then want = td:get(d):tolist() end
      assert.are.same(want, e.values)
    end
    assert.are.same({ -1.5, 2.5 }, got["n/m"].values)
    assert.are.equal("h\u{e9}", got.s.values)
    assert.is_true(got.s.marker)
    T.TensorDict({ s = T.tensor(3.5, "float64"), e = T.zeros(0, 2) }, {}):to_h5(dir .. "/zero.h5")
    got = json.decode(python("read", dir .. "/zero.h5"))
    assert.are.same({}, got.s.shape)
    assert.are.equal(3.5, got.s.values)
    assert.are.same({ 0, 2 }, got.e.shape)
  end)

  it("names compound types and variable-length arrays instead of crashing", function()
    local path = dir .. "/c.h5"
    H.sh(py .. " -c \"import h5py, numpy as np; f = h5py.File('" .. path .. "', 'w'); "
      .. "f['c'] = np.zeros(2, dtype=[('x', 'i4'), ('y', 'f8')])\"")
    H.raises(function() T.from_h5(path) end,
      "from_h5: dataset /c: a compound type (2 fields) has no tensordict dtype: a container cannot hold it")
    path = dir .. "/v.h5"
    H.sh(py .. " -c \"import h5py, numpy as np; f = h5py.File('" .. path .. "', 'w'); "
      .. "d = f.create_dataset('v', (2,), dtype=h5py.vlen_dtype(np.int32)); d[0] = [1, 2]\"")
    H.raises(function() T.from_h5(path) end, "from_h5: dataset /v: a 16-byte variable-length array type has no")
    path = dir .. "/u.h5"
    H.sh(py .. " -c \"import h5py, numpy as np; f = h5py.File('" .. path .. "', 'w'); "
      .. "f['u'] = np.zeros(2, dtype=np.uint32)\"")
    H.raises(function() T.from_h5(path) end,
      "from_h5: dataset /u: an unsigned 32-bit integer type has no tensordict dtype")
  end)
end)
