-- flow.MemmapSource, flow.MemmapSink and flow.ReplayBuffer: batches of Python-written
-- folders, appends with exact trimmed shapes, atomic commits (abort, existsok, SIGKILL
-- at random moments), spec round trips, the ring's wrap-around and seeded sampling.
local T = require("tensordict")
local H = require("helpers")
local flow = require("tensordict.flow")
local memmap_nodes = require("tensordict.flow.memmap")

local MemmapSource = flow.MemmapSource or memmap_nodes.MemmapSource
local MemmapSink = flow.MemmapSink or memmap_nodes.MemmapSink
local ReplayBuffer = flow.ReplayBuffer or memmap_nodes.ReplayBuffer

local tmpdir, sh, read_file, ls_a, range = H.tmpdir, H.sh, H.read, H.ls_a, H.range

-- The size in bytes of a file (nil when absent): the files here are small enough to read.
local function file_size(path)
  local s = read_file(path)
  return s and #s
end

-- Tensors equal in shape, dtype and every element.
local function teq(a, b)
  if a:dtype() ~= b:dtype() then return false end
  local sa, sb = a:shape(), b:shape()
  if #sa ~= #sb then return false end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  return a:numel() == 0 or a:eq(b):all()
end

local function exists(path) return sh(("test -e '%s'"):format(path)) end

-- Rows base .. base+n-1 as a batch: a [n, 3] float32 (row r holds r, r + 0.25, r + 0.5),
-- an int64 id, a nested [n, 2] int32, a uniform non-tensor value.
local function rows(base, n)
  local ids = n == 0 and T.zeros({ 0 }, "int64") or T.arange(base, base + n - 1)
  local x = ids:to("float32"):view(n, 1) + T.tensor({ 0, 0.25, 0.5 }):view(1, 3)
  local y = (ids:view(n, 1) * 2 + T.tensor({ 0, 1 }, "int64"):view(1, 2)):to("int32")
  return T.TensorDict({ x = x, id = ids, nested = { y = y }, tag = "run" }, { n })
end

-- Every id of a TensorDict, as a Lua list.
local function ids_of(td)
  local out = {}
  for i = 1, #td do out[i] = td.id[i] end
  return out
end

