-- The HDF5 nodes (docs/h5.md): H5Source's batches (file order, shuffled, keys, shards,
-- checkpoints), H5Sink's atomic commit and refusals, both from a recipe run by tdflow,
-- and tdflow inspect on an HDF5 file.
local T = require("tensordict")
local H = require("helpers")
local flow = T.flow

local has_h5 = require("tensordict.h5.lib").open() ~= nil

describe("H5Source and H5Sink", function()
  if not has_h5 then
    pending("libtensordict_h5 is not built (install libhdf5-dev and run make)")
    return
  end
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  local function source_file(n)
    local path = dir .. "/src.h5"
    local td = T.TensorDict({ x = T.arange(n, "int64"), n = { y = T.arange(2 * n, "float32"):reshape(n, 2) } }, { n })
    td:set_non_tensor("tag", "v1")
    td:to_h5(path, { chunks = 3 })
    return path
  end

  local function xs(batches)
    local out = {}
    for _, b in ipairs(batches) do out[#out + 1] = b:get("x"):tolist() end
    return out
  end

  local function collect(src, ctx)
    local out = {}
    for b in src:iter(ctx) do out[#out + 1] = b end
    return out
  end

  it("reads batches of rows in file order, nested groups and strings included", function()
    local src = flow.H5Source({ path = source_file(10), batch_size = 4 })
    assert.are.same({ "n", "tag", "x" }, src.out_keys)
    assert.are.equal(10, src:len())
    local batches = collect(src)
    assert.are.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10 } }, xs(batches))
    assert.are.same({ { 17, 18 }, { 19, 20 } }, batches[3]:get({ "n", "y" }):tolist())
    assert.are.equal("v1", batches[2]:get("tag"))
    assert.are.same({ 4 }, batches[1]:batch_size())
    src = flow.H5Source({ path = source_file(10), batch_size = 4, drop_last = true, keys = { "x" } })
    assert.are.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 } }, xs(collect(src)))
    assert.are.same({ "x" }, collect(src)[1]:keys())
    assert.are.equal(8, src:len())
  end)

  it("shuffles with a seed: every row once, the same order for the same seed", function()
    local path = source_file(50)
    local a = xs(collect(flow.H5Source({ path = path, batch_size = 8, shuffle = true, seed = 5 })))
    local b = xs(collect(flow.H5Source({ path = path, batch_size = 8, shuffle = true, seed = 5 })))
    local c = xs(collect(flow.H5Source({ path = path, batch_size = 8, shuffle = true, seed = 6 })))
    assert.are.same(a, b)
    assert.are_not.same(a, c)
    local seen = {}
    for _, batch in ipairs(a) do for _, v in ipairs(batch) do seen[#seen + 1] = v end end
    table.sort(seen)
    assert.are.same(H.range(1, 50), seen)
  end)

  it("takes a rank's share and continues from a checkpoint", function()
    local path = source_file(10)
    local ctx = { dist = { rank = 1, size = 2 } }
    assert.are.same({ { 6, 7, 8 }, { 9, 10 } }, xs(collect(flow.H5Source({ path = path, batch_size = 3 }), ctx)))
    local src = flow.H5Source({ path = path, batch_size = 4 })
    local it = src:iter()
    it()
    local state = src:state()
    assert.are.same({ start = 5 }, state)
    src:restore(state)
    assert.are.same({ { 5, 6, 7, 8 }, { 9, 10 } }, xs(collect(src)))
  end)

  it("refuses what it cannot read, naming the file", function()
    H.raises(function() flow.H5Source({ path = dir .. "/none.h5", batch_size = 2 }):len() end,
      "H5Source: from_h5: open: " .. dir .. "/none.h5: no such readable file")
    T.TensorDict({ s = T.tensor(1.5) }, {}):to_h5(dir .. "/zero.h5")
    H.raises(function() flow.H5Source({ path = dir .. "/zero.h5", batch_size = 2 }):len() end,
      "H5Source: '" .. dir .. "/zero.h5' has batch size [] (its datasets share no leading dim)")
    H.raises(function() flow.H5Source({ path = source_file(4), batch_size = 2, keys = { "nope" } }):len() end,
      "H5Source: select: no key 'nope' in")
  end)

  it("appends batches into extendible datasets and commits at finish", function()
    local path = dir .. "/out.h5"
    local sink = flow.H5Sink({ path = path, chunks = 4, compression = "gzip" })
    sink:open()
    for b in flow.H5Source({ path = source_file(10), batch_size = 3 }):iter() do sink:write(b) end
    assert.is_false(H.exists(path))
    assert.are.equal(10, sink:rows())
    local h = sink:finish()
    assert.are.same({ 10 }, h:batch_size())
    assert.are.same(H.range(1, 10), h:get("x"):tolist())
    assert.are.same({ 4 }, h:chunks("x"))
    assert.are.same({ 4, 2 }, h:chunks({ "n", "y" }))
    assert.are.equal("v1", h:get("tag"))
    h:close()
    assert.are.same({ "out.h5", "src.h5" }, H.output_lines("ls " .. dir))
  end)

  it("leaves nothing after abort or a batch that does not match the first", function()
    local path = dir .. "/out.h5"
    local sink = flow.H5Sink({ path = path })
    sink:open()
    sink:write(T.TensorDict({ a = T.zeros(2, 3) }, { 2 }))
    H.raises(function() sink:write(T.TensorDict({ a = T.zeros(2, 4) }, { 2 })) end,
      "H5Sink: write: /a is float32 rows of [4], the first batch's were float32 rows of [3]")
    H.raises(function() sink:write(T.TensorDict({ b = T.zeros(2, 3) }, { 2 })) end,
      "H5Sink: write: /b is not in the first batch")
    H.raises(function() sink:write(T.TensorDict({}, {})) end, "H5Sink: write: a batch needs at least one batch dim")
    H.raises(function() sink:write(42) end, "H5Sink: write: expected a TensorDict batch, got 42")
    sink:abort()
    sink:abort()
    assert.are.same({}, H.output_lines("ls " .. dir))
    H.raises(function() flow.H5Sink({ path = path, compression = "lzf" }) end,
      "H5Sink: compression: expected one of \"gzip\", got \"lzf\"")
  end)

  it("runs from a recipe and tdflow inspect shows the file as a tree", function()
    local src = source_file(20)
    local recipe = dir .. "/r.json"
    H.write(recipe, ([[{"batch_size": 8, "source": {"use": "H5Source", "path": "%s", "batch_size": 8},
      "steps": [], "sink": {"use": "H5Sink", "path": "%s/out.h5", "compression": "gzip"}}]]):format(src, dir))
    local _, expect = H.tdflow_runner(dir)
    expect("run " .. recipe, 0)
    local h = T.from_h5(dir .. "/out.h5")
    assert.are.same(H.range(1, 20), h:get("x"):tolist())
    h:close()
    local out = expect("inspect " .. dir .. "/out.h5", 0)
    assert.truthy(out:find(dir .. "/out.h5  (HDF5 file, batch size [20], 2 tensor leaves, 320 B, "
      .. "1 non-tensor values)", 1, true), out)
    assert.truthy(out:find("|   `-- y                float32  [20, 2]              160 B", 1, true), out)
    assert.truthy(out:find("|-- tag              \"v1\" (non-tensor)", 1, true), out)
  end)
end)
