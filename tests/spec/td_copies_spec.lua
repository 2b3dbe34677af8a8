-- td_copies_spec.lua: a copy never shares mutable state with its source (issue 27, item 2).
-- The mutable part of a stacked non-tensor value (a stack of containers whose string
-- leaf differs per row) is its positions and its texts, which index assignment writes
-- in place. Every path that makes a new container (clone, contiguous when it copies,
-- to, casts, empty_like, apply, arithmetic, masking, index copies, gather, joins,
-- update_, memmap saves and loads, Map outputs) must hand it its own; a view (basic
-- index, slices, shape views, select) shares it exactly as it shares its tensors.
local T = require("tensordict")
local h = require("helpers")

local WORDS = { "a", "b", "c", "d" }

-- x = 1..4 and s = "a".."d" over batch [4], s stacked (one text per row).
local function stacked()
  local rows = {}
  for i, w in ipairs(WORDS) do rows[i] = T.TensorDict({ x = T.tensor({ i }, "float32"), s = w }, { 1 }) end
  return T.cat(rows, 1)
end

local function texts(td) return table.concat(td:get("s"), ",") end
local function xs(td) return td:get("x"):totable() end

-- Writes row 3 over row 1 of copy: the source's rows must not move; then the reverse.
local function assert_independent(src, copy, same_rows)
  local before_src, before_copy = texts(src), texts(copy)
  copy[1] = copy[3]
  assert.are.equal(before_src, texts(src))
  src[2] = src[4]
  local expect = same_rows or before_copy:gsub("^[^,]+", (before_copy:match("^[^,]+,[^,]+,([^,]+)")))
  assert.are.equal(expect, texts(copy))
end

