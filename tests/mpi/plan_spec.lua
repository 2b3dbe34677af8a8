-- plan_spec.lua: containers sent again, and received into again, after they changed
-- (run by scripts/run-mpi-tests.sh under mpirun with 2 and 3 ranks). The library keeps
-- the transfer plans of small containers between calls (core/mpi/mpi_plan.c): these
-- check that every kind of change is seen, on the sending side and in a like.
local H = require("harness")
local T, dist = H.T, H.dist

local function ring(rank, size) return (rank + 1) % size, (rank - 1) % size end
local function same_values(a, b) return T.TensorDict({ x = a }, {}):equal(T.TensorDict({ x = b }, {})) end

-- The state rank r starts from: a leaf, a nested container, a value.
local function state(r)
  local td = T.TensorDict({ a = H.leaf("float32", r, { 4, 3 }),
    n = T.TensorDict({ x = H.leaf("float64", r, { 4, 2 }) }, { 4 }) }, { 4 })
  td:set("label", "rank " .. r)
  return td
end

-- Changes made in turn, each then sent: fn(td, r) changes td in place.
local STEPS = {
  { "unchanged", function() end },
  { "values written in place", function(td) td.a:add_(1) end },
  { "a leaf replaced", function(td, r) td:set("a", T.full({ 4, 3 }, 100 + r)) end, replaces_a = true },
  { "a key added", function(td, r) td:set("b", H.leaf("int32", r, { 4 })) end },
  { "a nested container's leaf replaced", function(td, r)
    td:get("n"):set("x", H.leaf("float64", r + 7, { 4, 2 }))
  end },
  { "a nested container's key added", function(td, r) td:get("n"):set("y", H.leaf("int16", r, { 4, 5 })) end },
  { "a nested container replaced", function(td, r)
    td:set("n", T.TensorDict({ z = H.leaf("uint8", r, { 4 }) }, { 4 }))
  end },
  { "dims named", function(td) td:refine_names("rows") end },
  { "dims renamed", function(td) td:rename({ "items" }) end },
  { "a value changed", function(td, r) td:set("label", "changed " .. r) end },
  { "a key renamed", function(td) td:rename_key("b", "c") end },
  { "a key deleted", function(td) td:del("c") end },
  { "the batch size changed", function(td) td:set_batch_size({}) end },
}

H.test("a container sent again after each kind of change arrives changed", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local mine, theirs = state(rank), state(from)
  for _, step in ipairs(STEPS) do
    step[2](mine, rank)
    step[2](theirs, from)
    local r = dist.isend(mine, to, 20)
    local got = dist.recv(from, 20)
    r:wait()
    H.same(got, theirs, step[1])
    H.eq(got.label, theirs.label, step[1] .. ": the value")
    local names, want = got:names(), theirs:names()
    H.eq(#names, #want, step[1] .. ": batch dims")
    for d = 1, #want do H.eq(names[d], want[d], step[1] .. ": dim name " .. d) end
  end
end)

H.test("recv into the same like after each kind of change fills its new leaves", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local mine, theirs = state(rank), state(from)
  local like = state(from):zero_()
  for _, step in ipairs(STEPS) do
    local old_a = like:get("a") -- a leaf the next step may replace
    local old_values = old_a:clone()
    step[2](mine, rank)
    step[2](theirs, from)
    step[2](like, from)
    like:zero_()
    local r = dist.isend(mine, to, 21)
    local got = dist.recv(from, 21, like)
    r:wait()
    assert(rawequal(got, like), step[1] .. ": recv returns like")
    H.same(like, theirs, step[1])
    if step.replaces_a then -- the leaf like held before is not written any more
      assert(same_values(old_a, old_values) and not same_values(old_a, like:get("a")),
        step[1] .. ": the replaced leaf was written")
    end
  end
end)

H.test("more containers in turn than the plan cache keeps, each sent three times", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local mine, theirs, likes = {}, {}, {}
  for k = 1, 12 do
    mine[k] = T.TensorDict({ v = H.leaf("float32", rank * 100 + k, { 8 }),
      w = H.leaf("int64", rank, { 8, k }) }, { 8 })
    theirs[k] = T.TensorDict({ v = H.leaf("float32", from * 100 + k, { 8 }),
      w = H.leaf("int64", from, { 8, k }) }, { 8 })
    likes[k] = theirs[k]:clone():zero_()
  end
  for round = 1, 3 do
    for k = 1, 12 do
      mine[k].v:add_(1)
      theirs[k].v:add_(1)
      local r = dist.isend(mine[k], to, 22)
      local got = dist.recv(from, 22, likes[k])
      r:wait()
      H.same(got, theirs[k], ("round %d, container %d"):format(round, k))
    end
  end
end)

H.test("a container freed after its send still goes out whole, and a later one is not confused with it", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  for k = 1, 3 do
    -- The same structure every time, a new container (perhaps at a freed one's address).
    local td = T.TensorDict({ v = T.full({ 16 }, rank * 10 + k) }, {})
    local r = dist.isend(td, to, 23)
    td:free()
    local got = dist.recv(from, 23)
    r:wait()
    H.same(got, T.TensorDict({ v = T.full({ 16 }, from * 10 + k) }, {}), "round " .. k)
  end
end)

H.run()
