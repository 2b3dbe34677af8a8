-- TensorDicts on disk: Python tensordict's memmap folders and consolidated files,
-- atomic saves (their SIGKILL tests are in crash_safety_spec), validation, and interop
-- with Python tensordict where it is installed (skipped otherwise).
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")

local tmpdir, sh = H.tmpdir, H.sh

local DTYPES = { "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
  "float32", "float64" }

-- The container td_interop.py makes (the same values, built here).
local function sample()
  local src = {}
  for i, name in ipairs(DTYPES) do
    local t = (T.arange(0, 5):view(2, 3) % 3) - 1 + (i - 1)
    src[name] = t:to(name)
  end
  src.nested = { x = T.arange(0, 7, "float32"):view(2, 4), deep = { y = T.tensor({ { 7 }, { 8 } }, "int64") } }
  src["odd key/with%chars: *?"] = T.tensor({ 1.5, -2.5 })
  src.empty = T.zeros(2, 0)
  src.text = "hello"
  src.number = 42
  local td = T.TensorDict(src, { 2 })
  td:set({ "nested", "note" }, "inner")
  return td
end

-- { ["a.b"] = {dtype =, shape =, values =} | {data =} } for every leaf.
local function leaves_of(td)
  local out = {}
  for _, key in ipairs(td:keys({ include_nested = true, leaves_only = true })) do
    local v = td:get(key)
    local path = type(key) == "table" and table.concat(key, ".") or key
    if T.is_tensor(v) then
      out[path] = { dtype = v:dtype(), shape = v:shape(), values = v:to("float64"):reshape(-1):totable() }
    else
      out[path] = { data = v }
    end
  end
  return out
end

local function assert_same_leaves(expected, td)
  local got = leaves_of(td)
  for k, e in pairs(expected) do
    assert.is_not_nil(got[k], "missing key " .. k)
    if e.data ~= nil then
      assert.are.same(e.data, got[k].data, k)
    else
      assert.are.equal(e.dtype, got[k].dtype, k)
      assert.are.same(e.shape, got[k].shape, k)
      H.assert_near(e.values, got[k].values, 0)
    end
  end
  for k in pairs(got) do assert.is_not_nil(expected[k], "extra key " .. k) end
end

