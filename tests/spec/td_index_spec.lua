-- TensorDict batch indexing (the index grammar over batch dims), index assignment,
-- get_at/set_at_ and the shape ops over batch dims. Reference: Python tensordict.
local T = require("tensordict")
local H = require("helpers")

-- A TensorDict of batch size [4, 3]:
--   obs   float32 [4, 3]    values 1..12 (row-major)
--   pix   int64   [4, 3, 5] values 1..60: trailing dim not a batch dim
--   inner TensorDict of batch size [4, 3, 2] holding z (int32 [4, 3, 2], 1..24)
--   tag   "hello" (a uniform non-tensor value)
local function sample()
  return T.TensorDict({
    obs = T.arange(1, 12, "float32"):view(4, 3),
    pix = T.arange(1, 60, "int64"):view(4, 3, 5),
    inner = T.TensorDict({ z = T.arange(1, 24, "int32"):view(4, 3, 2) }, { 4, 3, 2 }),
    tag = "hello",
  }, { 4, 3 })
end

-- The same fields as plain tensors, to compute what an index must give.
local function plain()
  return {
    obs = T.arange(1, 12, "float32"):view(4, 3),
    pix = T.arange(1, 60, "int64"):view(4, 3, 5),
    z = T.arange(1, 24, "int32"):view(4, 3, 2),
  }
end

-- Checks r == sample()[key] where key' (the key with any ellipsis spelled out over the
-- 2 batch dims) applied to the plain tensors gives the leaves, batch is the expected
-- batch size and inner_batch the expected batch size of r.inner.
local function check_against(r, key2, batch, inner_batch)
  local p = plain()
  assert.are.same(batch, r:batch_size())
  assert.are.same(inner_batch, r.inner:batch_size())
  for _, k in ipairs({ "obs", "pix" }) do
    local want = p[k][key2]
    local got = r[k]
    assert.are.equal(p[k]:dtype(), got:dtype(), k)
    if type(want) == "number" then
      assert.are.same({}, got:shape(), k)
      assert.are.equal(want, got:item(), k)
    else
      assert.are.same(want:shape(), got:shape(), k)
      assert.are.same(want:totable(), got:totable(), k)
    end
  end
  local zw = p.z[key2]
  assert.are.equal("int32", r.inner.z:dtype())
  assert.are.same(zw:shape(), r.inner.z:shape())
  assert.are.same(zw:totable(), r.inner.z:totable())
  assert.are.equal("hello", r.tag)
end

local function names_of(td)
  return td:names()
end

describe("TensorDict indexing: basic entries", function()
  it("td[i] selects along batch dim 1, negatives from the end", function()
    local td = sample()
    local r = td[2]
    assert.are.same({ 3 }, r:batch_size())
    assert.are.same({ 4, 5, 6 }, r.obs:totable())
    assert.are.equal("float32", r.obs:dtype())
    assert.are.same({ 3, 5 }, r.pix:shape())
    assert.are.same({ 16, 17, 18, 19, 20 }, r.pix[1]:totable())
    assert.are.equal("int64", r.pix:dtype())
    assert.are.same({ 3, 2 }, r.inner:batch_size())
    assert.are.same({ { 7, 8 }, { 9, 10 }, { 11, 12 } }, r.inner.z:totable())
    assert.are.equal("hello", r.tag)
    check_against(td[2], { 2 }, { 3 }, { 3, 2 })
    check_against(td[-1], { 4 }, { 3 }, { 3, 2 })
    check_against(td[-4], { 1 }, { 3 }, { 3, 2 })
    assert.are.same({ 10, 11, 12 }, td[-1].obs:totable())
  end)

  it("td[{i, j}] takes one entry per batch dim and leaves trailing dims whole", function()
    local td = sample()
    local r = td[{ 2, 3 }]
    assert.are.same({}, r:batch_size())
    assert.are.same({}, r.obs:shape())
    assert.are.equal(6, r.obs:item())
    assert.are.same({ 26, 27, 28, 29, 30 }, r.pix:totable())
    assert.are.same({ 2 }, r.inner:batch_size())
    assert.are.same({ 11, 12 }, r.inner.z:totable())
    check_against(td[{ -1, -3 }], { -1, -3 }, {}, { 2 })
    check_against(td[{ 3 }], { 3 }, { 3 }, { 3, 2 })
  end)

  it("reads inclusive ranges {a, b} and {a, b, step} with negatives and clamping", function()
    local td = sample()
    local r = td[{ { 2, 3 } }]
    assert.are.same({ 2, 3 }, r:batch_size())
    assert.are.same({ { 4, 5, 6 }, { 7, 8, 9 } }, r.obs:totable())
    check_against(r, { { 2, 3 } }, { 2, 3 }, { 2, 3, 2 })
    r = td[{ { 1, -1, 2 }, { -2, -1 } }]
    assert.are.same({ 2, 2 }, r:batch_size())
    assert.are.same({ { 2, 3 }, { 8, 9 } }, r.obs:totable())
    check_against(r, { { 1, -1, 2 }, { -2, -1 } }, { 2, 2 }, { 2, 2, 2 })
    check_against(td[{ { 2 } }], { { 2 } }, { 1, 3 }, { 1, 3, 2 }) -- {a} is {a, a}
    check_against(td[{ {}, { 3, 100 } }], { {}, { 3, 100 } }, { 4, 1 }, { 4, 1, 2 })
    check_against(td[{ { 3, 2 } }], { { 3, 2 } }, { 0, 3 }, { 0, 3, 2 }) -- empty
    check_against(td[{ { 4, 1, 3 } }], { { 4, 1, 3 } }, { 0, 3 }, { 0, 3, 2 })
    check_against(td[{ 2, { 1, 3, 2 } }], { 2, { 1, 3, 2 } }, { 2 }, { 2, 2 })
  end)

  it("takes steps and bounds near 2^62 and past 2^63 without overflow (issue 28)", function()
    local td = sample()
    -- {-3, 1, 2^62}: from row 2 to row 1, empty; {-3, 4, 2^62}: row 2 only
    check_against(td[{ { -3, 1, 2 ^ 62 } }], { { -3, 1, 2 ^ 62 } }, { 0, 3 }, { 0, 3, 2 })
    local r = td[{ { -3, 4, 2 ^ 62 } }]
    check_against(r, { { -3, 4, 2 ^ 62 } }, { 1, 3 }, { 1, 3, 2 })
    assert.are.same({ { 4, 5, 6 } }, r.obs:totable())
    -- a one-row slice keeps the dim's own stride: nothing steps past the row
    assert.are.same({ 3, 1 }, r.obs:stride())
    assert.are.same({ 15, 5, 1 }, r.pix:stride())
    check_against(td[{ {}, { 1, 2 ^ 63, 2 ^ 63 } }], { {}, { 1, 2 ^ 63, 2 ^ 63 } }, { 4, 1 }, { 4, 1, 2 })
    check_against(td[{ { -2 ^ 64, 2 ^ 64 } }], { {}, {} }, { 4, 3 }, { 4, 3, 2 })
    -- what the slices give can be computed with, copied and saved
    local empty = td[{ { 3, 1, 2 ^ 61 } }]
    assert.are.same({ 0, 3 }, empty:clone():batch_size())
    assert.are.same({ 0, 3, 5 }, (empty.pix + 1):shape())
    assert.are.same({ 0, 3 }, empty.obs:cumsum(1):shape())
    assert.are.same({ 3 }, empty.obs:sum(1):shape())
    assert.are.same({ 4, 5, 6 }, r.obs:sum(1):totable())
  end)

  it("assigns through steps near 2^62 (issue 28)", function()
    local td = sample()
    td[{ { -3, 1, 2 ^ 62 } }] = 0 -- empty: nothing changes
    assert.are.same(sample().obs:totable(), td.obs:totable())
    td[{ { -3, 4, 2 ^ 62 } }] = 0 -- row 2 only
    assert.are.same({ { 1, 2, 3 }, { 0, 0, 0 }, { 7, 8, 9 }, { 10, 11, 12 } }, td.obs:totable())
    assert.are.same({ 0, 0 }, td.inner.z[{ 2, 3 }]:totable())
    assert.are.same({ 31, 32, 33, 34, 35 }, td.pix[{ 3, 1 }]:totable())
    td[{ { 1, 4, 2 ^ 62 } }] = td[{ { 3, 3 } }] -- row 1 from row 3
    assert.are.same({ 7, 8, 9 }, td.obs[1]:totable())
    td[{ {}, { 3, 1, 2 ^ 62 } }] = 5
    assert.are.same({ 7, 8, 9 }, td.obs[1]:totable())
  end)

  it("td[{}] keeps every batch dim", function()
    local td = sample()
    check_against(td[{}], {}, { 4, 3 }, { 4, 3, 2 })
    check_against(td[{ {} }], { {} }, { 4, 3 }, { 4, 3, 2 })
    check_against(td[{ {}, {} }], { {}, {} }, { 4, 3 }, { 4, 3, 2 })
  end)

  it("T.newaxis inserts a batch dim of size 1 (before the leaves' trailing dims)", function()
    local td = sample()
    local r = td[{ T.newaxis }]
    assert.are.same({ 1, 4, 3 }, r:batch_size())
    assert.are.same({ 1, 4, 3, 5 }, r.pix:shape())
    assert.are.same({ 1, 4, 3, 2 }, r.inner.z:shape())
    check_against(r, { T.newaxis }, { 1, 4, 3 }, { 1, 4, 3, 2 })
    r = td[{ {}, {}, T.newaxis }]
    assert.are.same({ 4, 3, 1 }, r:batch_size())
    assert.are.same({ 4, 3, 1, 5 }, r.pix:shape()) -- not [4, 3, 5, 1]
    assert.are.same({ 4, 3, 1, 2 }, r.inner:batch_size())
    check_against(r, { {}, {}, T.newaxis }, { 4, 3, 1 }, { 4, 3, 1, 2 })
    check_against(td[{ 2, T.newaxis, { 1, 2 } }], { 2, T.newaxis, { 1, 2 } }, { 1, 2 }, { 1, 2, 2 })
  end)

  it("T.ellipsis covers batch dims only, never a leaf's trailing dims", function()
    local td = sample()
    local r = td[{ T.ellipsis, 2 }]
    assert.are.same({ 4 }, r:batch_size())
    assert.are.same({ 2, 5, 8, 11 }, r.obs:totable())
    assert.are.same({ 4, 5 }, r.pix:shape()) -- batch dim 2 selected, not the leaf's dim 3
    assert.are.same({ 6, 7, 8, 9, 10 }, r.pix[1]:totable())
    assert.are.same({ 4, 2 }, r.inner:batch_size())
    assert.are.same({ { 3, 4 }, { 9, 10 }, { 15, 16 }, { 21, 22 } }, r.inner.z:totable())
    check_against(r, { {}, 2 }, { 4 }, { 4, 2 })
    check_against(td[{ T.ellipsis }], {}, { 4, 3 }, { 4, 3, 2 })
    check_against(td[{ 1, T.ellipsis }], { 1 }, { 3 }, { 3, 2 })
    check_against(td[{ 1, T.ellipsis, 2 }], { 1, 2 }, {}, { 2 })
    check_against(td[{ T.ellipsis, T.newaxis }], { {}, {}, T.newaxis }, { 4, 3, 1 }, { 4, 3, 1, 2 })
    check_against(td[{ T.ellipsis, { -2, -1 } }], { {}, { -2, -1 } }, { 4, 2 }, { 4, 2, 2 })
  end)
end)