local function collect(source, ctx)
  local out = {}
  for b in source:iter(ctx or {}) do out[#out + 1] = b end
  return out
end

-- TensorSource when the lead's sources are there, else a minimal source.
local function TensorSourceOr(td, batch_size)
  if flow.TensorSource then return flow.TensorSource({ td = td, batch_size = batch_size or 2 }) end
  local b = batch_size or 2
  return {
    iter = function()
      local start = 1
      return function()
        if start > #td then return nil end
        local stop = math.min(#td, start + b - 1)
        local r = td[{ { start, stop } }]
        start = stop + 1
        return r
      end
    end,
  }
end

local ALL_DTYPES = "tests/fixtures/python-all-dtypes"

describe("flow.MemmapSource", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("reads a Python-written folder in batches along batch dim 1", function()
    local whole = T.load_memmap(ALL_DTYPES)
    local src = MemmapSource({ path = ALL_DTYPES, batch_size = 1 })
    assert.are.equal(2, src:len())
    local batches = collect(src)
    assert.are.equal(2, #batches)
    for i, b in ipairs(batches) do
      assert.are.same({ 1, 3 }, b:batch_size())
      assert.are.same({ 1, 3, 2 }, b.float32:shape())
      assert.are.equal("bfloat16", b:get("bfloat16"):dtype()) -- td.bfloat16 is the cast
      assert.is_true(teq(b.float64, whole.float64[{ { i, i } }]))
      assert.is_true(teq(b:get({ "nested", "deep", "y" }), whole:get({ "nested", "deep", "y" })[{ { i, i } }]))
      assert.are.same({ 1, 3, 5 }, b.wide:batch_size())
      assert.are.same({ 1, 3, 0 }, b:get("empty"):shape())
      assert.are.equal("hello wörld ✓", b.text)
      assert.are.equal(42, b.number)
    end
    -- the Python example of the shared fixtures: batch [2, 1], one partial batch
    local example = "/work/shared/fixtures/tensordict-mmap-example"
    if not exists(example) then example = "tests/fixtures/tensordict-mmap-example" end
    local ex = collect(MemmapSource({ path = example, batch_size = 3 }))
    assert.are.equal(1, #ex)
    assert.are.same({ 2, 1 }, ex[1]:batch_size())
    assert.is_true(teq(ex[1]:get({ "nested", "int64" }), T.load_memmap(example):get({ "nested", "int64" })))
  end)

  it("selects keys, key paths included, and lists its out_keys", function()
    local src = MemmapSource({ path = ALL_DTYPES, batch_size = 2, keys = { "int8", { "nested", "x" } } })
    assert.are.same({ "int8", { "nested", "x" } }, src.out_keys)
    local b = collect(src)[1]
    assert.are.same({ "int8", { "nested", "x" } }, b:keys({ include_nested = true, leaves_only = true }))
    assert.is_true(teq(b:get({ "nested", "x" }), T.load_memmap(ALL_DTYPES):get({ "nested", "x" })))
    -- without keys, every leaf of the folder
    local all = MemmapSource({ path = ALL_DTYPES, batch_size = 2 })
    assert.are.same(T.load_memmap(ALL_DTYPES):keys({ include_nested = true, leaves_only = true }), all.out_keys)
  end)

  it("yields a last partial batch, or drops it with drop_last; a 0-row folder yields nothing", function()
    rows(1, 10):memmap(dir .. "/ten")
    local src = MemmapSource({ path = dir .. "/ten", batch_size = 4 })
    assert.are.same({ 4, 4, 2 }, H.sizes(collect(src)))
    assert.are.equal(10, src:len())
    local dl = MemmapSource({ path = dir .. "/ten", batch_size = 4, drop_last = true })
    assert.are.same({ 4, 4 }, H.sizes(collect(dl)))
    assert.are.equal(8, dl:len())
    -- batches are views of the files, in order
    local b = collect(src)[3]
    assert.are.same({ 9, 10 }, ids_of(b))
    assert.are.same({ 2, 3 }, b.x:shape())
    assert.are.equal(9.5, b.x[1][3])
    assert.are.equal("run", b.tag)
    rows(1, 0):memmap(dir .. "/none")
    local none = MemmapSource({ path = dir .. "/none", batch_size = 4 })
    assert.are.equal(0, none:len())
    assert.are.equal(0, #collect(none))
  end)

  it("shuffles with a seeded permutation: the same seed gives the same order", function()
    rows(1, 23):memmap(dir .. "/d")
    local function order(params, ctx)
      local out = {}
      for _, b in ipairs(collect(MemmapSource(params), ctx)) do
        for _, id in ipairs(ids_of(b)) do out[#out + 1] = id end
      end
      return out
    end
    local a = order({ path = dir .. "/d", batch_size = 5, shuffle = true, seed = 7 })
    local b = order({ path = dir .. "/d", batch_size = 5, shuffle = true, seed = 7 })
    local c = order({ path = dir .. "/d", batch_size = 5, shuffle = true, seed = 8 })
    assert.are.same(a, b)
    assert.are_not.same(a, c)
    assert.are_not.same(range(1, 23), a)
    local sorted = { unpack(a) }
    table.sort(sorted)
    assert.are.same(range(1, 23), sorted) -- every row once
    -- without seed: the pipeline's (ctx.seed)
    assert.are.same(order({ path = dir .. "/d", batch_size = 5, shuffle = true, seed = 3 }),
      order({ path = dir .. "/d", batch_size = 5, shuffle = true }, { seed = 3 }))
    local out = flow.run(MemmapSource({ path = dir .. "/d", batch_size = 5, shuffle = true }), nil,
      flow.Collect({ cat = true }), { seed = 3 })
    assert.are.same(order({ path = dir .. "/d", batch_size = 5, shuffle = true, seed = 3 }), ids_of(out))
  end)

  it("round-trips its spec", function()
    rows(1, 9):memmap(dir .. "/d")
    local src = MemmapSource({ path = dir .. "/d", batch_size = 4, shuffle = true, seed = 5,
      keys = { "id", { "nested", "y" } } })
    local spec = src:spec()
    assert.are.same({ type = "MemmapSource", path = dir .. "/d", batch_size = 4, shuffle = true, seed = 5,
      keys = { "id", { "nested", "y" } } }, spec)
    local again = flow.build(spec)
    local a, b = collect(src), collect(again)
    assert.are.equal(#a, #b)
    for i = 1, #a do assert.is_true(a[i]:equal(b[i])) end
  end)

  it("raises naming the node for a missing folder, an unknown key and a bad batch_size", function()
    H.raises(function() collect(MemmapSource({ path = dir .. "/nope", batch_size = 2 })) end,
      "MemmapSource", dir .. "/nope")
    H.raises(function() MemmapSource({ path = dir .. "/nope", batch_size = 2 }):open({}) end,
      "MemmapSource", "nope")
    rows(1, 3):memmap(dir .. "/d")
    H.raises(function() MemmapSource({ path = dir .. "/d", batch_size = 2, keys = { "idd" } }):open({}) end,
      "MemmapSource: key 'idd' is not in", "its keys: 'id', {\"nested\", \"y\"}, 'tag', 'x'")
    H.raises(function() MemmapSource({ path = dir .. "/d", batch_size = 0 }) end,
      "MemmapSource", "batch_size", ">= 1", "got 0")
    H.raises(function() MemmapSource({ path = dir .. "/d", batch_size = 1.5 }) end,
      "MemmapSource", "batch_size", "integer", "1.5")
    H.raises(function() MemmapSource({ path = dir .. "/d" }) end, "MemmapSource", "batch_size", "required")
    H.raises(function() MemmapSource({ batch_size = 2 }) end, "MemmapSource", "path", "required")
  end)
end)

describe("flow.MemmapSink", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("appends batches of any size (0 rows included) and returns the loaded folder", function()
    local sink = MemmapSink({ path = dir .. "/out" })
    sink:open({})
    local base = 1
    for _, n in ipairs({ 0, 3, 1, 0, 5, 2 }) do
      sink:write(rows(base, n))
      base = base + n
    end
    assert.are.equal(11, sink:rows())
    assert.is_false(exists(dir .. "/out")) -- nothing at the path before finish
    local out = sink:finish()
    assert.is_true(T.load_memmap(dir .. "/out"):equal(out))
    assert.are.equal(dir .. "/out", out:memmap_prefix())
    assert.are.same({ 11 }, out:batch_size())
    assert.are.same({ 11, 3 }, out.x:shape())
    assert.are.same({ 11, 2 }, out:get({ "nested", "y" }):shape())
    assert.are.equal("int32", out:get({ "nested", "y" }):dtype())
    assert.are.same(range(1, 11), ids_of(out))
    assert.is_true(out:equal(rows(1, 11)))
    assert.are.equal("run", out.tag)
    -- exact files: trimmed to the rows, nothing else beside the folder
    assert.are.equal(11 * 3 * 4, file_size(dir .. "/out/x.memmap"))
    assert.are.equal(11 * 8, file_size(dir .. "/out/id.memmap"))
    assert.are.equal(11 * 2 * 4, file_size(dir .. "/out/nested/y.memmap"))
    assert.are.equal(".\n..\nout\n", ls_a(dir))
  end)

  it("writes strided leaves in row order and keeps dim names and nested batch dims", function()
    local sink = MemmapSink({ path = dir .. "/s" })
    for k = 0, 2 do
      local base = T.arange(1 + 12 * k, 12 * (k + 1), 1, "float32"):view(3, 4) -- [3, 4]
      local td = T.TensorDict({ t = base:transpose(1, 2), -- [4, 3], strided
        every2 = T.arange(1, 16):view(4, 4)[{ {}, { 1, 4, 2 } }], -- [4, 2], strided
        sub = T.TensorDict({ z = T.zeros(4, 5, 2) }, { 4, 5 }) }, { 4 }, { names = { "time" } })
      sink:write(td)
    end
    local out = sink:finish()
    assert.are.same({ 12, 3 }, out.t:shape())
    assert.are.same({ 1, 5, 9 }, { out.t[1][1], out.t[1][2], out.t[1][3] })
    assert.are.same({ 14, 18, 22 }, { out.t[6][1], out.t[6][2], out.t[6][3] })
    assert.are.same({ 13, 15 }, { out.every2[4][1], out.every2[4][2] })
    assert.are.same({ "time" }, out:names())
    assert.are.same({ 12, 5 }, out:get("sub"):batch_size())
    -- a nested batch dim that differs is refused, naming the nested key
    local bad = T.TensorDict({ t = T.zeros(1, 3), every2 = T.zeros({ 1, 2 }, "int64"),
      sub = T.TensorDict({ z = T.zeros(1, 6, 2) }, { 1, 6 }) }, { 1 })
    local sink2 = MemmapSink({ path = dir .. "/s2" })
    sink2:write(T.TensorDict({ t = T.zeros(1, 3), every2 = T.zeros({ 1, 2 }, "int64"),
      sub = T.TensorDict({ z = T.zeros(1, 5, 2) }, { 1, 5 }) }, { 1 }))
    H.raises(function() sink2:write(bad) end, "MemmapSink", "key 'sub'", "[1, 6]", "[1, 5]")
    sink2:abort()
  end)

  it("writes the meta.json td:memmap writes for the same container (Python's layout)", function()
    local sink = MemmapSink({ path = dir .. "/a" })
    sink:write(rows(1, 4))
    sink:write(rows(5, 3))
    sink:finish()
    rows(1, 7):memmap(dir .. "/b")
    local files = { "meta.json", "nested/meta.json", "tag/meta.json", "x.memmap", "id.memmap", "nested/y.memmap" }
    for _, f in ipairs(files) do
      assert.are.equal(read_file(dir .. "/b/" .. f), read_file(dir .. "/a/" .. f), f)
    end
  end)

  it("grows across many appends and trims to the exact rows", function()
    math.randomseed(1234)
    local sink = MemmapSink({ path = dir .. "/grow", fsync = false })
    local base = 1
    for _ = 1, 300 do
      local n = math.random(0, 9)
      sink:write(rows(base, n))
      base = base + n
    end
    local total = base - 1
    local out = sink:finish()
    assert.are.same({ total }, out:batch_size())
    assert.are.same({ total, 3 }, out.x:shape())
    assert.are.equal(total * 12, file_size(dir .. "/grow/x.memmap"))
    assert.are.equal(total * 8, file_size(dir .. "/grow/id.memmap"))
    assert.are.equal(total * 8, file_size(dir .. "/grow/nested/y.memmap"))
    assert.is_true(out:equal(rows(1, total)))
  end)

  it("round-trips a Python-written folder through MemmapSource (values, dtypes, nested batch dims)", function()
    local out = flow.run(MemmapSource({ path = ALL_DTYPES, batch_size = 1 }), nil,
      MemmapSink({ path = dir .. "/copy" }))
    local orig = T.load_memmap(ALL_DTYPES)
    -- every file byte for byte (floats hold NaN, which equal() would not match)
    local p = io.popen(("cd '%s' && find . -type f | sort"):format(ALL_DTYPES))
    local files = {}
    for line in p:lines() do if not line:find("README", 1, true) then files[#files + 1] = line end end
    p:close()
    assert.is_true(#files > 20)
    for _, f in ipairs(files) do
      assert.are.equal(read_file(ALL_DTYPES .. "/" .. f), read_file(dir .. "/copy/" .. f), f)
    end
    assert.are.same(orig:keys({ include_nested = true }), out:keys({ include_nested = true }))
    assert.are.equal("bfloat16", out:get("bfloat16"):dtype()) -- td.bfloat16 is the cast
    assert.are.same({ 2, 3, 5 }, out.wide:batch_size())
    assert.are.same({ 2, 3, 0 }, out:get("empty"):shape())
    assert.is_false(exists(dir .. "/copy/empty.memmap")) -- none for zero elements, as Python
    local items = out:get("items")
    assert.are.same({ 1, "two", true }, { items[1], items[2], items[4] })
    assert.are.equal(read_file(ALL_DTYPES .. "/meta.json"), read_file(dir .. "/copy/meta.json"))
  end)

  it("refuses a batch that differs from the first, naming the key and both shapes, and stays usable", function()
    local sink = MemmapSink({ path = dir .. "/out" })
    sink:write(rows(1, 2))
    local bad = rows(3, 5)
    bad:set("x", T.zeros(5, 4))
    H.raises(function() sink:write(bad) end, "MemmapSink", "key 'x'", "shape [5, 4] does not match [2, 3]")
    bad = rows(3, 5)
    bad:set({ "nested", "y" }, T.zeros({ 5, 2 }, "int64"))
    H.raises(function() sink:write(bad) end, "MemmapSink", "key 'nested.y' is int64 but int32")
    bad = rows(3, 5)
    bad:del("id")
    H.raises(function() sink:write(bad) end, "MemmapSink", "key 'id' of the first batch is missing")
    bad = rows(3, 5)
    bad:set("extra", T.zeros(5))
    H.raises(function() sink:write(bad) end, "MemmapSink", "key 'extra' is not in the first batch")
    bad = rows(3, 5)
    bad:set("tag", "other")
    H.raises(function() sink:write(bad) end, "MemmapSink", "key 'tag'", "differs")
    H.raises(function() sink:write(T.TensorDict({ x = T.zeros(3) })) end, "MemmapSink", "batch size []")
    H.raises(function() sink:write({}) end, "MemmapSink", "expected a TensorDict")
    sink:write(rows(3, 1))
    local out = sink:finish()
    assert.is_true(out:equal(rows(1, 3)))
  end)

  it("refuses per-row non-tensor values with a clear error", function()
    local sink = MemmapSink({ path = dir .. "/out" })
    local a, b = rows(1, 1), rows(2, 1)
    b:set("tag", "b")
    local stacked = T.cat({ a, b }, 1)
    H.raises(function() sink:write(stacked) end, "MemmapSink", "key 'tag'", "NonTensorStack")
    sink:abort()
    assert.is_false(exists(dir .. "/out"))
  end)

  it("fails at open when the path exists, unless existsok", function()
    rows(1, 2):memmap(dir .. "/old")
    local before = read_file(dir .. "/old/meta.json")
    local sink = MemmapSink({ path = dir .. "/old" })
    H.raises(function() sink:open({}) end, "MemmapSink", dir .. "/old", "exists", "existsok = true")
    H.raises(function()
      flow.run(TensorSourceOr(rows(1, 3)), nil, MemmapSink({ path = dir .. "/old" }))
    end, "MemmapSink", "exists")
    assert.are.equal(before, read_file(dir .. "/old/meta.json"))
    local out = flow.run(TensorSourceOr(rows(1, 3)), nil, MemmapSink({ path = dir .. "/old", existsok = true }))
    assert.are.same({ 1, 2, 3 }, ids_of(out))
    -- existsok never replaces a folder that is not a memmap folder
    sh("mkdir -p '" .. dir .. "/plain' && touch '" .. dir .. "/plain/notes.txt'")
    H.raises(function() MemmapSink({ path = dir .. "/plain", existsok = true }):open({}) end,
      "MemmapSink", "not a memmap folder")
    assert.is_true(exists(dir .. "/plain/notes.txt"))
  end)

  it("abort leaves the old state, or nothing; a failing pipeline aborts", function()
    local sink = MemmapSink({ path = dir .. "/new" })
    sink:open({})
    sink:write(rows(1, 5))
    sink:abort()
    sink:abort() -- idempotent
    assert.is_false(exists(dir .. "/new"))
    assert.are.equal(".\n..\n", ls_a(dir))
    rows(100, 2):memmap(dir .. "/old")
    sink = MemmapSink({ path = dir .. "/old", existsok = true })
    sink:open({})
    sink:write(rows(1, 5))
    sink:abort()
    assert.are.same({ 100, 101 }, ids_of(T.load_memmap(dir .. "/old")))
    assert.are.equal(".\n..\nold\n", ls_a(dir))
    -- a node that fails on the third batch: the sink is aborted, the old folder stays
    local n = 0
    local boom = flow.Lambda and flow.Lambda({ fn = function(td)
      n = n + 1
      if n == 3 then error("boom") end
      return td
    end })
    if boom then
      H.raises(function()
        flow.run(TensorSourceOr(rows(1, 6), 2), boom, MemmapSink({ path = dir .. "/old", existsok = true }))
      end, "boom")
      assert.are.same({ 100, 101 }, ids_of(T.load_memmap(dir .. "/old")))
      assert.is_false(ls_a(dir):find(".old.tmp", 1, true) ~= nil)
    end
  end)

  it("commits an empty TensorDict of batch [0] when no batch came", function()
    local out = flow.run(TensorSourceOr(rows(1, 0)), nil, MemmapSink({ path = dir .. "/empty" }))
    assert.are.same({ 0 }, out:batch_size())
    local sink = MemmapSink({ path = dir .. "/zero" })
    sink:write(rows(1, 0))
    out = sink:finish()
    assert.are.same({ 0 }, out:batch_size())
    assert.are.same({ 0, 3 }, out.x:shape())
    assert.is_false(exists(dir .. "/zero/x.memmap")) -- none for zero elements
  end)

  it("round-trips its spec", function()
    local sink = MemmapSink({ path = dir .. "/s", existsok = true, fsync = false })
    local spec = sink:spec()
    assert.are.same({ type = "MemmapSink", path = dir .. "/s", existsok = true, fsync = false }, spec)
    local again = flow.build(spec)
    again:write(rows(1, 4))
    assert.are.same({ 1, 2, 3, 4 }, ids_of(again:finish()))
    H.raises(function() MemmapSink({ path = 3 }) end, "MemmapSink", "path", "string")
  end)
end)

describe("flow.ReplayBuffer", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("preallocates capacity rows on disk and wraps around", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 5 })
    assert.are.equal(0, rb:len())
    rb:extend(rows(1, 0))
    assert.are.equal(0, rb:len())
    rb:extend(rows(1, 3))
    assert.are.equal(3, rb:len())
    local ring = T.load_memmap(dir .. "/rb")
    assert.are.same({ 5 }, ring:batch_size())
    assert.are.same({ 1, 2, 3, 0, 0 }, ids_of(rb:storage()))
    rb:extend(rows(4, 4)) -- 4, 5 at the end, then 6, 7 wrap to the front
    assert.are.equal(5, rb:len())
    assert.are.same({ 6, 7, 3, 4, 5 }, ids_of(rb:storage()))
    assert.is_true(teq(rb:storage().x[1], rows(6, 1).x[1]))
    rb:extend(rows(100, 12)) -- more than capacity: the last 5 rows, continuing the ring
    assert.are.same({ 110, 111, 107, 108, 109 }, ids_of(rb:storage()))
    assert.are.equal(5, rb:len())
    -- the files hold it too
    rb:finish()
    assert.are.same({ 110, 111, 107, 108, 109 }, ids_of(T.load_memmap(dir .. "/rb")))
    assert.are.equal(5 * 12, file_size(dir .. "/rb/x.memmap"))
  end)

  it("samples uniformly with replacement from the filled rows, the same for the same seed", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 100 })
    rb:extend(rows(1, 10))
    local a = rb:sample(64, T.Generator(42))
    local b = rb:sample(64, T.Generator(42))
    local c = rb:sample(64, T.Generator(43))
    assert.are.same({ 64 }, a:batch_size())
    assert.are.same({ 64, 3 }, a.x:shape())
    assert.are.equal("int32", a:get({ "nested", "y" }):dtype())
    assert.is_true(a:equal(b))
    assert.is_false(a:equal(c))
    local seen = {}
    for _, id in ipairs(ids_of(a)) do
      assert.is_true(id >= 1 and id <= 10, "sampled an unfilled row: " .. id)
      seen[id] = (seen[id] or 0) + 1
    end
    local distinct = 0
    for _ in pairs(seen) do distinct = distinct + 1 end
    assert.is_true(distinct > 5 and distinct <= 10)
    -- every sampled row is a whole row: x and y agree with id
    for i = 1, 64 do
      assert.are.equal(a.id[i] + 0.5, a.x[i][3])
      assert.are.equal(a.id[i] * 2 + 1, a:get({ "nested", "y" })[i][2])
    end
    -- a sample is a copy: writing it leaves the ring alone, and it can take new keys
    a.x:fill_(-1)
    a:set("w", T.zeros(64))
    assert.are.equal(1, rb:storage().x[1][1])
    -- the global generator, seeded
    T.manual_seed(5)
    local g1 = rb:sample(8)
    T.manual_seed(5)
    assert.is_true(g1:equal(rb:sample(8)))
    assert.are.same({ 0 }, rb:sample(0):batch_size())
  end)

  it("is a sink: write extends, finish returns the buffer; its spec round-trips", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 4 })
    local r = flow.run(TensorSourceOr(rows(1, 7), 3), nil, rb)
    assert.are.equal(rb, r)
    assert.are.equal(4, rb:len())
    assert.are.same({ 5, 6, 7, 4 }, ids_of(rb:storage()))
    assert.are.equal("sink", ReplayBuffer.kind)
    local spec = rb:spec()
    assert.are.same({ type = "ReplayBuffer", path = dir .. "/rb", capacity = 4 }, spec)
    spec.path = dir .. "/rb2"
    local again = flow.build(spec)
    flow.run(TensorSourceOr(rows(1, 7), 3), nil, again)
    assert.are.same(ids_of(rb:storage()), ids_of(again:storage()))
    assert.is_true(rb:sample(16, T.Generator(1)):equal(again:sample(16, T.Generator(1))))
  end)

  it("raises clear errors", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 4 })
    H.raises(function() rb:sample(2) end, "ReplayBuffer", "sample", "empty")
    H.raises(function() rb:extend(T.TensorDict({ x = T.zeros(2) })) end, "ReplayBuffer", "batch size []")
    H.raises(function() rb:extend(5) end, "ReplayBuffer", "expected a TensorDict")
    rb:extend(rows(1, 2))
    local bad = rows(3, 2)
    bad:set("x", T.zeros(2, 5))
    H.raises(function() rb:extend(bad) end, "ReplayBuffer", "key 'x'",
      "shape [2, 5] does not match [4, 3] of the buffer")
    bad = rows(3, 2)
    bad:set("x", T.zeros({ 2, 3 }, "float64"))
    H.raises(function() rb:extend(bad) end, "ReplayBuffer", "key 'x' is float64 but float32")
    H.raises(function() rb:sample(-1) end, "ReplayBuffer", "sample", "non-negative integer", "-1")
    H.raises(function() rb:sample(2, "g") end, "ReplayBuffer", "sample", "Generator")
    H.raises(function() ReplayBuffer({ path = dir .. "/x", capacity = 0 }) end, "ReplayBuffer", "capacity", ">= 1")
    H.raises(function() ReplayBuffer({ capacity = 3 }) end, "ReplayBuffer", "path", "required")
    assert.are.same({ 1, 2 }, ids_of(rb:storage()[{ { 1, 2 } }]))
    -- a path that holds something else than a ring: refused unless existsok
    rows(1, 2):memmap(dir .. "/folder")
    H.raises(function() ReplayBuffer({ path = dir .. "/folder", capacity = 4 }):extend(rows(1, 1)) end,
      "tensordict: ReplayBuffer: '" .. dir .. "/folder' exists and is not a replay buffer's ring "
        .. "(it has no %ring file); pass existsok = true to replace it")
    H.raises(function()
      flow.run(TensorSourceOr(rows(1, 3)), nil, ReplayBuffer({ path = dir .. "/folder", capacity = 4 }))
    end, "ReplayBuffer", "is not a replay buffer's ring", "existsok = true")
    H.raises(function() ReplayBuffer({ path = dir .. "/folder", capacity = 4 }):len() end,
      "is not a replay buffer's ring")
    ReplayBuffer({ path = dir .. "/folder", capacity = 4, existsok = true }):extend(rows(1, 1))
    -- a ring of another capacity
    H.raises(function() ReplayBuffer({ path = dir .. "/rb", capacity = 5 }):len() end,
      "tensordict: ReplayBuffer: '" .. dir .. "/rb' is a ring of 4 rows, not 5 (capacity); "
        .. "pass existsok = true to replace it")
  end)
end)

describe("flow.ReplayBuffer kept on disk", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  -- The four counters of a ring's %ring file: format, capacity, filled, cursor.
  local function counters(path)
    local bytes = read_file(path .. "/%ring")
    local ffi = require("ffi")
    local c = ffi.new("int64_t[4]")
    ffi.copy(c, bytes, 32)
    return { tonumber(c[0]), tonumber(c[1]), tonumber(c[2]), tonumber(c[3]) }, #bytes
  end

  it("reopens a ring with its length, rows and cursor; sample works at once", function()
    local path = dir .. "/rb"
    local rb = ReplayBuffer({ path = path, capacity = 5 })
    rb:extend(rows(1, 3))
    assert.are.same({ 1, 5, 3, 3 }, (counters(path)))
    local before = rb:sample(16, T.Generator(7))
    rb = nil -- luacheck: ignore
    collectgarbage()

    local again = ReplayBuffer({ path = path, capacity = 5 })
    assert.are.equal(3, again:len())
    assert.are.same({ 1, 2, 3, 0, 0 }, ids_of(again:storage()))
    assert.is_true(before:equal(again:sample(16, T.Generator(7))))
    again:extend(rows(4, 4)) -- 4, 5 at the end, 6, 7 wrap to the front: the cursor was kept
    assert.are.same({ 6, 7, 3, 4, 5 }, ids_of(again:storage()))
    assert.are.same({ 1, 5, 5, 2 }, (counters(path)))
    again:finish()

    local third = ReplayBuffer({ path = path, capacity = 5 })
    assert.are.equal(5, third:len())
    third:extend(rows(8, 1))
    assert.are.same({ 6, 7, 8, 4, 5 }, ids_of(third:storage()))
    -- as a pipeline's sink too
    flow.run(TensorSourceOr(rows(9, 2), 2), nil, ReplayBuffer({ path = path, capacity = 5 }))
    assert.are.same({ 6, 7, 8, 9, 10 }, ids_of(T.load_memmap(path)))
    assert.are.same({ 1, 5, 5, 0 }, (counters(path)))
    -- the folder stays Python's layout: meta.json does not name the counters
    assert.is_nil(read_file(path .. "/meta.json"):find("ring", 1, true))
    -- existsok starts a new ring
    local fresh = ReplayBuffer({ path = path, capacity = 5, existsok = true })
    assert.are.equal(0, fresh:len())
    fresh:extend(rows(50, 1))
    assert.are.equal(1, fresh:len())
    assert.are.same({ 1, 5, 1, 1 }, (counters(path)))
  end)

  it("keeps the counts of a process killed without syncing", function()
    local path = dir .. "/rb"
    local child = H.write(dir .. "/filler.lua", [[
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
local T = require("tensordict")
local rb = T.flow.ReplayBuffer({ path = arg[1], capacity = 10 })
for i = 1, 13 do rb:extend(T.TensorDict({ id = T.full({ 1 }, i, "int64") }, { 1 })) end
print("filled")
io.stdout:flush()
local ffi = require("ffi")
ffi.cdef("int usleep(unsigned int usec);")
while true do ffi.C.usleep(100000) end -- until killed
]])
    local p = io.popen(("luajit '%s' '%s' & echo $!; wait"):format(child, path))
    local pid = tonumber(p:read("*l"))
    assert.are.equal("filled", p:read("*l"))
    os.execute("kill -9 " .. pid)
    p:close()
    local rb = ReplayBuffer({ path = path, capacity = 10 })
    assert.are.equal(10, rb:len())
    assert.are.same({ 11, 12, 13, 4, 5, 6, 7, 8, 9, 10 }, ids_of(rb:storage()))
    rb:extend(T.TensorDict({ id = T.full({ 1 }, 14, "int64") }, { 1 }))
    assert.are.equal(14, rb:storage().id[4])
  end)

  it("refuses counters that do not fit the ring", function()
    local path = dir .. "/rb"
    ReplayBuffer({ path = path, capacity = 3 }):extend(rows(1, 2))
    local f = io.open(path .. "/%ring", "wb")
    f:write(("\0"):rep(32))
    f:close()
    H.raises(function() ReplayBuffer({ path = path, capacity = 3 }):len() end,
      "tensordict: ReplayBuffer: '" .. path .. "/%ring' holds no ring counters this library knows "
        .. "(format 0, capacity 0, filled 0, cursor 0); pass existsok = true to replace it")
  end)
end)
