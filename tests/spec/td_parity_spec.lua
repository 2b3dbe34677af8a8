-- Behaviour that follows Python tensordict 0.15 where this library used to differ
-- (issue 12). Expected values are what Python gives for the same calls.
local T = require("tensordict")
local H = require("helpers")

describe("index assignment follows Python", function()
  it("a value with fewer keys writes those keys only", function()
    local td = T.TensorDict({ obs = T.arange(1, 10):view(5, 2), r = T.zeros(5),
      n = { a = T.zeros(5), b = T.ones(5) } }, { 5 })
    td[2] = { obs = T.tensor({ 7, 7 }, "int64") }
    assert.are.same({ { 1, 2 }, { 7, 7 }, { 5, 6 }, { 7, 8 }, { 9, 10 } }, td.obs:totable())
    assert.are.same({ 0, 0, 0, 0, 0 }, td.r:totable())
    td[{ { 1, 2 } }] = T.TensorDict({ n = { a = T.ones(2) } }, { 2 })
    assert.are.same({ 1, 1, 0, 0, 0 }, td.n.a:totable())
    assert.are.same({ 1, 1, 1, 1, 1 }, td.n.b:totable())
  end)

  it("a key only the value has is made, zeros outside the selection", function()
    local td = T.TensorDict({ r = T.zeros(5) }, { 5 })
    td[2] = { new = T.tensor({ 7, 8 }, "int32") }
    assert.are.equal("int32", td.new:dtype())
    assert.are.same({ { 0, 0 }, { 7, 8 }, { 0, 0 }, { 0, 0 }, { 0, 0 } }, td.new:totable())
    td[T.tensor({ true, false, true, false, false })] = T.TensorDict({ n = { z = T.ones(2, 3) } }, { 2 })
    assert.are.same({ 5, 3 }, td.n.z:shape())
    assert.are.same({ 1, 0, 1, 0, 0 }, td.n.z[{ {}, 1 }]:totable())
    H.raises(function() td[1] = { s = "x" } end,
      "index assignment: 's' is not in the TensorDict, and only tensors can be added this way (set it first)")
    H.raises(function() T.TensorDict({ r = T.zeros(5) }, { 5 }):lock()[1] = { q = T.ones(1) } end,
      "locked")
  end)

  it("writes non-tensor values element-wise, as Python does into a NonTensorStack", function()
    local td = T.TensorDict({ s = "a", x = T.zeros(3) }, { 3 })
    td[2] = { s = "b", x = T.tensor(1) }
    assert.are.same({ "a", "b", "a" }, td.s)
    local st = T.stack({ T.TensorDict({ s = "p" }), T.TensorDict({ s = "q" }) })
    td[{ { 1, 2 } }] = st
    assert.are.same({ "p", "q", "a" }, td.s)
    td[T.tensor({ true, false, true })] = T.TensorDict({ s = "m" })
    assert.are.same({ "m", "q", "m" }, td.s)
    td[T.tensor({ 3, 1 }, "int64")] = st
    assert.are.same({ "q", "q", "p" }, td.s)
    assert.are.same({ "p", "q" }, st.s) -- the value is left as it was
    -- the unchanged value is accepted, and a different one written (Python writes it)
    st[1] = st[1]:clone()
    st[1] = T.TensorDict({ s = "z" })
    assert.are.same({ "z", "q" }, st.s)
    -- and it survives a save
    local dir = H.tmpdir()
    td:memmap(dir .. "/td")
    local back = T.load_memmap(dir .. "/td")
    assert.are.same({ "q", "q", "p" }, back.s)
    assert.is_true(td:equal(back))
    H.rmtree(dir)
  end)

  it("a 0-dim integer tensor indexes as its number", function()
    local td = T.TensorDict({ obs = T.arange(1, 10):view(5, 2) }, { 5 })
    assert.are.same({ 5, 6 }, td[T.tensor(3, "int64")].obs:totable())
    assert.are.same({ 9, 10 }, td[T.tensor(-1, "int32")].obs:totable())
    assert.are.equal(3, T.arange(1, 6)[T.tensor(3, "int64")])
    local x = T.arange(1, 6)
    x[T.tensor(2, "int64")] = 9
    assert.are.same({ 1, 9, 3, 4, 5, 6 }, x:totable())
    H.raises(function() return x[T.tensor(true)] end,
      "index: a 0-dim bool tensor cannot index; use a number or an integer tensor")
    H.raises(function() return x[T.tensor(1.5)] end,
      "index: a 0-dim float32 tensor cannot index; use a number or an integer tensor")
  end)
end)

describe("stacked values", function()
  it("over an empty batch read as nested empty lists (Python: [[], []])", function()
    local e = T.stack({ T.TensorDict({ s = "p" }, { 0 }), T.TensorDict({ s = "q" }, { 0 }) })
    assert.are.same({ 2, 0 }, e:batch_size())
    assert.are.same({ {}, {} }, e.s)
  end)
end)

describe("messages name the call", function()
  it("an index out of range names the call", function()
    H.raises(function() return T.arange(1, 6)[99] end,
      "index: index 99 is out of range for dim 1 of size 6 (valid: 1..6 or -6..-1)")
  end)
end)

describe("locks", function()
  it("what indexing gives is unlocked, as in Python; the file's leaves stay read-only", function()
    local dir = H.tmpdir()
    T.TensorDict({ a = T.zeros(10, 3) }, { 10 }):memmap(dir .. "/m")
    local buf = T.load_memmap(dir .. "/m")
    assert.is_true(buf:is_locked())
    for _, sample in ipairs({ buf[T.tensor({ 1, 4 }, "int64")], buf[{ { 2, 5 } }], buf[3] }) do
      assert.is_false(sample:is_locked())
    end
    local s = buf[T.tensor({ 1, 4 }, "int64")]
    s.priority = T.ones(2) -- a sample takes new keys
    assert.are.same({ "a", "priority" }, s:keys())
    H.raises(function() buf[{ { 2, 5 } }].a:fill_(1) end, "read-only")
    assert.is_true(buf:is_locked())
    H.rmtree(dir)
  end)
end)

describe("memmap_refresh_", function()
  it("refuses a folder whose leaf file was truncated on disk, instead of reading past it", function()
    local dir = H.tmpdir()
    T.TensorDict({ a = T.ones(100, 3) }, { 100 }):memmap(dir .. "/m")
    local td = T.load_memmap(dir .. "/m")
    td:memmap_refresh_() -- unchanged: fine
    assert.are.equal(300, td.a:sum())
    io.open(dir .. "/m/a.memmap", "wb"):close() -- another process truncates the file
    H.raises(function() td:memmap_refresh_() end, "a.memmap")
    H.rmtree(dir)
  end)
end)

describe("consolidated files from Python", function()
  it("a NonTensorStack under batch size [] reads as the list of its elements, as memmap does", function()
    local td = T.from_consolidated("tests/fixtures/python-consolidated/stack_at_batch0.td")
    assert.are.same({}, td:batch_size())
    assert.are.same({ "p", "q" }, td.s)
    assert.are.same({ 0, 0, 0 }, td.a:totable())
  end)
end)