describe("TensorDict indexing: masks and index tensors", function()
  it("a 1-D bool mask selects rows of batch dim 1 (a copy)", function()
    local td = sample()
    local m = T.tensor({ true, false, true, true })
    local r = td[m]
    assert.are.same({ 3, 3 }, r:batch_size())
    assert.are.same({ { 1, 2, 3 }, { 7, 8, 9 }, { 10, 11, 12 } }, r.obs:totable())
    check_against(r, { m }, { 3, 3 }, { 3, 3, 2 })
    check_against(td[{ m }], { m }, { 3, 3 }, { 3, 3, 2 })
    -- after other entries: over batch dim 2
    local m2 = T.tensor({ false, true, true })
    check_against(td[{ -1, m2 }], { -1, m2 }, { 2 }, { 2, 2 })
    check_against(td[{ {}, m2 }], { {}, m2 }, { 4, 2 }, { 4, 2, 2 })
    check_against(td[{ T.ellipsis, m2 }], { {}, m2 }, { 4, 2 }, { 4, 2, 2 })
    -- all false: an empty batch dim
    check_against(td[T.zeros(4, "bool")], { T.zeros(4, "bool") }, { 0, 3 }, { 0, 3, 2 })
  end)

  it("a 2-D bool mask selects over both batch dims into one dim", function()
    local td = sample()
    local m = T.tensor({ { true, false, false }, { false, false, true }, { false, false, false },
      { false, true, true } })
    local r = td[m]
    assert.are.same({ 4 }, r:batch_size())
    assert.are.same({ 1, 6, 11, 12 }, r.obs:totable())
    assert.are.same({ 4, 5 }, r.pix:shape())
    assert.are.same({ 26, 27, 28, 29, 30 }, r.pix[2]:totable())
    assert.are.same({ 4, 2 }, r.inner:batch_size()) -- the nested dim past the parent stays
    assert.are.same({ { 1, 2 }, { 11, 12 }, { 21, 22 }, { 23, 24 } }, r.inner.z:totable())
    check_against(r, { m }, { 4 }, { 4, 2 })
    check_against(td[{ T.newaxis, m }], { T.newaxis, m }, { 1, 4 }, { 1, 4, 2 })
  end)

  it("rejects a mask whose shape does not match the batch dims it covers", function()
    local td = sample()
    H.raises(function() local _ = td[T.tensor({ true, false })] end,
      "index: mask of shape [2] does not match batch dims [4]")
    H.raises(function() local _ = td[T.zeros(4, 2, "bool")] end,
      "index: mask of shape [4, 2] does not match batch dims [4, 3]")
  end)

  it("a 1-D int64 tensor gathers batch positions, 1-based, negatives from the end", function()
    local td = sample()
    local idx = T.tensor({ 4, 1, 4, -3 }, "int64")
    local r = td[idx]
    assert.are.same({ 4, 3 }, r:batch_size())
    assert.are.same({ { 10, 11, 12 }, { 1, 2, 3 }, { 10, 11, 12 }, { 4, 5, 6 } }, r.obs:totable())
    check_against(r, { idx }, { 4, 3 }, { 4, 3, 2 })
    local j = T.tensor({ 3, 1 }, "int64")
    check_against(td[{ {}, j }], { {}, j }, { 4, 2 }, { 4, 2, 2 })
    check_against(td[{ 2, j }], { 2, j }, { 2 }, { 2, 2 })
    check_against(td[{ T.ellipsis, j }], { {}, j }, { 4, 2 }, { 4, 2, 2 })
    check_against(td[T.empty(0, "int64")], { T.empty(0, "int64") }, { 0, 3 }, { 0, 3, 2 })
  end)

  it("a 2-D int64 tensor gives two batch dims in its place", function()
    local td = sample()
    local idx = T.tensor({ { 1, 2 }, { 4, 4 } }, "int64")
    local r = td[idx]
    assert.are.same({ 2, 2, 3 }, r:batch_size())
    assert.are.same({ { { 1, 2, 3 }, { 4, 5, 6 } }, { { 10, 11, 12 }, { 10, 11, 12 } } }, r.obs:totable())
    assert.are.same({ 2, 2, 3, 5 }, r.pix:shape())
    assert.are.same({ 2, 2, 3, 2 }, r.inner:batch_size())
    check_against(r, { idx }, { 2, 2, 3 }, { 2, 2, 3, 2 })
    local j = T.tensor({ { 3 }, { 1 } }, "int64")
    check_against(td[{ {}, j }], { {}, j }, { 4, 2, 1 }, { 4, 2, 1, 2 })
  end)

  it("checks an index tensor against the batch dim it lands on, after numbers and new axes", function()
    local td = sample()
    local four = T.tensor({ 4 }, "int64")
    -- after a new axis the index still addresses batch dim 1 (size 4)
    check_against(td[{ T.newaxis, four }], { T.newaxis, four }, { 1, 1, 3 }, { 1, 1, 3, 2 })
    assert.are.same({ { { 10, 11, 12 } } }, td[{ T.newaxis, four }].obs:totable())
    -- after a number it addresses batch dim 2 (size 3)
    H.raises(function() local _ = td[{ 1, four }] end, "index 4 is out of range for dim 2 of size 3")
    H.raises(function() td[{ 1, four }] = 0 end, "index 4 is out of range for dim 2 of size 3")
    check_against(td[{ -1, T.tensor({ -1, 1 }, "int64") }], { -1, T.tensor({ -1, 1 }, "int64") }, { 2 }, { 2, 2 })
  end)

  it("rejects bad index tensors with the position and the dim", function()
    local td = sample()
    H.raises(function() local _ = td[T.tensor({ 1, 5 }, "int64")] end,
      "index 5 is out of range for dim 1 of size 4")
    H.raises(function() local _ = td[{ {}, T.tensor({ -4 }, "int64") }] end,
      "index -4 is out of range for dim 2 of size 3")
    H.raises(function() local _ = td[T.tensor({ 0 }, "int64")] end,
      "index: index 0 in dim 1: indices are 1-based")
    H.raises(function() local _ = td[T.tensor({ 1.5 }, "float32")] end,
      "index must have an integer dtype, got float32")
    H.raises(function() local _ = td[{ T.tensor({ 1 }, "int64"), T.tensor({ 1 }, "int64") }] end,
      "index: at most one mask or index tensor per index")
    assert.are.same(td[1]:batch_size(), td[T.tensor(1, "int64")]:batch_size()) -- as a number, as in torch
  end)
end)

