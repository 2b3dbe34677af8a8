-- Tensor owners without finalisers (slots.lua): results are returned to C once per GC
-- cycle, slots are reused, and small results share one block with their header.
local T = require("tensordict")
local slots = require("tensordict.tensor.slots")

local function owners()
  return debug.getregistry()["tensordict:tensor_type"][3]
end

-- Collections until nothing more comes back: what earlier specs dropped may come back
-- a cycle per link (a record's TensorDict, then the leaves cached in it), and must not
-- land inside a test here. Each round is two, since the sweep runs at the end of a cycle.
local function full_collect()
  local before
  repeat
    before = T.live_bytes()
    collectgarbage("collect")
    collectgarbage("collect")
  until T.live_bytes() == before
end

describe("tensor owner slots", function()
  it("return every byte of dropped results after a collection", function()
    full_collect()
    local base = T.live_bytes()
    local a, b = T.rand(1000), T.rand(1000)
    for _ = 1, 20000 do
      local _ = a + b
    end
    full_collect()
    assert.are.equal(base + 8000, T.live_bytes()) -- a and b only
  end)

  it("stay bounded in a long compiled loop (the sweep and take() never lose a slot)", function()
    local a, b = T.rand(1000), T.rand(1000)
    for _ = 1, 50000 do
      local _ = a + b
    end
    full_collect()
    local st = owners()
    local before = st.nslots
    for _ = 1, 200000 do
      local _ = a + b
    end
    full_collect()
    -- every dead owner's slot was reused: the table grew by less than one cycle's worth
    assert.is_true(st.nslots <= before + 20000, ("slots grew from %d to %d"):format(before, st.nslots))
    local free = 0
    for slot = 1, st.nslots do
      if st.held[slot] == 0 then free = free + 1 end
    end
    assert.is_true(free >= st.nslots - 100, ("%d of %d slots free"):format(free, st.nslots))
  end)

  it("free() releases at once; the slot waits for the handle, then is reused", function()
    full_collect()
    local base = T.live_bytes()
    local t = T.ones(250)
    local slot = t.o._td_slot
    assert.are.equal(1, owners().held[slot])
    t:free()
    assert.are.equal(base, T.live_bytes())
    assert.are.equal(2, owners().held[slot])
    t = nil -- luacheck: ignore
    full_collect()
    assert.are.equal(0, owners().held[slot])
  end)

  it("keep views of a small result valid after the result itself is collected", function()
    local v
    do
      local r = T.arange(1, 10) * 2
      v = r[{ { 3, 5 } }]
    end
    full_collect()
    assert.are.same({ 6, 8, 10 }, v:totable())
  end)

  it("take() appends when no slot is free and reuses freed ones first", function()
    local released = {}
    local st = slots.new("void *", function(ptrs, dead, n)
      for i = 0, n - 1 do
        released[#released + 1] = dead[i]
        ptrs[dead[i]] = nil
      end
    end)
    local handles = {}
    for i = 1, 3 do
      local slot = slots.take(st)
      assert.are.equal(i, slot)
      handles[i] = { i }
      slots.hold(st, slot, handles[i], require("ffi").cast("void *", i))
    end
    handles[2] = nil
    full_collect() -- the registry's own sentinel sweeps at the end of the cycle
    assert.are.same({ 2 }, released)
    assert.are.equal(2, slots.take(st))
    assert.are.equal(4, slots.take(st))
  end)
end)
