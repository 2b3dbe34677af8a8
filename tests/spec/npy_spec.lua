-- npy_spec.lua: NumPy's files (core/store/npy.c, npz.c; lua/tensordict/tensor/npy.lua,
-- dict/npz.lua, flow/npy.lua): T.load_npy / t:save_npy (every dtype NumPy has, 0-dim,
-- empty, Fortran order as a transposed view, big-endian swapped, mapped read-only),
-- T.load_npz / td:save_npz (stored and deflated, nested keys), NpySource, the errors for
-- malformed files, and files read and written by numpy (TD_PYTHON with numpy).
local T = require("tensordict")
local H = require("helpers")
local dtypes = require("tensordict.tensor.dtype")

local dir
before_each(function() dir = H.tmpdir() end)
after_each(function() H.rmtree(dir) end)

local function write_bytes(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

local function read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- A version 1.0 .npy file from a header dict text and raw data bytes.
local function npy_bytes(dict, data)
  local body = dict .. "\n"
  local pad = (64 - (10 + #body) % 64) % 64
  body = dict .. string.rep(" ", pad) .. "\n"
  return "\147NUMPY\1\0" .. string.char(#body % 256, math.floor(#body / 256)) .. body .. (data or "")
end

local function dims(t)
  local out = {}
  for i = 1, t:dim() do out[i] = t:size(i) end
  return out
end

describe(".npy", function()
  it("round-trips every dtype NumPy has, with the header numpy writes", function()
    for _, name in ipairs(dtypes.list()) do
      local t = T.arange(0, 5, "int64"):view(2, 3):to(name)
      local path = ("%s/%s.npy"):format(dir, name)
      if name == "bfloat16" then
        H.raises(function() t:save_npy(path) end, "save_npy: bfloat16 has no NumPy dtype")
      else
        assert.are.equal(t, t:save_npy(path))
        local back = T.load_npy(path)
        assert.are.equal(name, back:dtype())
        assert.is_true(back:equal(t), name)
        assert.is_true(T.load_npy(path, { mmap = true }):equal(t), name)
      end
    end
    local bytes = read_bytes(dir .. "/float32.npy")
    assert.are.equal(128 + 24, #bytes)
    local dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    assert.are.equal("\147NUMPY\1\0\118\0" .. dict, bytes:sub(1, 10 + #dict))
    assert.are.equal("\n", bytes:sub(128, 128))
    assert.is_truthy(read_bytes(dir .. "/bool.npy"):find("'descr': '|b1'", 1, true))
    assert.is_truthy(read_bytes(dir .. "/uint8.npy"):find("'descr': '|u1'", 1, true))
  end)

  it("0-dim, empty and non-contiguous tensors; shapes as numpy spells them", function()
    T.tensor(2.5, "float64"):save_npy(dir .. "/s.npy")
    assert.is_truthy(read_bytes(dir .. "/s.npy"):find("'shape': (), }", 1, true))
    local s = T.load_npy(dir .. "/s.npy")
    assert.are.same({ 0, 2.5 }, { s:dim(), s:item() })
    T.zeros(0, 3):save_npy(dir .. "/e.npy")
    assert.are.same({ 0, 3 }, dims(T.load_npy(dir .. "/e.npy", { mmap = true })))
    T.arange(1, 3):save_npy(dir .. "/v.npy")
    assert.is_truthy(read_bytes(dir .. "/v.npy"):find("'shape': (3,), }", 1, true))
    local g = T.arange(1, 6):view(2, 3):t() -- saved in C order of its view
    g:save_npy(dir .. "/t.npy")
    assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, T.load_npy(dir .. "/t.npy"):totable())
  end)

  it("maps read-only, O(1), and reads Fortran order as a transposed view and big-endian swapped", function()
    T.arange(1, 6, "int32"):view(2, 3):save_npy(dir .. "/m.npy")
    local m = T.load_npy(dir .. "/m.npy", { mmap = true })
    H.raises(function() m:fill_(0) end, "read-only")
    -- column-major data 1..6 of shape (2, 3): rows {1, 3, 5}, {2, 4, 6}
    local data = ""
    for i = 1, 6 do data = data .. string.char(i, 0, 0, 0) end
    write_bytes(dir .. "/f.npy", npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", data))
    for _, mmap in ipairs({ false, true }) do
      local f = T.load_npy(dir .. "/f.npy", { mmap = mmap })
      assert.are.same({ { 1, 3, 5 }, { 2, 4, 6 } }, f:totable())
      assert.is_false(f:is_contiguous())
      assert.is_true(f:t():is_contiguous())
    end
    write_bytes(dir .. "/b.npy", npy_bytes("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", "\0\1\1\0"))
    assert.are.same({ 1, 256 }, T.load_npy(dir .. "/b.npy"):totable())
    H.raises(function() T.load_npy(dir .. "/b.npy", { mmap = true }) end,
      "load_npy: '" .. dir .. "/b.npy' is big-endian: it cannot be mapped (load it without mmap")
    -- '=' is the machine's order; a 2.0 header has a 4-byte length
    local v2 = "{'descr': '=f8', 'fortran_order': False, 'shape': (1,), }"
    local body = v2 .. string.rep(" ", (64 - (12 + #v2 + 1) % 64) % 64) .. "\n"
    write_bytes(dir .. "/v2.npy", "\147NUMPY\2\0" .. string.char(#body, 0, 0, 0) .. body .. "\0\0\0\0\0\0\240\63")
    assert.are.same({ 1 }, T.load_npy(dir .. "/v2.npy"):totable())
  end)

  it("refuses malformed files and dtypes it has no tensor for, naming what is wrong", function()
    local function bad(name, bytes, ...)
      write_bytes(dir .. "/" .. name, bytes)
      H.raises(function() T.load_npy(dir .. "/" .. name) end, ...)
    end
    local ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
    bad("magic.npy", "PK\3\4 not numpy", "load_npy: '" .. dir .. "/magic.npy': header: not a .npy file")
    bad("version.npy", "\147NUMPY\9\0\0\0", "header: format version 9.0 is not one of 1.0, 2.0, 3.0")
    bad("cut.npy", npy_bytes(ok_dict):sub(1, 40), "header: truncated inside the header")
    bad("data.npy", npy_bytes(ok_dict, "\0\0\128\63"),
      "load_npy: '" .. dir .. "/data.npy' is truncated: its header says 8 bytes of data, the file holds 4")
    bad("complex.npy", npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", ("\0"):rep(8)),
      "dtype '<c8' (NumPy kind 'c') has no tensor dtype here")
    bad("str.npy", npy_bytes("{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }", ("\0"):rep(12)),
      "dtype '<U3' (NumPy kind 'U') has no tensor dtype here")
    bad("f16x.npy", npy_bytes("{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", ("\0"):rep(16)),
      "dtype '<f16' (NumPy kind 'f', 16 bytes) has no tensor dtype here")
    bad("rec.npy", npy_bytes("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", ("\0"):rep(4)),
      "a structured dtype (fields) has no tensor dtype here")
    bad("key.npy", npy_bytes("{'descr': '<f4', 'order': False, 'shape': (1,), }", ("\0"):rep(4)),
      "unknown key 'order' in the header")
    bad("noshape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, }"), "no 'shape' in the header")
    bad("shape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }"),
      "shape is not a tuple of at most 16 non-negative integers")
    bad("huge.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
      "the shape is too large")
    H.raises(function() T.load_npy(dir .. "/none.npy") end, "load_npy: cannot open '" .. dir .. "/none.npy'")
    H.raises(function() T.load_npy(dir) end, "is not a regular file")
    H.raises(function() T.load_npy(3) end, "load_npy: path must be a non-empty string, got 3")
    H.raises(function() T.load_npy(dir .. "/x.npy", { map = true }) end, "load_npy")
    H.raises(function() T.ones(2):save_npy(dir .. "/no/such/dir/x.npy") end, "save_npy: cannot create a temporary")
  end)
end)

describe(".npz", function()
  it("round-trips a container, stored or deflated, nested keys joined with '/'", function()
    local td = T.TensorDict({ x = T.arange(1, 12, "float32"):view(3, 4), n = { y = T.arange(1, 3, "int16") },
      flag = T.tensor(true) }, {})
    for _, compressed in ipairs({ false, true }) do
      local path = ("%s/a%s.npz"):format(dir, tostring(compressed))
      assert.are.equal(td, td:save_npz(path, { compressed = compressed, fsync = false }))
      local back = T.load_npz(path)
      assert.are.same({ "flag", "n", "x" }, back:sorted_keys())
      assert.is_true(back.x:equal(td.x) and back.n.y:equal(td.n.y) and back.flag:item() == true)
      assert.are.equal("int16", back.n.y:dtype())
    end
    local z = T.zeros(1000)
    T.TensorDict({ z = z }, {}):save_npz(dir .. "/s.npz")
    T.TensorDict({ z = z }, {}):save_npz(dir .. "/c.npz", { compressed = true })
    assert.is_true(#read_bytes(dir .. "/c.npz") < #read_bytes(dir .. "/s.npz") / 10)
    local batched = T.load_npz(dir .. "/s.npz", { batch_size = { 1000 } })
    assert.are.same({ 1000 }, batched:batch_size())
    T.TensorDict({}, {}):save_npz(dir .. "/empty.npz")
    assert.are.same({}, T.load_npz(dir .. "/empty.npz"):keys())
  end)

  it("names what is wrong with an archive or a value", function()
    local td = T.TensorDict({ x = T.arange(1, 4, "int32") }, {})
    td:save_npz(dir .. "/a.npz")
    local bytes = read_bytes(dir .. "/a.npz")
    -- a data byte changed: the CRC-32 no longer matches
    local at = bytes:find("\1\0\0\0\2\0\0\0", 1, true)
    write_bytes(dir .. "/crc.npz", bytes:sub(1, at - 1) .. "\9" .. bytes:sub(at + 1))
    H.raises(function() T.load_npz(dir .. "/crc.npz") end,
      "load_npz: '" .. dir .. "/crc.npz': member 'x.npy' is damaged (its CRC-32 does not match)")
    write_bytes(dir .. "/cut.npz", bytes:sub(1, #bytes - 30))
    H.raises(function() T.load_npz(dir .. "/cut.npz") end, "is not a readable .npz")
    write_bytes(dir .. "/plain.npz", "just text")
    H.raises(function() T.load_npz(dir .. "/plain.npz") end,
      "no end of central directory record (truncated, or not a zip file)")
    H.raises(function() T.TensorDict({ s = "text" }, {}):save_npz(dir .. "/s.npz") end,
      "save_npz: key 's' holds 'text'; an .npz archive holds arrays")
    H.raises(function() T.TensorDict({ b = T.ones(1, "bfloat16") }, {}):save_npz(dir .. "/b.npz") end,
      "save_npy: bfloat16 has no NumPy dtype")
    assert.is_false(H.exists(dir .. "/b.npz"))
    H.raises(function() T.load_npz(dir .. "/none.npz") end, "load_npz: cannot open")
  end)
end)

describe("NpySource", function()
  it("yields batches of rows of the files, one key each, views or shuffled copies", function()
    T.arange(1, 10, "float32"):save_npy(dir .. "/x.npy")
    T.arange(1, 20):view(10, 2):save_npy(dir .. "/y.npy")
    local flow = T.flow
    local src = flow.NpySource { paths = { x = dir .. "/x.npy", y = dir .. "/y.npy" }, batch_size = 4 }
    assert.are.same({ "x", "y" }, src:keys())
    assert.are.equal(10, src:len())
    local out = flow.run(src, nil, flow.Collect {})
    assert.are.same({ 4, 4, 2 }, { #out[1], #out[2], #out[3] })
    assert.are.same({ { 17, 18 }, { 19, 20 } }, out[3].y:totable())
    local shuffled = flow.run(flow.NpySource { paths = { x = dir .. "/x.npy" }, batch_size = 10, shuffle = true,
      seed = 3 }, nil, flow.Collect {})
    local xs = shuffled[1].x:totable()
    table.sort(xs)
    assert.are.same(T.arange(1, 10, "float32"):totable(), xs)
    assert.are.same({ type = "NpySource", paths = { x = dir .. "/x.npy" }, batch_size = 2 },
      flow.build(flow.NpySource { paths = { x = dir .. "/x.npy" }, batch_size = 2 }:spec()):spec())
    T.arange(1, 3):save_npy(dir .. "/short.npy")
    T.tensor(1):save_npy(dir .. "/scalar.npy")
    H.raises(function()
      flow.NpySource { paths = { x = dir .. "/x.npy", s = dir .. "/short.npy" }, batch_size = 2 }:open()
    end,
      "NpySource: '" .. dir .. "/x.npy' (key x) has 10 rows, '" .. dir .. "/short.npy' (key s) 3")
    H.raises(function() flow.NpySource { paths = { s = dir .. "/scalar.npy" }, batch_size = 2 }:open() end,
      "(key s) is a 0-dim array; rows are taken along the first dim")
    H.raises(function() flow.NpySource { paths = {}, batch_size = 2 } end, "NpySource: paths is empty")
    H.raises(function() flow.NpySource { paths = { x = dir .. "/none.npy" }, batch_size = 2 }:open() end,
      "NpySource: load_npy: cannot open")
  end)
end)

describe("with numpy", function()
  local py = os.getenv("TD_PYTHON") or os.getenv("TD_TORCH_PYTHON") or "python3"
  it("reads what numpy writes and numpy reads what this writes, value by value", function()
    if not H.sh(py .. " -c 'import numpy' >/dev/null 2>&1") then
      pending("numpy not installed (TD_PYTHON): .npy and .npz files are not cross-checked")
      return
    end
    local names = {}
    for _, name in ipairs(dtypes.list()) do
      if name ~= "bfloat16" then
        names[#names + 1] = name
        T.arange(-2, 2, "int64"):view(5, 1):expand(5, 2):to(name):save_npy(("%s/ours_%s.npy"):format(dir, name))
      end
    end
    T.TensorDict({ a = T.arange(1, 5, "float64"), n = { b = T.ones(2, 2, "uint8") } }, {})
      :save_npz(dir .. "/ours.npz", { compressed = true })
    H.write(dir .. "/check.py", [==[
import sys, numpy as np
d, names = sys.argv[1], sys.argv[2].split(",")
bad = []
for name in names:
    a = np.load(f"{d}/ours_{name}.npy")
    want = np.repeat(np.arange(-2, 3).reshape(5, 1), 2, 1).astype(name)
    if a.dtype != want.dtype or not np.array_equal(a, want):
        bad.append(f"{name}: {a.dtype} {a.tolist()}")
    np.save(f"{d}/theirs_{name}.npy", np.asfortranarray(want.astype(want.dtype.newbyteorder(">"))))
z = np.load(f"{d}/ours.npz")
if sorted(z.files) != ["a", "n/b"] or z["a"].tolist() != [1, 2, 3, 4, 5] or z["n/b"].dtype != np.uint8:
    bad.append(f"npz: {z.files}")
np.savez(f"{d}/theirs.npz", x=np.arange(3, dtype=np.int16), y=np.eye(2))
np.savez_compressed(f"{d}/theirs_c.npz", x=np.arange(3, dtype=np.int16), y=np.eye(2))
print("ok" if not bad else "; ".join(bad))
]==])
    local out = H.output_lines(("%s %s/check.py %s %s 2>&1"):format(py, dir, dir, table.concat(names, ",")))
    assert.are.same({ "ok" }, out)
    for _, name in ipairs(names) do
      local want = T.arange(-2, 2, "int64"):view(5, 1):expand(5, 2):to(name)
      local back = T.load_npy(("%s/theirs_%s.npy"):format(dir, name)) -- Fortran order, big-endian
      assert.are.equal(name, back:dtype())
      assert.is_true(back:equal(want), name)
    end
    for _, f in ipairs({ "theirs.npz", "theirs_c.npz" }) do
      local z = T.load_npz(dir .. "/" .. f)
      assert.are.same({ 0, 1, 2 }, z.x:totable())
      assert.are.equal("int16", z.x:dtype())
      assert.are.same({ { 1, 0 }, { 0, 1 } }, z.y:totable())
    end
  end)
end)