describe("TensorDict indexing: nested containers and non-tensor values", function()
  it("indexes a nested container's shared batch dims only", function()
    local td = sample()
    local r = td[{ T.ellipsis, -1 }]
    assert.are.same({ 4, 2 }, r.inner:batch_size())
    assert.are.same({ { 5, 6 }, { 11, 12 }, { 17, 18 }, { 23, 24 } }, r.inner.z:totable())
    -- reading the nested container directly indexes its own 3 batch dims
    local direct = td.inner[{ T.ellipsis, -1 }]
    assert.are.same({ 4, 3 }, direct:batch_size())
    assert.are.same({ 2, 4, 6 }, direct.z[1]:totable())
    -- deeper nesting
    local deep = T.TensorDict({ a = { b = { c = T.arange(1, 4 * 3 * 2 * 2):view(4, 3, 2, 2) } } }, { 4 })
    local q = deep[{ { 2, 3 } }]
    assert.are.same({ 2 }, q.a:batch_size())
    assert.are.same({ 2 }, q.a.b:batch_size())
    assert.are.same({ 2, 3, 2, 2 }, q.a.b.c:shape())
    assert.are.equal(13, q.a.b.c[{ 1, 1, 1, 1 }])
  end)

  it("keeps a uniform non-tensor value through every index", function()
    local td = T.TensorDict({ x = T.zeros(4), s = "hello", n = 3, b = true, l = { 1, 2 } }, { 4 })
    for _, key in ipairs({ 2, { { 2, 3 } }, { T.newaxis }, T.tensor({ true, false, true, false }),
      T.tensor({ 4, 4, 1 }, "int64") }) do
      local r = td[key]
      assert.are.equal("hello", r.s)
      assert.are.equal(3, r.n)
      assert.are.equal(true, r.b)
      assert.are.same({ 1, 2 }, r.l)
    end
  end)

  it("indexes values stacked by T.stack back to their elements", function()
    local st = T.stack({ T.TensorDict({ v = "a", x = T.tensor(1) }), T.TensorDict({ v = "b", x = T.tensor(2) }),
      T.TensorDict({ v = "c", x = T.tensor(3) }) })
    assert.are.same({ 3 }, st:batch_size())
    assert.are.same({ "a", "b", "c" }, st.v)
    assert.are.equal("b", st[2].v)
    assert.are.equal("c", st[-1].v)
    assert.are.equal(2, st[2].x:item())
    assert.are.same({ "b", "c" }, st[{ { 2, 3 } }].v)
    assert.are.same({ "a", "c" }, st[{ { 1, 3, 2 } }].v)
    assert.are.same({}, st[{ { 3, 1 } }].v)
    assert.are.same({ { "a", "b", "c" } }, st[{ T.newaxis }].v)
    assert.are.same({ "c", "a", "c" }, st[T.tensor({ 3, 1, -1 }, "int64")].v)
    assert.are.same({ "a", "c" }, st[T.tensor({ true, false, true })].v)
    assert.are.same({ 1, 3 }, st[T.tensor({ true, false, true })].x:totable())
    local st2 = T.stack({ st, st[T.tensor({ 3, 2, 1 }, "int64")] })
    assert.are.same({ 2, 3 }, st2:batch_size())
    assert.are.same({ { "a", "b", "c" }, { "c", "b", "a" } }, st2.v)
    -- values equal along every dim collapse to one (docs/lua-api.md, Joins)
    assert.are.equal("b", st2[{ {}, 2 }].v)
    assert.are.same({ "c", "a" }, st2[{ T.ellipsis, 3 }].v)
    assert.are.equal("a", st2[{ 2, 3 }].v)
    assert.are.same({ "a", "c", "b" }, st2[T.tensor({ { true, false, true }, { false, true, false } })].v)
  end)
end)

describe("TensorDict indexing: memory", function()
  it("basic indices give views: writing into td[i].x changes td.x", function()
    local td = T.TensorDict({ x = T.zeros(4, 3), inner = { y = T.zeros(4, 2, "int64") } }, { 4 })
    td[2].x:fill_(5)
    assert.are.same({ { 0, 0, 0 }, { 5, 5, 5 }, { 0, 0, 0 }, { 0, 0, 0 } }, td.x:totable())
    td[{ { 3, 4 } }].x[{ {}, 1 }] = 7
    assert.are.same({ { 0, 0, 0 }, { 5, 5, 5 }, { 7, 0, 0 }, { 7, 0, 0 } }, td.x:totable())
    td[{ T.newaxis, -1 }].x:fill_(9)
    assert.are.same({ 9, 9, 9 }, td.x[4]:totable())
    td[{ T.ellipsis, { 1, 4, 3 } }].inner.y:fill_(2)
    assert.are.same({ { 2, 2 }, { 0, 0 }, { 0, 0 }, { 2, 2 } }, td.inner.y:totable())
    td[1].inner.y[2] = 8
    assert.are.same({ 2, 8 }, td.inner.y[1]:totable())
    td[{}].x:fill_(1)
    assert.are.same({ 1, 1, 1 }, td.x[1]:totable())
  end)

  it("masks and index tensors give copies", function()
    local td = T.TensorDict({ x = T.zeros(4, 3) }, { 4 })
    td[T.tensor({ true, true, false, false })].x:fill_(5)
    td[T.tensor({ 1, 2 }, "int64")].x:fill_(6)
    td[T.tensor({ { 1 } }, "int64")].x:fill_(7)
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } }, td.x:totable())
  end)
end)

