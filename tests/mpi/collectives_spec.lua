-- collectives_spec.lua: broadcast, all_reduce, gather and all_gather against a
-- reference computed in one process (each rank can build every rank's data: H.leaf).
local H = require("harness")
local T, dist = H.T, H.dist

-- Rank r's container: every dtype, a nested container, a non-tensor value.
local function data(r)
  local fields = {}
  for _, dt in ipairs(H.DTYPES) do fields[dt] = H.leaf(dt, r) end
  local td = T.TensorDict(fields, { 2 })
  td:set("nested", T.TensorDict({ x = H.leaf("float64", r, { 2, 5 }) }, { 2 }))
  td:set("note", "same everywhere")
  return td
end

-- The reference reduction over every rank's data, in float64 then cast back (the values
-- are small integers, exact in every dtype, so the order of the ranks' adds does not
-- matter).
local function reference(op, size)
  local want = data(0)
  for _, k in ipairs(want:keys({ include_nested = true, leaves_only = true })) do
    local first = want:get(k)
    if T.is_tensor(first) and first:dtype() ~= "bool" then
      local acc = first:to("float64")
      for r = 1, size - 1 do
        local v = data(r):get(k):to("float64")
        if op == "max" then acc = T.where(v:gt(acc), v, acc)
        elseif op == "min" then acc = T.where(v:lt(acc), v, acc)
        else acc = acc:add(v) end
      end
      if op == "mean" then
        if first:dtype():find("float") then acc = acc:div(size) else acc = acc:div(size):floor() end
      end
      want:set(k, acc:to(first:dtype()))
    end
  end
  return want
end

for _, op in ipairs({ "sum", "mean", "max", "min" }) do
  H.test("all_reduce " .. op .. " of every dtype equals the one-process reference", function()
    local td = data(dist.rank())
    local bool_before = td:get("bool"):clone()
    local out = dist.all_reduce(td, op)
    assert(rawequal(out, td), "in place: returns its argument")
    H.same(td, reference(op, dist.size()), op)
    H.same(T.TensorDict({ b = td:get("bool") }, {}), T.TensorDict({ b = bool_before }, {}), "bool leaves untouched")
    H.eq(td.note, "same everywhere", "non-tensor value")
  end)
end

H.test("all_reduce of a strided leaf and of 64 MiB", function()
  local base = H.leaf("float32", dist.rank(), { 4, 6 })
  local td = T.TensorDict({ t = base:transpose(1, 2), big = T.full({ 16 * 1024 * 1024 }, dist.rank() + 1) }, {})
  dist.all_reduce(td, "sum")
  local want = H.leaf("float32", 0, { 4, 6 })
  for r = 1, dist.size() - 1 do want = want:add(H.leaf("float32", r, { 4, 6 })) end
  H.same(T.TensorDict({ t = base }, {}), T.TensorDict({ t = want }, {}), "strided leaf, written through")
  local n = dist.size()
  H.eq(td.big:sum(), 16 * 1024 * 1024 * n * (n + 1) / 2, "64 MiB sum")
end)

H.test("all_reduce refuses containers that differ across ranks, and unknown ops", function()
  local td = T.TensorDict({ a = T.zeros(dist.rank() == 0 and 3 or 4) }, {})
  H.raises(function() dist.all_reduce(td, "sum") end,
    "tensordict: dist.all_reduce: the containers differ across ranks")
  H.raises(function() dist.all_reduce(td, "prod") end,
    "tensordict: dist.all_reduce: op must be \"sum\", \"mean\", \"max\" or \"min\", got 'prod'")
end)

H.test("broadcast from every root, new and in place", function()
  for root = 0, dist.size() - 1 do
    local got = dist.broadcast(dist.rank() == root and data(root) or nil, root)
    H.same(got, data(root), "broadcast from " .. root)
    local like = data(dist.rank()):zero_()
    local filled = dist.broadcast(dist.rank() == root and data(root) or like, root)
    H.same(filled, data(root), "in place from " .. root)
    if dist.rank() ~= root then assert(rawequal(filled, like), "in place returns like") end
  end
end)

H.test("gather and all_gather join along the batch dim in rank order", function()
  local parts = {}
  for r = 0, dist.size() - 1 do
    local td = T.TensorDict({ x = H.leaf("float32", r, { r + 1, 2 }), i = H.leaf("int64", r, { r + 1 }) }, { r + 1 })
    parts[#parts + 1] = td
  end
  local want = T.cat(parts, 1)
  local mine = parts[dist.rank() + 1]
  H.same(dist.all_gather(mine), want, "all_gather")
  for root = 0, dist.size() - 1 do
    local got = dist.gather(mine, root)
    if dist.rank() == root then H.same(got, want, "gather at " .. root) else H.eq(got, nil, "gather elsewhere") end
  end
end)

H.test("a barrier times out when a rank comes late", function()
  if dist.rank() == 0 then
    H.raises(function() dist.barrier({ timeout = 0.2 }) end, "tensordict: dist.barrier: timed out after 0.2 s")
  else
    local now = require("tensordict.util").now
    local t0 = now()
    while now() - t0 < 1 do end -- late, so rank 0's barrier times out
    -- the late ranks' barrier matches rank 0's, which stays posted after its timeout
    dist.barrier({ timeout = 30 })
  end
end)

H.run()
