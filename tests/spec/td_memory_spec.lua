-- TensorDict lifetime: containers are released when their handles are collected (a
-- sweep once per GC cycle, no finaliser per handle), leaves outlive their container,
-- and free() releases at once.
local T = require("tensordict")

local function full_collect()
  collectgarbage("collect")
  collectgarbage("collect") -- the sweep runs at the end of a cycle; the second sees it
end

describe("TensorDict lifetime", function()
  it("returns the storage of dropped containers to the library", function()
    full_collect()
    local base = T.live_bytes()
    for _ = 1, 50 do
      local td = T.TensorDict({ x = T.zeros(1024, 256), y = T.ones(1024) }, { 1024 })
      local _ = td[{ { 1, 10 } }]:clone()
    end
    full_collect()
    assert.are.equal(base, T.live_bytes())
  end)

  it("keeps memory bounded in a loop making containers, without collectgarbage", function()
    full_collect()
    local base = T.live_bytes()
    local peak = 0
    for _ = 1, 200 do
      local td = T.TensorDict({ x = T.zeros(1024, 1024) }, { 1024 }) -- 4 MiB each
      peak = math.max(peak, T.live_bytes() - base)
      td.x[1][1] = 1
    end
    -- 200 x 4 MiB = 800 MiB made; the pressure check keeps far fewer alive at once
    assert.is_true(peak < 600 * 1024 * 1024, ("peak %d bytes"):format(peak))
  end)

  it("keeps a leaf valid after its container is dropped and collected", function()
    local td = T.TensorDict({ x = T.arange(1, 6), n = { y = T.ones(6) } }, { 6 })
    local x, y = td.x, td:get({ "n", "y" })
    td = nil -- luacheck: ignore
    full_collect()
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, x:totable())
    assert.are.same({ 1, 1, 1, 1, 1, 1 }, y:totable())
  end)

  it("free() releases now, and the handle's slot is reused after it goes", function()
    full_collect()
    local base = T.live_bytes()
    local td = T.TensorDict({ x = T.zeros(1000) }, { 1000 })
    full_collect() -- the zeros' own handle goes; the container still holds the storage
    assert.are.equal(base + 4000, T.live_bytes())
    td:free()
    assert.are.equal(base, T.live_bytes())
    assert.has_error(function() local _ = td.x end)
    td = nil -- luacheck: ignore
    full_collect()
    for _ = 1, 100 do -- new handles take the swept slots; the old one's state is gone
      local t2 = T.TensorDict({ z = T.ones(3) }, { 3 })
      assert.are.same({ 1, 1, 1 }, t2.z:totable())
    end
  end)

  it("views and copies made from a container outlive it independently", function()
    local td = T.TensorDict({ x = T.arange(1, 4) }, { 4 })
    local row, sel = td[2], td[T.tensor({ true, false, true, false })]
    td = nil -- luacheck: ignore
    full_collect()
    assert.are.equal(2, row.x:item())
    assert.are.same({ 1, 3 }, sel.x:totable())
  end)

  -- Views hold one shared set of their source's leaf references (core/dict/dict.c,
  -- td_dict_lent), made by the first view and dropped when the source changes.
  it("keeps the leaves a view was made from when its source changes, and frees them after", function()
    full_collect()
    local base = T.live_bytes()
    do
      local td = T.TensorDict({ a = T.zeros(8, 1000), b = T.arange(1, 8),
                                n = { c = T.full({ 8, 2 }, 5) } }, { 8 })
      local before = { td[2], td[{ { 3, 5 } }], td:unsqueeze(1) }
      local old_a = before[1].a
      td.a = T.ones(8, 1000) -- replaced in the source: the views keep the zeros
      td.n.c = T.full({ 8, 2 }, 7)
      assert.are.equal(0, before[1].a:sum())
      assert.are.equal(0, before[2].a:sum())
      assert.are.equal(0, old_a:sum())
      assert.are.same({ 5, 5 }, before[1].n.c:totable())
      -- views made after the change see the new leaves
      assert.are.equal(1000, td[2].a:sum())
      assert.are.same({ 7, 7 }, td[2].n.c:totable())
      -- a view's own entries can still be replaced and deleted
      before[2].b = T.tensor({ 9, 9, 9 })
      before[2]:del("a")
      assert.are.same({ 9, 9, 9 }, before[2].b:totable())
      assert.is_false(before[2]:has("a"))
      assert.are.same({ 2, 3, 4 }, before[3][{ 1, { 2, 4 } }].b:totable())
      before[1]:free()
      assert.are.same({ 3, 4, 5 }, td[{ { 3, 5 } }].b:totable())
    end
    full_collect()
    assert.are.equal(base, T.live_bytes())
  end)
  -- The cache holds what a read made, as Python's TensorDict holds its tensors: a leaf
  -- nobody else holds survives collections while its TensorDict lives, and goes with it.
  -- (A TensorDict younger than one GC cycle keeps its leaves weakly: see the next test.)
  it("keeps the leaves it read while it lives, and returns them with it", function()
    full_collect()
    local base = T.live_bytes()
    local probe = setmetatable({}, { __mode = "v" })
    local td = T.TensorDict({ x = T.arange(1, 4), n = { y = T.zeros(4) } }, { 4 })
    local n = td.n
    collectgarbage("collect") -- td and n have lived through a cycle
    probe.x, probe.n, probe.y = td.x, td.n, n.y
    n = nil -- luacheck: ignore 311
    full_collect()
    assert.is_true(rawequal(probe.x, td.x))
    assert.is_true(rawequal(probe.n, td.n))
    assert.is_true(rawequal(probe.y, td:get({ "n", "y" })))
    td = nil -- luacheck: ignore 311
    full_collect()
    full_collect() -- the cached leaves are found dead the cycle after their TensorDict
    assert.is_nil(probe.x)
    assert.is_nil(probe.n)
    assert.is_nil(probe.y)
    assert.are.equal(base, T.live_bytes())
  end)

  it("keeps a young TensorDict's leaves weakly: a batch read once goes in one collection", function()
    full_collect()
    local base = T.live_bytes()
    local probe = setmetatable({}, { __mode = "v" })
    local td = T.TensorDict({ x = T.arange(1, 4) }, { 4 })
    local x = td.x
    probe.x = x
    assert.is_true(rawequal(x, td.x)) -- the same tensor while it is held
    x = nil -- luacheck: ignore 311
    full_collect()
    assert.is_nil(probe.x) -- made again on the next read
    assert.are.same({ 1, 2, 3, 4 }, td.x:totable())
    probe.td, probe.x = td, td.x
    td = nil -- luacheck: ignore 311
    full_collect()
    assert.is_nil(probe.td)
    assert.is_nil(probe.x)
    assert.are.equal(base, T.live_bytes())
  end)

  it("keeps a nested TensorDict the user holds working after its parent is collected", function()
    full_collect()
    local base = T.live_bytes()
    local nested
    do
      local td = T.TensorDict({ n = { y = T.arange(1, 4), m = { z = T.ones(4) } } }, { 4 })
      local _ = td.n.m.z:sum() -- fills the caches down the tree
      nested = td.n
    end
    full_collect()
    full_collect()
    assert.are.same({ 1, 2, 3, 4 }, nested.y:totable())
    assert.are.equal(4, nested.m.z:sum())
    nested = nil -- luacheck: ignore 311
    full_collect()
    full_collect()
    assert.are.equal(base, T.live_bytes())
  end)

  it("free() makes the leaves read through the handle raise, even cached ones", function()
    local td = T.TensorDict({ x = T.arange(1, 4) }, { 4 })
    local x = td.x
    local v = x:view(2, 2)
    td:free()
    assert.has_error(function() x:sum() end, "tensordict: tensor used after free()")
    assert.has_error(function() v:sum() end, "tensordict: tensor used after free()")
  end)
end)