describe("TensorDict index assignment", function()
  local function target()
    return T.TensorDict({
      x = T.zeros(4, 3),
      y = T.zeros(4, "int64"),
      inner = T.TensorDict({ z = T.zeros(4, 2, "float64") }, { 4, 2 }),
      tag = "t",
    }, { 4 })
  end

  it("broadcasts a TensorDict of batch size [] into a range (td[{{1,1}}] = td[2])", function()
    local td = target()
    td.x:copy_(T.arange(1, 12, "float32"):view(4, 3))
    td.y:copy_(T.tensor({ 10, 20, 30, 40 }, "int64"))
    td[{ { 1, 1 } }] = td[2]
    assert.are.same({ { 4, 5, 6 }, { 4, 5, 6 }, { 7, 8, 9 }, { 10, 11, 12 } }, td.x:totable())
    assert.are.same({ 20, 20, 30, 40 }, td.y:totable())
    td[{ { 2, 4 } }] = td[1]
    assert.are.same({ 20, 20, 20, 20 }, td.y:totable())
  end)

  it("writes a TensorDict of the selection's batch size, casting to each leaf's dtype", function()
    local td = target()
    td[{ { 2, 3 } }] = T.TensorDict({
      x = T.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }),
      y = T.tensor({ 7.9, -8 }, "float64"), -- cast into int64 (truncates)
      inner = T.TensorDict({ z = T.full({ 2, 2 }, 0.5, "float32") }, { 2, 2 }),
      tag = "t",
    }, { 2 })
    assert.are.same({ { 0, 0, 0 }, { 1, 2, 3 }, { 4, 5, 6 }, { 0, 0, 0 } }, td.x:totable())
    assert.are.same({ 0, 7, -8, 0 }, td.y:totable())
    assert.are.equal("int64", td.y:dtype())
    assert.are.same({ { 0, 0 }, { 0.5, 0.5 }, { 0.5, 0.5 }, { 0, 0 } }, td.inner.z:totable())
  end)

  it("fills every leaf with a number or a boolean", function()
    local td = target()
    td[3] = 2.5
    assert.are.same({ 2.5, 2.5, 2.5 }, td.x[3]:totable())
    assert.are.same({ 0, 0, 2, 0 }, td.y:totable()) -- truncated into int64
    assert.are.same({ 2.5, 2.5 }, td.inner.z[3]:totable())
    td[{ T.ellipsis }] = true
    assert.are.same({ 1, 1, 1, 1 }, td.y:totable())
    local b = T.TensorDict({ f = T.zeros(2, 2, "bool") }, { 2, 2 })
    b[{ {}, 2 }] = 1
    assert.are.same({ { false, true }, { false, true } }, b.f:totable())
  end)

  it("converts a Lua table of tensors into a TensorDict of batch size []", function()
    local td = target()
    td[-1] = { x = T.tensor({ 1, 2, 3 }), y = T.tensor(9, "int64"), inner = { z = T.tensor({ 4, 5 }, "float64") },
      tag = "t" }
    assert.are.same({ 1, 2, 3 }, td.x[4]:totable())
    assert.are.same({ 0, 0, 0, 9 }, td.y:totable())
    assert.are.same({ 4, 5 }, td.inner.z[4]:totable())
    -- leaves broadcast into the selection
    td[{ { 1, 2 } }] = { x = T.tensor({ { 1 }, { 2 } }), y = T.tensor({ 5, 6 }, "int64"),
      inner = { z = T.ones(2, 2, "float64") }, tag = "t" }
    assert.are.same({ { 1, 1, 1 }, { 2, 2, 2 } }, td.x[{ { 1, 2 } }]:totable())
    assert.are.same({ 5, 6, 0, 9 }, td.y:totable())
  end)

  it("masked assignment writes the rows where the mask is true", function()
    local td = target()
    local m = T.tensor({ true, false, false, true })
    td[m] = 3
    assert.are.same({ 3, 0, 0, 3 }, td.y:totable())
    assert.are.same({ { 3, 3 }, { 0, 0 }, { 0, 0 }, { 3, 3 } }, td.inner.z:totable())
    td[m] = T.TensorDict({ x = T.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }), y = T.tensor({ 7, 8 }, "int64"),
      inner = T.TensorDict({ z = T.ones(2, 2, "float64") }, { 2, 2 }), tag = "t" }, { 2 })
    assert.are.same({ { 1, 2, 3 }, { 0, 0, 0 }, { 0, 0, 0 }, { 4, 5, 6 } }, td.x:totable())
    assert.are.same({ 7, 0, 0, 8 }, td.y:totable())
    -- a value of batch size [] broadcasts over the selected rows
    td[T.tensor({ false, true, true, false })] = td[1]
    assert.are.same({ 7, 7, 7, 8 }, td.y:totable())
    assert.are.same({ { 1, 2, 3 }, { 1, 2, 3 }, { 1, 2, 3 }, { 4, 5, 6 } }, td.x:totable())
    -- a 2-D mask over two batch dims
    local g = T.TensorDict({ a = T.zeros(2, 3, "int64"), b = T.zeros(2, 3, 2) }, { 2, 3 })
    g[T.tensor({ { true, false, true }, { false, true, false } })] =
      T.TensorDict({ a = T.tensor({ 1, 2, 3 }, "int64"), b = T.tensor({ { 4, 4 }, { 5, 5 }, { 6, 6 } }) }, { 3 })
    assert.are.same({ { 1, 0, 2 }, { 0, 3, 0 } }, g.a:totable())
    assert.are.same({ { { 4, 4 }, { 0, 0 }, { 5, 5 } }, { { 0, 0 }, { 6, 6 }, { 0, 0 } } }, g.b:totable())
  end)

  it("index tensor assignment writes the gathered positions", function()
    local td = target()
    td[T.tensor({ 4, 2 }, "int64")] = T.TensorDict({ x = T.tensor({ { 1, 1, 1 }, { 2, 2, 2 } }),
      y = T.tensor({ 40, 20 }, "int64"), inner = T.TensorDict({ z = T.ones(2, 2, "float64") }, { 2, 2 }),
      tag = "t" }, { 2 })
    assert.are.same({ 0, 20, 0, 40 }, td.y:totable())
    assert.are.same({ { 0, 0, 0 }, { 2, 2, 2 }, { 0, 0, 0 }, { 1, 1, 1 } }, td.x:totable())
    assert.are.same({ { 0, 0 }, { 1, 1 }, { 0, 0 }, { 1, 1 } }, td.inner.z:totable())
    td[T.tensor({ -1, 1 }, "int64")] = -5
    assert.are.same({ -5, 20, 0, -5 }, td.y:totable())
    local g = T.TensorDict({ a = T.zeros(2, 3, "int64") }, { 2, 3 })
    g[{ {}, T.tensor({ 3, 1 }, "int64") }] = T.TensorDict({ a = T.tensor({ 7, 8 }, "int64") }, { 2 })
    assert.are.same({ { 8, 0, 7 }, { 8, 0, 7 } }, g.a:totable())
  end)

  it("a 2-D index tensor takes a value shaped like what it reads", function()
    local g = T.TensorDict({ y = T.zeros(4, 3, "int64") }, { 4, 3 })
    local idx = T.tensor({ { 1, 2 }, { 3, 4 } }, "int64")
    g[idx] = T.TensorDict({ y = T.arange(0, 11, "int64"):view(2, 2, 3) }, { 2, 2, 3 })
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 }, { 6, 7, 8 }, { 9, 10, 11 } }, g.y:totable())
  end)

  it("collector-style writes out[{{t, t}}] = step fill one time step each", function()
    local out = T.TensorDict({ obs = T.zeros(5, 2, 3), r = T.zeros(5, 2), info = { done = T.zeros(5, 2, "bool") } },
      { 5, 2 })
    for t = 1, 5 do
      local step = T.TensorDict({ obs = T.full({ 2, 3 }, t), r = T.full({ 2 }, 10 * t),
        info = { done = T.full({ 2 }, t == 5) } }, { 2 })
      out[{ { t, t } }] = step
    end
    assert.are.same({ { 10, 10 }, { 20, 20 }, { 30, 30 }, { 40, 40 }, { 50, 50 } }, out.r:totable())
    assert.are.same({ 3, 3, 3 }, out.obs[{ 3, 2 }]:totable())
    assert.are.same({ false, false, false, false, true }, out.info.done[{ {}, 1 }]:totable())
    -- a step of batch size [1, 2] fits too
    for t = 1, 5 do
      out[{ { t, t } }] = T.TensorDict({ obs = T.full({ 1, 2, 3 }, -t), r = T.full({ 1, 2 }, -t),
        info = { done = T.full({ 1, 2 }, false) } }, { 1, 2 })
    end
    assert.are.same({ -1, -2, -3, -4, -5 }, out.r[{ {}, 2 }]:totable())
    assert.are.same({ false, false, false, false, false }, out.info.done[{ {}, 1 }]:totable())
  end)

  it("accepts equal non-tensor values and writes differing ones element-wise", function()
    local td = target()
    td[1] = T.TensorDict({ x = T.ones(3), y = T.tensor(1, "int64"), inner = { z = T.ones(2, "float64") },
      tag = "t" })
    assert.are.same({ 1, 0, 0, 0 }, td.y:totable())
    assert.are.equal("t", td.tag)
    td[1] = T.TensorDict({ x = T.ones(3), y = T.tensor(1, "int64"), inner = { z = T.ones(2, "float64") },
      tag = "other" })
    assert.are.same({ "other", "t", "t", "t" }, td.tag) -- Python writes into a NonTensorStack
  end)

  it("writes the keys the value has, makes the ones only it has, raises on kind mismatches", function()
    local td = target()
    -- keys missing from the value are left as they are, as in Python
    td[1] = T.TensorDict({ x = T.ones(3), inner = { z = T.ones(2, "float64") }, tag = "t" })
    assert.are.same({ 0, 0, 0, 0 }, td.y:totable())
    assert.are.same({ 1, 1, 1 }, td.x[1]:totable())
    td[2] = T.TensorDict({ x = T.ones(3), y = T.tensor(1, "int64"), inner = T.TensorDict({}, { 2 }), tag = "t" })
    assert.are.same({ 0, 1, 0, 0 }, td.y:totable())
    H.raises(function()
      td[1] = T.TensorDict({ x = T.ones(3), y = T.tensor(1, "int64"), inner = T.ones(2), tag = "t" })
    end, "index assignment: key 'inner' is a TensorDict here and a leaf in the value")
    -- a key of the value that the TensorDict lacks is made (zeros elsewhere), not dropped
    td[1] = T.TensorDict({ x = T.ones(3), y = T.tensor(1, "int64"), inner = { z = T.ones(2, "float64") },
      tag = "t", extra = T.ones(2) })
    assert.are.same({ { 1, 1 }, { 0, 0 }, { 0, 0 }, { 0, 0 } }, td.extra:totable())
  end)

  it("raises on shape mismatches, naming the shapes", function()
    local td = target()
    H.raises(function()
      td[{ { 1, 2 } }] = T.TensorDict({ x = T.ones(3, 3), y = T.ones(3, "int64"),
        inner = T.TensorDict({ z = T.ones(3, 2, "float64") }, { 3, 2 }), tag = "t" }, { 3 })
    end, "index assignment", "[3]", "[2]")
    H.raises(function()
      td[1] = T.TensorDict({ x = T.ones(4), y = T.tensor(1, "int64"), inner = { z = T.ones(2, "float64") },
        tag = "t" })
    end, "index assignment: key 'x': a value of shape [4] does not broadcast to shape [3]")
    H.raises(function()
      td[2] = T.TensorDict({ x = T.ones(2, 3), y = T.ones(2, "int64"),
        inner = T.TensorDict({ z = T.ones(2, 2, "float64") }, { 2, 2 }), tag = "t" }, { 2 })
    end, "index assignment: a TensorDict of batch size [2] does not fit the selection of batch size []")
    H.raises(function() td[T.tensor({ true, false })] = 1 end,
      "index: mask of shape [2] does not match batch dims [4]")
  end)

  it("rejects values that are not a TensorDict, a table or a number", function()
    local td = target()
    H.raises(function() td[1] = "s" end,
      "index assignment: the value must be a TensorDict, a table or a number, got 's'")
    H.raises(function() td[1] = nil end, "index assignment: the value must be a TensorDict, a table or a number")
    H.raises(function() td[1] = T.ones(3) end,
      "index assignment: the value must be a TensorDict, a table or a number")
  end)