describe("memmap", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("saves and loads every dtype, nesting, non-tensor values, odd keys and empty leaves", function()
    local td = sample()
    local expected = leaves_of(td)
    local m = td:memmap(dir .. "/td")
    assert.is_true(m:is_memmap())
    assert.are.equal(dir .. "/td", m:memmap_prefix())
    assert.is_true(m:is_locked())
    assert_same_leaves(expected, m)
    local loaded = T.load_memmap(dir .. "/td")
    assert.are.same({ 2 }, loaded:batch_size())
    assert.is_true(loaded:is_locked())
    assert_same_leaves(expected, loaded)
    assert.are.same({ 2 }, T.load(dir .. "/td/nested"):batch_size())
    assert.are.same({ { 7 }, { 8 } }, T.load(dir .. "/td/nested/deep").y:totable())
  end)

  it("loads the folder Python tensordict wrote (tests/fixtures/tensordict-mmap-example)", function()
    local td = T.load_memmap("tests/fixtures/tensordict-mmap-example")
    assert.are.same({ 2, 1 }, td:batch_size())
    assert.are.same({ 2, 1 }, td.nested:batch_size())
    assert.are.same({ { 1 }, { 2 } }, td.nested:get("int64"):totable())
    assert.are.equal("int64", td.nested:get("int64"):dtype())
    assert.are.equal("bfloat16", td.nested:get("bfloat16"):dtype())
    assert.are.same({ { 1 }, { 1 } }, td.nested:get("bfloat16"):to("float32"):totable())
    assert.are.same({ "a string!" }, td.nested:get("string"))
    local nested = T.load_memmap("tests/fixtures/tensordict-mmap-example/nested")
    assert.are.same({ { 1 }, { 2 } }, nested:get("int64"):totable())
  end)

  it("mode r refuses writes with a Lua error; r+ writes reach the files after sync", function()
    sample():memmap(dir .. "/td")
    local ro = T.load_memmap(dir .. "/td", { mode = "r" })
    H.raises(function() ro.float32:fill_(1) end, "read-only")
    H.raises(function() ro[1] = 0 end, "read-only")
    local rw = T.load_memmap(dir .. "/td", { mode = "r+" })
    rw.float32:fill_(9)
    rw[{ { 2, 2 } }] = 3
    rw:sync()
    local again = T.load_memmap(dir .. "/td")
    assert.are.same({ { 9, 9, 9 }, { 3, 3, 3 } }, again.float32:totable())
  end)

  it("another process's writes through r+ are seen by this one's mapping after its sync", function()
    T.TensorDict({ a = T.zeros(4) }, { 4 }):memmap(dir .. "/shared")
    local mine = T.load_memmap(dir .. "/shared") -- read-only here, shared mapping
    local script = ([[package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
      local T = require("tensordict")
      local td = T.load_memmap("%s", { mode = "r+" })
      td.a[{ { 2, 3 } }] = 5
      td:sync()]]):format(dir .. "/shared")
    assert.is_true(sh("luajit '" .. H.write(dir .. "/writer.lua", script) .. "'"))
    assert.are.same({ 0, 5, 5, 0 }, mine.a:totable())
  end)

  it("memmap_like preallocates zeros that batches fill by index assignment", function()
    local proto = T.TensorDict({ obs = T.ones(4, 3), act = T.ones(4, "int64") }, { 4 })
    local buf = proto:memmap_like(dir .. "/buf")
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } }, buf.obs:totable())
    buf[{ { 2, 3 } }] = T.TensorDict({ obs = T.full({ 2, 3 }, 5), act = T.tensor({ 7, 8 }, "int64") }, { 2 })
    buf:sync()
    local back = T.load_memmap(dir .. "/buf")
    assert.are.same({ 0, 7, 8, 0 }, back.act:totable())
    assert.are.same({ 5, 5, 5 }, back.obs[3]:totable())
  end)

  it("memmap_ moves the leaves into files in place; leaves read before stay valid", function()
    local td = T.TensorDict({ a = T.arange(1, 4) }, { 4 })
    local before = td.a
    assert.is_false(td:is_memmap())
    assert.are.equal(td, td:memmap_(dir .. "/inplace"))
    assert.is_true(td:is_memmap())
    assert.are.same({ 1, 2, 3, 4 }, td.a:totable())
    assert.are.same({ 1, 2, 3, 4 }, before:totable())
    assert.are.same({ 1, 2, 3, 4 }, T.load_memmap(dir .. "/inplace").a:totable())
  end)

  it("existsok = false refuses an existing folder; the default replaces it", function()
    local td = T.TensorDict({ a = T.zeros(2) }, { 2 })
    td:memmap(dir .. "/x")
    H.raises(function() td:memmap(dir .. "/x", { existsok = false }) end, "exists")
    T.TensorDict({ a = T.ones(2) }, { 2 }):memmap(dir .. "/x")
    assert.are.same({ 1, 1 }, T.load_memmap(dir .. "/x").a:totable())
  end)

  it("refuses bad arguments with clear errors", function()
    H.raises(function() T.load_memmap(dir .. "/absent") end, "load_memmap", "absent")
    H.raises(function() T.load_memmap(dir, { mode = "w" }) end, "mode must be 'r' or 'r+'")
    H.raises(function() T.load_memmap(dir, { device = "tpu" }) end,
      "load_memmap: unknown device 'tpu' (expected 'cpu', 'cuda' or 'cuda:N')")
    H.raises(function() T.load_memmap(dir, { speed = 1 }) end, "unknown option 'speed'")
    local td = T.TensorDict({ a = T.zeros(2) }, { 2 })
    H.raises(function() td:memmap(3) end, "memmap: the prefix must be a non-empty string, got 3")
    H.raises(function() td:memmap(dir .. "/y", { num_threads = -1 }) end, "num_threads")
    H.raises(function() T.save(3, dir) end, "save: expected a TensorDict, got 3")
  end)

  it("validates what it loads: bad JSON, unknown dtypes, short files, escaping keys", function()
    local function folder(meta, files)
      local d = dir .. "/bad" .. tostring(math.random(1e9))
      sh("mkdir -p '" .. d .. "'")
      H.write(d .. "/meta.json", meta)
      for name, bytes in pairs(files or {}) do H.write(d .. "/" .. name, bytes) end
      return d
    end
    local head = '"shape": [2], "device": "cpu", "_type": "<class \'tensordict._td.TensorDict\'>"'
    local function leaf(shape, dtype)
      return ('{"a": {"device": "cpu", "shape": %s, "dtype": "torch.%s", "is_nested": false}, ')
        :format(shape, dtype)
    end
    H.raises(function() T.load_memmap(folder("{not json")) end, "meta.json")
    H.raises(function()
      T.load_memmap(folder(leaf("[2]", "complex64") .. head .. "}",
        { ["a.memmap"] = string.rep("\0", 16) }))
    end, "meta.json", "complex64")
    H.raises(function()
      T.load_memmap(folder(leaf("[2, 4]", "float32") .. head .. "}",
        { ["a.memmap"] = string.rep("\0", 8) }))
    end, "a.memmap")
    H.raises(function()
      T.load_memmap(folder(leaf("[-2]", "float32") .. head .. "}"))
    end, "meta.json", "shape")
    H.raises(function()
      T.load_memmap(folder('{"a": {"device": "cpu", "dtype": "torch.float32", "is_nested": false}, ' .. head .. "}"))
    end, "meta.json", "shape")
    H.raises(function()
      T.load_memmap(folder('{"..": {"type": "TensorDict"}, ' .. head .. "}"))
    end, "load_memmap", "'..'")
  end)