describe("copies own their stacked non-tensor values", function()
  it("stacked() is what the specs below assume", function()
    local td = stacked()
    assert.are.equal("a,b,c,d", texts(td))
    assert.are.same({ 1, 2, 3, 4 }, xs(td))
    assert.are.equal("NonTensorStack", tostring(td):match("s: (%w+)"))
  end)

  it("clone (the issue's case)", function()
    local td = stacked()
    local c = td:clone()
    c[1] = c[3]
    assert.are.equal("a,b,c,d", texts(td))
    assert.are.equal("c,b,c,d", texts(c))
    assert.are.same({ 1, 2, 3, 4 }, xs(td))
    assert.are.same({ 3, 2, 3, 4 }, xs(c))
    td[2] = td[4]
    assert.are.equal("c,b,c,d", texts(c))
  end)

  it("clone of a clone, and a texts write that adds a new text", function()
    local td = stacked()
    local c = td:clone():clone()
    c[1] = T.TensorDict({ x = T.tensor({ 9 }, "float32"), s = "zz" }, { 1 })[1]
    assert.are.equal("zz,b,c,d", texts(c))
    assert.are.equal("a,b,c,d", texts(td))
  end)

  it("contiguous of a non-contiguous container copies", function()
    local two = T.stack({ stacked(), stacked() }, 1) -- [2, 4]
    local t = two:transpose(1, 2)                   -- [4, 2], a view
    local c = t:contiguous()
    c[{ 1, 1 }] = c[{ 3, 1 }]
    assert.are.same({ { "a", "b", "c", "d" }, { "a", "b", "c", "d" } }, two:get("s"))
    assert.are.equal("c", c:get("s")[1][1])
  end)

  it("contiguous of a contiguous container shares, as its tensors do (torch's contiguous)", function()
    local td = stacked()
    local c = td:contiguous()
    c[1] = c[3]
    assert.are.same({ 3, 2, 3, 4 }, xs(td))
    assert.are.equal("c,b,c,d", texts(td))
  end)

  it("to(dtype), the casts and to(device)", function()
    for _, make in ipairs({
      function(td) return td:to("float64") end,
      function(td) return td:double() end,
      function(td) return td:to("cpu") end,
      function(td) return td:empty_like() end,
      function(td) return td:zeros_like() end,
    }) do
      local td = stacked()
      local c = make(td)
      assert.are.equal("a,b,c,d", texts(c))
      assert_independent(td, c)
    end
  end)

  it("apply", function()
    local td = stacked()
    local c = td:apply(function(t) return t * 2 end)
    assert.are.same({ 2, 4, 6, 8 }, xs(c))
    assert_independent(td, c)
  end)

  it("arithmetic, clamp, masked_fill and where", function()
    local mask = T.tensor({ true, false, true, false })
    for _, make in ipairs({
      function(td) return td + 1 end,
      function(td) return td:clamp(0, 2) end,
      function(td) return td:masked_fill(mask, 0) end,
      function(td) return T.where(mask, td, td:clone()) end,
    }) do
      local td = stacked()
      assert_independent(td, make(td))
    end
  end)

  it("index copies: a mask, a list of positions, gather", function()
    local td = stacked()
    local c = td[T.tensor({ true, true, true, true })]
    assert_independent(td, c)
    td = stacked()
    c = td[T.tensor({ 1, 2, 3, 4 }, "int64")]
    assert_independent(td, c)
    td = stacked()
    c = td:gather(1, T.tensor({ 1, 2, 3, 4 }, "int64"))
    assert_independent(td, c)
  end)

  it("views share: a slice and a select write through, tensors and values alike", function()
    local td = stacked()
    local v = td[{ { 1, 4 } }]
    v[1] = v[3]
    assert.are.equal("c,b,c,d", texts(td))
    assert.are.same({ 3, 2, 3, 4 }, xs(td))
    td = stacked()
    local s = td:select("s", "x")
    s[1] = s[3]
    assert.are.equal("c,b,c,d", texts(td))
  end)

  it("stack and cat", function()
    local a = stacked()
    local c = T.cat({ a, stacked() }, 1)
    c[1] = c[3]
    assert.are.equal("a,b,c,d", texts(a))
    local st = T.stack({ a, stacked() }, 1)
    st[{ 1, 1 }] = st[{ 1, 3 }]
    assert.are.equal("a,b,c,d", texts(a))
    assert.are.same({ "c", "b", "c", "d" }, st:get("s")[1])
  end)

  it("pad (a crop) copies", function()
    local td = stacked()
    local c = T.pad(td, { 0, -1 })
    assert.are.equal("a,b,c", texts(c))
    c[1] = c[3]
    assert.are.equal("a,b,c,d", texts(td))
  end)

  it("update_ takes a copy of the source's value", function()
    local src, dst = stacked(), stacked()
    dst[1] = dst[2] -- dst's own texts differ from src's from here on
    dst:update_(src)
    assert.are.equal("a,b,c,d", texts(dst))
    dst[1] = dst[3]
    assert.are.equal("a,b,c,d", texts(src))
    src[2] = src[4]
    assert.are.equal("c,b,c,d", texts(dst))
  end)

  it("memmap: the saved container, and one loaded then cloned", function()
    local dir = h.tmpdir()
    local td = stacked()
    local m = td:memmap(dir .. "/td")
    assert.are.equal("a,b,c,d", texts(m))
    m[1] = m[3]
    assert.are.equal("a,b,c,d", texts(td))
    local loaded = T.load_memmap(dir .. "/td")
    local c = loaded:clone()
    c[1] = c[4]
    assert.are.equal("a,b,c,d", texts(loaded))
    assert.are.equal("d,b,c,d", texts(c))
    h.rmtree(dir)
  end)

  it("Map outputs keep their values after the next batch (their positions were shared memory)", function()
    local flow = T.flow
    local src = flow.TensorSource { td = stacked(), batch_size = 2 }
    local keep = flow.Collect {}
    local out = flow.run(src, flow.Map { fn = function(b) return b:clone() end, workers = 1 }, keep)
    assert.are.equal(2, #out)
    assert.are.equal("a,b", texts(out[1]))
    assert.are.equal("c,d", texts(out[2]))
    out[1][1] = out[1][2]
    assert.are.equal("c,d", texts(out[2]))
  end)
end)