end)

describe("TensorDict get_at and set_at_", function()
  local function td5()
    return T.TensorDict({ x = T.arange(1, 12, "float32"):view(4, 3), inner = { z = T.arange(1, 4, "int64") } }, { 4 })
  end

  it("get_at(key, idx) is td:get(key)[idx], a view for basic indices", function()
    local td = td5()
    assert.are.same({ 4, 5, 6 }, td:get_at("x", 2):totable())
    assert.are.equal(6, td:get_at("x", { 2, 3 }))
    assert.are.equal(12, td:get_at("x", { -1, -1 }))
    assert.are.same({ 2, 3 }, td:get_at({ "inner", "z" }, { { 2, 3 } }):totable())
    assert.are.equal(4, td:get_at({ "inner", "z" }, -1))
    assert.are.same({ 3, 1 }, td:get_at({ "inner", "z" }, T.tensor({ 3, 1 }, "int64")):totable())
    td:get_at("x", 1):fill_(42)
    assert.are.same({ 42, 42, 42 }, td.x[1]:totable())
  end)

  it("set_at_(key, value, idx) writes through and returns the TensorDict", function()
    local td = td5()
    assert.are.equal(td, td:set_at_("x", 0, { 2, 3 }))
    assert.are.same({ 4, 5, 0 }, td.x[2]:totable())
    td:set_at_({ "inner", "z" }, T.tensor({ 7, 8 }, "int64"), { { 1, 2 } })
    assert.are.same({ 7, 8, 3, 4 }, td.inner.z:totable())
    td:set_at_("x", T.tensor({ 1, 2, 3 }), -1)
    assert.are.same({ 1, 2, 3 }, td.x[4]:totable())
    td:set_at_("x", -1, T.tensor({ true, false, false, false }))
    assert.are.same({ -1, -1, -1 }, td.x[1]:totable())
  end)

  it("raises for a missing key or a bad index", function()
    local td = td5()
    H.raises(function() td:get_at("nope", 1) end, "get_at: no key 'nope' in the TensorDict (keys: 'inner', 'x')")
    H.raises(function() td:set_at_("nope", 1, 1) end, "set_at_: no key 'nope' in the TensorDict")
    H.raises(function() td:get_at("x", 9) end, "index 9 is out of range for dim 1 of size 4")
    H.raises(function() td:set_at_("x", T.ones(2), 1) end,
      "copy_: source shape [2] does not broadcast to destination shape [3]")
  end)
end)