end)

describe("consolidate", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("writes one file that maps back with every leaf", function()
    local td = sample()
    local expected = leaves_of(td)
    assert.are.equal(td, td:consolidate(dir .. "/one.td"))
    local back = T.from_consolidated(dir .. "/one.td")
    assert.are.same({ 2 }, back:batch_size())
    assert_same_leaves(expected, back)
    H.raises(function() T.from_consolidated(dir .. "/absent.td") end, "from_consolidated", "absent")
  end)

  it("writes strided leaves, larger than its 8 MiB write chunk or not, as their contiguous copies", function()
    local big = T.arange(0, 4096 * 1024 - 1, "float32"):view(4096, 1024):transpose(1, 2) -- 16 MiB
    local long_rows = T.arange(0, 2 * 3000000 - 1, "float32"):view(3000000, 2):transpose(1, 2) -- 12 MiB rows
    local small = T.arange(0, 14, "int16"):view(3, 5):transpose(1, 2) -- 30 bytes, then padding
    local cube = T.arange(0, 23, "float64"):view(2, 3, 4):permute(3, 1, 2)
    assert.is_false(big:is_contiguous() or long_rows:is_contiguous() or small:is_contiguous())
    local function save(f, file)
      T.TensorDict({ a = f(small), b = f(big), c = f(cube), d = f(long_rows), e = f(small) }, {})
        :consolidate(dir .. "/" .. file)
      return H.read(dir .. "/" .. file)
    end
    local strided = save(function(t) return t end, "strided.td")
    local contiguous = save(function(t) return t:contiguous() end, "contiguous.td")
    assert.are.equal(#contiguous, #strided)
    assert.is_true(contiguous == strided, "the files differ")
    local back = T.from_consolidated(dir .. "/strided.td")
    assert.are.equal(big[{ 1000, 4000 }], back.b[{ 1000, 4000 }])
    assert.are.equal(long_rows[{ 2, 2999999 }], back.d[{ 2, 2999999 }])
    back:free()
  end)

  it("without a filename gives an in-memory copy with the same leaves", function()
    local td = sample()
    assert_same_leaves(leaves_of(td), td:consolidate())
  end)
end)

describe("what one side writes, the other reads", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("an empty leaf with a dim past 2^53 saves and loads with that dim exactly", function()
    local td = T.TensorDict({ a = T.zeros(0, 2 ^ 53 + 2), b = T.zeros(0, 2 ^ 59 + 2 ^ 40) }, {})
    td:memmap(dir .. "/td")
    local back = T.load_memmap(dir .. "/td")
    assert.are.same(td.a:shape(), back.a:shape())
    assert.are.same(td.b:shape(), back.b:shape())
    assert.is_truthy(H.read(dir .. "/td/meta.json"):find("576461851815051264", 1, true))
  end)

  it("a NaN non-tensor value from a consolidated file saves as a memmap and loads back", function()
    T.TensorDict({ a = T.zeros(2), x = 12345.5 }, {}):consolidate(dir .. "/c.bin")
    -- Python writes NaN as the literal NaN; the same length keeps the file's offsets
    local bytes = H.read(dir .. "/c.bin"):gsub("12345%.5", "NaN    ")
    H.write(dir .. "/nan.bin", bytes)
    local td = T.from_consolidated(dir .. "/nan.bin")
    assert.is_true(td.x ~= td.x)
    td:memmap(dir .. "/td")
    local x = T.load_memmap(dir .. "/td").x
    assert.is_true(x ~= x)
    td:consolidate(dir .. "/again.bin")
    x = T.from_consolidated(dir .. "/again.bin").x
    assert.is_true(x ~= x)
  end)
end)

describe("interop with Python tensordict", function()
  local py = os.getenv("TD_PYTHON") or "python3"
  local has_python = sh(py .. " -c 'import tensordict' >/dev/null 2>&1")
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  local function python(cmd, path)
    local p = io.popen(("%s tests/interop/td_interop.py %s '%s'"):format(py, cmd, path))
    local out = p:read("*a")
    p:close()
    return out
  end

  local function check_against_python(out)
    local got = json.decode(out)
    assert.are.same({ 2 }, got.batch_size)
    local mine = leaves_of(sample())
    for k, e in pairs(got.leaves) do
      assert.is_not_nil(mine[k], "python has key " .. k)
      if e.data ~= nil then
        assert.are.same(mine[k].data, e.data, k)
      else
        assert.are.equal(mine[k].dtype, e.dtype, k)
        assert.are.same(mine[k].shape, e.shape, k)
        H.assert_near(mine[k].values, e.values, 0)
      end
    end
    for k in pairs(mine) do assert.is_not_nil(got.leaves[k], "python lacks key " .. k) end
  end

  if not has_python then
    pending("python tensordict not installed: folders written here and there are not cross-checked")
    return
  end

  it("a folder written here loads in Python with the same values", function()
    sample():memmap(dir .. "/lua")
    check_against_python(python("read", dir .. "/lua"))
  end)

  it("a folder written by Python loads here with the same values", function()
    python("write", dir .. "/py")
    assert_same_leaves(leaves_of(sample()), T.load_memmap(dir .. "/py"))
  end)

  it("consolidated files cross both ways", function()
    sample():consolidate(dir .. "/lua.td")
    check_against_python(python("read_consolidated", dir .. "/lua.td"))
    python("write_consolidated", dir .. "/py.td")
    assert_same_leaves(leaves_of(sample()), T.from_consolidated(dir .. "/py.td"))
  end)
end)

describe("non-regular files in a memmap folder", function()
  -- Each load runs in a child under `timeout`, so a regression fails instead of hanging.
  local function load_in_child(code)
    local script = H.tmpname()
    H.write(script, "package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path\n"
      .. "local T = require('tensordict')\n" .. code)
    local p = io.popen("timeout 20 luajit " .. script .. " 2>&1; echo \"rc=$?\"")
    local out = p:read("*a")
    p:close()
    os.remove(script)
    return out
  end

  it("refuses a FIFO in place of meta.json, a leaf file or a mapped file, without blocking", function()
    local dir = H.tmpdir()
    T.TensorDict({ a = T.arange(1, 4, "float32") }, { 4 }):memmap(dir .. "/td")
    os.remove(dir .. "/td/a.memmap")
    assert.is_true(H.sh("mkfifo " .. dir .. "/td/a.memmap"))
    local out = load_in_child(("print(pcall(T.load_memmap, %q))"):format(dir .. "/td"))
    assert.is_truthy(out:find("false", 1, true) and out:find("a.memmap", 1, true), out)
    assert.is_truthy(out:find("not a regular file", 1, true), out)
    assert.is_truthy(out:find("rc=0", 1, true), out)
    os.remove(dir .. "/td/meta.json")
    assert.is_true(H.sh("mkfifo " .. dir .. "/td/meta.json"))
    out = load_in_child(("print(pcall(T.load_memmap, %q))"):format(dir .. "/td"))
    assert.is_truthy(out:find("meta.json", 1, true) and out:find("not a regular file", 1, true), out)
    assert.is_truthy(out:find("rc=0", 1, true), out)
    assert.is_true(H.sh("mkfifo " .. dir .. "/fifo"))
    out = load_in_child(("print(pcall(T.from_file, %q, {4}, 'float32', 'r'))"):format(dir .. "/fifo"))
    assert.is_truthy(out:find("false", 1, true) and out:find("rc=0", 1, true), out)
    H.rmtree(dir)
  end)
end)