describe("TensorDict shape ops over batch dims", function()
  -- batch [4, 3]; a has no trailing dims, b has [5], inner has batch [4, 3, 2].
  local function shaped()
    return T.TensorDict({
      a = T.arange(1, 12, "int64"):view(4, 3),
      b = T.arange(1, 60, "float32"):view(4, 3, 5),
      inner = T.TensorDict({ c = T.arange(1, 24, "int32"):view(4, 3, 2) }, { 4, 3, 2 }),
      tag = "t",
    }, { 4, 3 })
  end

  -- r's leaves must be the plain tensors under the same op (given as a function of a
  -- tensor and the count of its trailing dims).
  local function check_op(r, batch, op)
    local s = shaped()
    assert.are.same(batch, r:batch_size())
    for _, k in ipairs({ "a", "b" }) do
      local want = op(s[k], s[k]:dim() - 2)
      assert.are.same(want:shape(), r[k]:shape(), k)
      assert.are.same(want:totable(), r[k]:totable(), k)
      assert.are.equal(s[k]:dtype(), r[k]:dtype(), k)
    end
    local want = op(s.inner.c, 1)
    assert.are.same(want:shape(), r.inner.c:shape())
    assert.are.same(want:totable(), r.inner.c:totable())
    local ib = r:batch_size()
    ib[#ib + 1] = 2
    assert.are.same(ib, r.inner:batch_size())
    assert.are.equal("t", r.tag)
  end

  local function trailing(t, extra, dims)
    for i = t:dim() - extra + 1, t:dim() do dims[#dims + 1] = t:size(i) end
    return dims
  end

  it("view and reshape (with -1) keep the trailing dims", function()
    local td = shaped()
    check_op(td:view(12), { 12 }, function(t, e) return t:reshape(trailing(t, e, { 12 })) end)
    check_op(td:view(-1), { 12 }, function(t, e) return t:reshape(trailing(t, e, { 12 })) end)
    check_op(td:view({ 2, -1 }), { 2, 6 }, function(t, e) return t:reshape(trailing(t, e, { 2, 6 })) end)
    check_op(td:reshape(3, 4), { 3, 4 }, function(t, e) return t:reshape(trailing(t, e, { 3, 4 })) end)
    check_op(td:reshape(-1, 2, 1), { 6, 2, 1 }, function(t, e) return t:reshape(trailing(t, e, { 6, 2, 1 })) end)
    assert.are.same({ 12, 5 }, td:view(12).b:shape())
    local p = td:permute(2, 1)
    check_op(p:reshape(12), { 12 }, function(t, e)
      local perm = { 2, 1 }
      for i = 3, 2 + e do perm[i] = i end
      return t:permute(perm):reshape(trailing(t, e, { 12 }))
    end)
  end)

  it("views share memory with the source", function()
    local td = shaped()
    td:view(12)[5].b:fill_(0)
    assert.are.same({ 0, 0, 0, 0, 0 }, td.b[{ 2, 2 }]:totable())
    td:permute(2, 1)[{ 3, 1 }].a:fill_(-1)
    assert.are.equal(-1, td.a[{ 1, 3 }])
    td:unsqueeze(1)[{ 1, 4, 3 }].inner.c:fill_(0)
    assert.are.same({ 0, 0 }, td.inner.c[{ 4, 3 }]:totable())
    td:transpose(1, 2)[1].a:fill_(9) -- column 1
    assert.are.same({ { 9, 2, -1 }, { 9, 5, 6 }, { 9, 8, 9 }, { 9, 11, 12 } }, td.a:totable())
  end)

  it("permute and transpose move batch dims only", function()
    local td = shaped()
    local function swap(t, e)
      local perm = { 2, 1 }
      for i = 3, 2 + e do perm[i] = i end
      return t:permute(perm)
    end
    check_op(td:permute(2, 1), { 3, 4 }, swap)
    check_op(td:permute({ 2, 1 }), { 3, 4 }, swap)
    check_op(td:permute(-1, -2), { 3, 4 }, swap)
    check_op(td:transpose(1, 2), { 3, 4 }, swap)
    check_op(td:transpose(-1, 1), { 3, 4 }, swap)
    check_op(td:transpose(2, 2), { 4, 3 }, function(t) return t end)
    assert.are.same({ 3, 4, 5 }, td:permute(2, 1).b:shape())
    assert.are.same({ 3, 4, 2 }, td:transpose(1, 2).inner:batch_size())
  end)

  it("unsqueeze and squeeze (all or one dim) act on batch dims", function()
    local td = shaped()
    check_op(td:unsqueeze(1), { 1, 4, 3 }, function(t) return t:unsqueeze(1) end)
    check_op(td:unsqueeze(2), { 4, 1, 3 }, function(t) return t:unsqueeze(2) end)
    check_op(td:unsqueeze(3), { 4, 3, 1 }, function(t) return t:unsqueeze(3) end)
    check_op(td:unsqueeze(-1), { 4, 3, 1 }, function(t) return t:unsqueeze(3) end)
    check_op(td:unsqueeze(-3), { 1, 4, 3 }, function(t) return t:unsqueeze(1) end)
    assert.are.same({ 4, 3, 1, 5 }, td:unsqueeze(-1).b:shape())
    local u = td:unsqueeze(1):unsqueeze(3) -- [1, 4, 1, 3]
    assert.are.same({ 1, 4, 1, 3 }, u:batch_size())
    check_op(u:squeeze(), { 4, 3 }, function(t) return t end)
    check_op(u:squeeze(1), { 4, 1, 3 }, function(t) return t:unsqueeze(2) end)
    check_op(u:squeeze(3), { 1, 4, 3 }, function(t) return t:unsqueeze(1) end)
    check_op(u:squeeze(-2), { 1, 4, 3 }, function(t) return t:unsqueeze(1) end)
    check_op(u:squeeze(2), { 1, 4, 1, 3 }, function(t) return t:unsqueeze(1):unsqueeze(3) end) -- size 4: kept
    -- squeeze() leaves the trailing size-1 dims of a leaf alone
    local o = T.TensorDict({ x = T.zeros(1, 2, 1, 1) }, { 1, 2 })
    assert.are.same({ 2 }, o:squeeze():batch_size())
    assert.are.same({ 2, 1, 1 }, o:squeeze().x:shape())
  end)

  it("expand broadcasts size-1 batch dims and adds leading ones", function()
    local td = shaped()
    local r = td[{ {}, { 2, 2 } }]:expand(4, 6)
    assert.are.same({ 4, 6 }, r:batch_size())
    assert.are.same({ 4, 6, 5 }, r.b:shape())
    assert.are.same({ 4, 6, 2 }, r.inner.c:shape())
    assert.are.same({ 5, 5, 5, 5, 5, 5 }, r.a[2]:totable())
    check_op(td:expand(2, 4, 3), { 2, 4, 3 }, function(t, e)
      return t:expand(trailing(t, e, { 2, 4, 3 }))
    end)
    check_op(td:expand({ 4, 3 }), { 4, 3 }, function(t) return t end)
    check_op(td:expand(-1, 3), { 4, 3 }, function(t) return t end)
  end)

  it("flatten(a, b) and unflatten(d, sizes) over batch dims", function()
    local td = shaped():unsqueeze(1) -- [1, 4, 3]
    local function flat(t, e) return t:reshape(trailing(t, e, { 12 })) end
    local r = td:flatten(2, 3)
    assert.are.same({ 1, 12 }, r:batch_size())
    assert.are.same({ 1, 12, 5 }, r.b:shape())
    assert.are.same({ 1, 12, 2 }, r.inner:batch_size())
    check_op(td:flatten(), { 12 }, flat)
    check_op(td:flatten(1, -1), { 12 }, flat)
    check_op(shaped():flatten(1, 2), { 12 }, flat)
    check_op(shaped():flatten(2, 2), { 4, 3 }, function(t) return t end)
    local f = shaped():flatten()
    check_op(f:unflatten(1, { 4, 3 }), { 4, 3 }, function(t) return t end)
    check_op(f:unflatten(1, { 2, -1 }), { 2, 6 }, function(t, e) return t:reshape(trailing(t, e, { 2, 6 })) end)
    check_op(f:unflatten(-1, { 3, 2, 2 }), { 3, 2, 2 }, function(t, e)
      return t:reshape(trailing(t, e, { 3, 2, 2 }))
    end)
    check_op(shaped():unflatten(1, { 2, 2 }), { 2, 2, 3 }, function(t, e)
      return t:reshape(trailing(t, e, { 2, 2, 3 }))
    end)
  end)

  it("set_batch_size shrinks or grows the batch over the leaves' leading dims", function()
    local td = T.TensorDict({ a = T.zeros(4, 3, 2), inner = T.TensorDict({ c = T.zeros(4, 3, 2, 5) }, { 4, 3, 2 }) },
      { 4, 3 })
    assert.are.equal(td, td:set_batch_size({ 4 }))
    assert.are.same({ 4 }, td:batch_size())
    assert.are.same({ 4, 3, 2 }, td.inner:batch_size())
    td:set_batch_size({ 4, 3, 2 })
    assert.are.same({ 4, 3, 2 }, td:batch_size())
    assert.are.same({ 3, 2 }, td[1]:batch_size())
    assert.are.same({ 5 }, td[{ 1, 1, 1 }].inner.c:shape())
    H.raises(function() td:set_batch_size({ 4, 4 }) end, "[4, 4] does not match the leading dims of 'a' ([4, 3, 2])")
    H.raises(function() td:set_batch_size("x") end, "set_batch_size: batch_size must be a table of sizes, got 'x'")
    assert.are.same({ 4, 3, 2 }, td:batch_size())
  end)

  it("rejects bad sizes and dims", function()
    local td = shaped()
    H.raises(function() td:view(5) end, "view: shape [5] is invalid for a tensor of shape [4, 3] (12 elements)")
    H.raises(function() td:view(-1, -1) end, "view: invalid shape [-1, -1]")
    H.raises(function() td:reshape(7, -1) end, "shape [7, -1] is invalid for a tensor of shape [4, 3]")
    H.raises(function() td:view(5, 0) end, "shape [5, 0] is invalid")
    H.raises(function() td:permute(1) end, "permute: 1 dims given for 2 batch dims")
    H.raises(function() td:permute(1, 3) end, "permute: dim 3 is out of range", "1..2")
    H.raises(function() td:permute(1, 1) end, "permute: dim 1 appears twice")
    H.raises(function() td:permute(2, -1) end, "permute: dim 2 appears twice")
    H.raises(function() td:transpose(1, 3) end, "transpose: dim 3 is out of range")
    H.raises(function() td:squeeze(3) end, "squeeze: dim 3 is out of range")
    H.raises(function() td:unsqueeze(4) end, "unsqueeze: dim 4 is out of range", "1..3")
    H.raises(function() td:expand(5, 3) end, "expand: cannot expand shape [4, 3] to [5, 3]")
    H.raises(function() td:expand(3) end, "expand: cannot expand shape [4, 3] to 1 dims")
    H.raises(function() td:flatten(2, 1) end, "flatten: dims 2..1 for 2 batch dims")
    H.raises(function() td:unflatten(1, { 3, 3 }) end, "unflatten: sizes [3, 3] do not multiply to 4")
    H.raises(function() td:unflatten(1, 4) end, "unflatten: sizes must be a table, got 4")
    H.raises(function() td:unflatten(3, { 1 }) end, "unflatten: dim 3 is out of range")
  end)
end)

describe("TensorDict dim names follow indexing and shape ops", function()
  local function named()
    return T.TensorDict({ a = T.arange(1, 24, "float32"):view(4, 3, 2) }, { 4, 3, 2 }, { names = { "x", "y", "z" } })
  end

  it("through basic indices", function()
    local td = named()
    assert.are.same({ "y", "z" }, names_of(td[1]))
    assert.are.same({ "x", "z" }, names_of(td[{ {}, 1 }]))
    assert.are.same({ "x", "y", "z" }, names_of(td[{ { 1, 2 } }]))
    assert.are.same({ false, "x", "y", "z" }, names_of(td[{ T.newaxis }]))
    assert.are.same({ "x", false, "z" }, names_of(td[{ {}, T.newaxis, 2 }]))
    assert.are.same({ "x", "y" }, names_of(td[{ T.ellipsis, 1 }]))
    assert.are.same({ "y", "z", false }, names_of(td[{ 1, T.ellipsis, T.newaxis }]))
  end)

  it("through masks and index tensors (as Python tensordict)", function()
    local td = named()
    -- a 1-D mask or index keeps its dim's name
    assert.are.same({ "x", "y", "z" }, names_of(td[T.tensor({ true, false, true, true })]))
    assert.are.same({ "x", "y", "z" }, names_of(td[T.tensor({ 1, 2 }, "int64")]))
    assert.are.same({ "x", "y", "z" }, names_of(td[{ {}, T.tensor({ 1, 2 }, "int64") }]))
    -- a 2-D mask merges two named dims into one unnamed dim
    local m = T.zeros(4, 3, "bool")
    m[{ 1, 1 }] = true
    m[{ 2, 3 }] = true
    local r = td[m]
    assert.are.same({ 2, 2 }, r:batch_size())
    assert.are.same({ false, "z" }, names_of(r))
    -- a 2-D index tensor gives two unnamed dims
    r = td[T.tensor({ { 1, 2 }, { 3, 4 } }, "int64")]
    assert.are.same({ 2, 2, 3, 2 }, r:batch_size())
    assert.are.same({ false, false, "y", "z" }, names_of(r))
  end)

  it("through permute, transpose, unsqueeze and squeeze", function()
    local td = named()
    assert.are.same({ "z", "x", "y" }, names_of(td:permute(3, 1, 2)))
    assert.are.same({ "z", "y", "x" }, names_of(td:transpose(1, 3)))
    assert.are.same({ false, "x", "y", "z" }, names_of(td:unsqueeze(1)))
    assert.are.same({ "x", false, "y", "z" }, names_of(td:unsqueeze(2)))
    assert.are.same({ "x", "y", "z", false }, names_of(td:unsqueeze(-1)))
    local o = T.TensorDict({ a = T.zeros(4, 1, 2, 1) }, { 4, 1, 2, 1 }, { names = { "x", "y", "z", "w" } })
    assert.are.same({ "x", "z" }, names_of(o:squeeze()))
    assert.are.same({ "x", "z", "w" }, names_of(o:squeeze(2)))
    assert.are.same({ "x", "y", "z" }, names_of(o:squeeze(-1)))
    assert.are.same({ "x", "y", "z", "w" }, names_of(o:squeeze(1)))
    assert.are.same({ "x", "y", "z" }, names_of(td:expand(4, 3, 2)))
  end)

  it("through expand with new dims, flatten and set_batch_size (as Python tensordict)", function()
    assert.are.same({ false, "x", "y", "z" }, names_of(named():expand(5, 4, 3, 2)))
    assert.are.same({ false, "z" }, names_of(named():flatten(1, 2)))
    assert.are.same({ "x", "y" }, names_of(named():set_batch_size({ 4, 3 })))
  end)
end)

describe("TensorDict indexing errors", function()
  it("a TensorDict of batch size [] has no batch dims to index", function()
    local td = T.TensorDict({ a = T.zeros(2) })
    H.raises(function() local _ = td[1] end,
      "index: the TensorDict has no batch dims (batch size []) to index")
    H.raises(function() local _ = td[{}] end, "index: the TensorDict has no batch dims")
    H.raises(function() local _ = td[{ T.newaxis }] end, "index: the TensorDict has no batch dims")
    H.raises(function() local _ = td[T.tensor({ true })] end, "index: the TensorDict has no batch dims")
    H.raises(function() td[1] = 0 end, "index assignment: the TensorDict has no batch dims")
    assert.are.same({ 0, 0 }, td.a:totable())
  end)

  it("an index out of range names the index and the dim size", function()
    local td = sample()
    H.raises(function() local _ = td[5] end,
      "index 5 is out of range for dim 1 of size 4 (valid: 1..4 or -4..-1)")
    H.raises(function() local _ = td[-5] end, "index -5 is out of range for dim 1 of size 4")
    H.raises(function() local _ = td[{ 1, 4 }] end,
      "index 4 is out of range for dim 2 of size 3 (valid: 1..3 or -3..-1)")
    H.raises(function() local _ = td[{ T.ellipsis, -4 }] end, "index -4 is out of range for dim 2 of size 3")
    H.raises(function() td[{ 2, 9 }] = 0 end, "index 9 is out of range for dim 2 of size 3")
    local e = T.TensorDict({ a = T.zeros(0, 2) }, { 0 })
    H.raises(function() local _ = e[1] end, "index 1 is out of range for dim 1 of size 0")
  end)

  it("index 0 is an error (indices are 1-based)", function()
    local td = sample()
    H.raises(function() local _ = td[0] end, "index 0 is out of range for dim 1 of size 4")
    H.raises(function() local _ = td[{ 1, 0 }] end, "index 0 is out of range for dim 2 of size 3")
    H.raises(function() local _ = td[{ { 0, 2 } }] end,
      "index: range [0, 2] for dim 1 holds 0; indices are 1-based")
    H.raises(function() local _ = td[{ {}, { 1, 2, 0 } }] end, "index: range step must be positive, got 0 (dim 2)")
  end)

  it("too many indices for the batch dims", function()
    local td = sample() -- batch [4, 3]; pix is [4, 3, 5]
    H.raises(function() local _ = td[{ 1, 1, 1 }] end, "3 indices", "2 batch dims")
    H.raises(function() local _ = td[{ 1, T.ellipsis, 1, 1 }] end, "3 indices", "2 batch dims")
    H.raises(function() local _ = td[{ {}, T.zeros(3, 5, "bool") }] end, "3 indices", "2 batch dims")
  end)

  it("rejects malformed entries", function()
    local td = sample()
    H.raises(function() local _ = td[1.5] end, "index: 1.5 is not an integer index (dim 1)")
    H.raises(function() local _ = td[true] end, "index: cannot index a tensor with true")
    H.raises(function() local _ = td[{ T.ellipsis, T.ellipsis }] end, "index: at most one ellipsis per index")
    H.raises(function() local _ = td[{ { 1, 2, 3, 4 } }] end, "index: range [1, 2, 3, 4] for dim 1 must be {a, b}")
  end)

  it("a table of strings is a key path, not an index", function()
    local td = sample()
    local z = td[{ "inner", "z" }]
    assert.is_true(T.is_tensor(z))
    assert.are.same({ 4, 3, 2 }, z:shape())
    assert.are.same({ 1, 2 }, z[{ 1, 1 }]:totable())
    assert.are.equal("float32", td[{ "obs" }]:dtype())
    td[{ "inner", "w" }] = T.zeros(4, 3, 2)
    assert.is_true(td.inner:has("w"))
    H.raises(function() local _ = td[{ "inner", "missing" }] end,
      "index: no key {\"inner\", \"missing\"} in the TensorDict")
    H.raises(function() local _ = td[{ "obs", "b" }] end,
      "key path {\"obs\", \"b\"} goes through 'obs', which is a tensor, not a TensorDict")
    H.raises(function() local _ = td.nope end, "index: no key 'nope' in the TensorDict")
  end)
end)

---------------------------------------------------------------- randomized check

local rand = math.random

local numel = require("random_keys").numel

local function concat(a, b)
  local out = {}
  for _, v in ipairs(a) do out[#out + 1] = v end
  for _, v in ipairs(b) do out[#out + 1] = v end
  return out
end

-- Distinct values (from offset) of this shape and dtype.
local function filled(shape, dtype, offset)
  local n = numel(shape)
  if n == 0 then return T.zeros(shape, dtype) end
  if dtype == "bool" then
    return T.arange(offset, offset + n - 1, "int64"):remainder(3):eq(0):view(shape)
  end
  return T.arange(offset, offset + n - 1, "int64"):to(dtype):view(shape)
end

-- Leaves: name -> {dtype, trailing dims}; "deep" lives in a nested container whose
-- batch has one more dim (of size 2) than the parent's.
local LEAVES = {
  { "obs", "float32", { 2 } },
  { "act", "int64", {} },
  { "flag", "bool", { 3 } },
  { "code", "int32", { 2, 1 } },
  { "wide", "float64", {} },
}

local function random_td(batch, offset)
  local src = {}
  for i, spec in ipairs(LEAVES) do
    src[spec[1]] = filled(concat(batch, spec[3]), spec[2], offset + 1000 * i)
  end
  local ib = concat(batch, { 2 })
  src.nest = T.TensorDict({ deep = filled(concat(ib, { 3 }), "uint8", offset % 200) }, ib)
  src.tag = "same"
  return T.TensorDict(src, batch)
end

local random_entry = require("random_keys").entry

local function random_mask(shape)
  if numel(shape) == 0 then return T.zeros(shape, "bool") end
  local flat = {}
  for i = 1, numel(shape) do flat[i] = rand() < 0.5 end
  return T.tensor(flat, "bool"):view(shape)
end

local function random_index(size, two_d)
  local n = size == 0 and 0 or rand(0, 4)
  local count = two_d and 2 * n or n
  if count == 0 then return two_d and T.empty(2, 0, "int64") or T.empty(0, "int64") end
  local flat = {}
  for i = 1, count do
    local p = rand(1, size)
    flat[i] = rand() < 0.3 and p - size - 1 or p
  end
  local t = T.tensor(flat, "int64")
  return two_d and t:view(2, n) or t
end

-- A random key over the batch dims, and the same key with the ellipsis spelled out as
-- whole dims (so it means the same for a leaf with trailing dims). At most one mask or
-- index tensor (no 2-D index tensor when no2d).
local function random_key(batch, no2d)
  local key, expanded = {}, {}
  local function push(e, times)
    if rand() < 0.12 then
      key[#key + 1] = T.newaxis
      expanded[#expanded + 1] = T.newaxis
    end
    key[#key + 1] = e
    if e == T.ellipsis then
      for _ = 1, times do expanded[#expanded + 1] = {} end
    else
      expanded[#expanded + 1] = e
    end
  end
  local nd = #batch
  local prefix = rand(0, nd)
  local d, adv = 1, false
  while d <= prefix do
    if not adv and rand() < 0.25 then
      adv = true
      if rand() < 0.5 then
        local k = rand(1, prefix - d + 1)
        local shape = {}
        for i = 1, k do shape[i] = batch[d + i - 1] end
        push(random_mask(shape))
        d = d + k
      else
        push(random_index(batch[d], not no2d and rand() < 0.3))
        d = d + 1
      end
    else
      push(random_entry(batch[d]))
      d = d + 1
    end
  end
  if rand() < 0.4 then
    local suffix = rand(0, nd - prefix)
    push(T.ellipsis, nd - prefix - suffix)
    for dd = nd - suffix + 1, nd do push(random_entry(batch[dd])) end
  end
  if rand() < 0.15 then
    key[#key + 1] = T.newaxis
    expanded[#expanded + 1] = T.newaxis
  end
  -- the short forms td[i] and td[tensor]
  if #key == 1 and (type(key[1]) == "number" or T.is_tensor(key[1])) and rand() < 0.5 then
    return key[1], expanded
  end
  return key, expanded
end

local show_key = require("random_keys").show

-- The leaves of td as {path, tensor, batch dims it shares with td}.
local function leaves_of(td)
  local out = {}
  for _, spec in ipairs(LEAVES) do out[#out + 1] = { spec[1], td:get(spec[1]) } end
  out[#out + 1] = { "nest.deep", td:get({ "nest", "deep" }) }
  return out
end

local function random_batch()
  local b = {}
  for i = 1, rand(1, 4) do
    local r = rand()
    b[i] = r < 0.15 and 0 or r < 0.4 and 1 or rand(2, 4)
  end
  return b
end

-- leaf[key] as a table of values and a shape (a Lua value: shape {}).
local function read(t, key)
  local v = t[key]
  if T.is_tensor(v) then return v:totable(), v:shape() end
  return v, {}
end

-- Runs check(case) for every case, then fails listing how many cases failed and the
-- first few messages (each names its case and key), so one bug does not hide others.
local function run_cases(n, check)
  local failures, count = {}, 0
  for case = 1, n do
    local ok, err = pcall(check, case)
    if not ok then
      count = count + 1
      if #failures < 5 then failures[#failures + 1] = tostring(err):sub(1, 400) end
    end
  end
  assert(count == 0, ("%d of %d cases failed:\n%s"):format(count, n, table.concat(failures, "\n")))
end

describe("TensorDict indexing against tensor indexing (randomized)", function()
  it("td[key].leaf == leaf[key'] and the batch size is the leading dims, 400 keys", function()
    math.randomseed(20261207)
    run_cases(400, function(case)
      local batch = random_batch()
      local td = random_td(batch, case)
      local key, expanded = random_key(batch, false)
      local where = ("case %d: batch [%s] key %s"):format(case, table.concat(batch, ","), show_key(key))
      local ok, r = pcall(function() return td[key] end)
      if not ok then error(where .. ": " .. tostring(r)) end
      local _, want_batch = read(T.zeros(batch, "uint8"), expanded)
      assert.are.same(want_batch, r:batch_size(), where)
      assert.are.equal("same", r.tag, where)
      assert.are.same(concat(want_batch, { 2 }), r.nest:batch_size(), where)
      local got = leaves_of(r)
      for i, leaf in ipairs(leaves_of(td)) do
        local want, want_shape = read(leaf[2], expanded)
        local g = got[i][2]
        local w = where .. " leaf " .. leaf[1]
        assert.are.equal(leaf[2]:dtype(), g:dtype(), w)
        assert.are.same(want_shape, g:shape(), w)
        for d = 1, #want_batch do assert.are.equal(want_batch[d], g:size(d), w) end
        if #want_shape == 0 then
          assert.are.equal(want, g:item(), w)
        else
          assert.are.same(want, g:totable(), w)
        end
      end
    end)
  end)

  it("td[key] = value writes what leaf[key'] = value writes, 300 keys", function()
    math.randomseed(20261208)
    run_cases(300, function(case)
      local batch = random_batch()
      local td = random_td(batch, case)
      local other = random_td(batch, 5000 + case)
      local key, expanded = random_key(batch, true)
      local where = ("case %d: batch [%s] key %s"):format(case, table.concat(batch, ","), show_key(key))
      local want = {}
      local scalar = rand() < 0.4
      for i, leaf in ipairs(leaves_of(td)) do
        local t = leaf[2]:clone()
        if scalar then
          t[expanded] = 1
        else
          t[expanded] = leaves_of(other)[i][2][expanded]
        end
        want[i] = t:totable()
      end
      local ok, err = pcall(function()
        if scalar then
          td[key] = 1
        else
          td[key] = other[key]
        end
      end)
      if not ok then error(where .. ": " .. tostring(err)) end
      for i, leaf in ipairs(leaves_of(td)) do
        assert.are.same(want[i], leaf[2]:totable(), where .. " leaf " .. leaf[1])
      end
    end)
  end)
end)
