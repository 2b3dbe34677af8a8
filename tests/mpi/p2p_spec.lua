-- p2p_spec.lua: send, recv, isend, irecv of TensorDicts between ranks (run by
-- scripts/run-mpi-tests.sh under mpirun with 2 and 3 ranks).
local ffi = require("ffi")
local C = require("tensordict.lib").C
local H = require("harness")
local T, dist = H.T, H.dist

-- The container rank r sends: every dtype, a nested container, non-tensor values, a
-- named batch dim, a non-contiguous leaf.
local function payload(r)
  local fields = {}
  for _, dt in ipairs(H.DTYPES) do fields[dt] = H.leaf(dt, r) end
  local td = T.TensorDict(fields, { 2 })
  td:set("nested", T.TensorDict({ x = H.leaf("float32", r, { 2, 4 }), deeper = T.TensorDict({
    y = H.leaf("int64", r, { 2 }) }, { 2 }) }, { 2 }))
  td:set("label", "rank " .. r)
  td:set("t", H.leaf("float64", r, { 3, 2 }):transpose(1, 2)) -- strided
  td:refine_names("rows")
  return td
end

local function ring(rank, size) return (rank + 1) % size, (rank - 1) % size end

H.test("send/recv of every dtype, nested and non-tensor values, around the ring", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local r = dist.isend(payload(rank), to, 3)
  local got = dist.recv(from, 3)
  r:wait()
  H.same(got, payload(from), "received")
  H.eq(got.label, "rank " .. from, "non-tensor value")
  H.eq(got:get({ "nested", "deeper", "y" }):dtype(), "int64", "nested dtype")
  H.eq(got:names()[1], "rows", "dim name")
  for _, dt in ipairs(H.DTYPES) do H.eq(got:get(dt):dtype(), dt, "dtype of " .. dt) end
end)

H.test("recv in place into like (its strided leaf filled through a temporary)", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local like = payload(from):zero_()
  like:set("label", "before")
  local t_before = like.t -- a transposed view: filled through a temporary
  local f32 = like:get("float32")
  local r = dist.isend(payload(rank), to, 4)
  local got = dist.recv(from, 4, like)
  r:wait()
  assert(rawequal(got, like), "recv returns like")
  H.same(like, payload(from), "filled in place")
  H.same(T.TensorDict({ a = t_before }, {}), T.TensorDict({ a = payload(from).t }, {}), "the strided leaf")
  H.same(T.TensorDict({ a = f32 }, {}), T.TensorDict({ a = payload(from):get("float32") }, {}), "same tensor object")
  H.eq(like.label, "rank " .. from, "non-tensor value")
end)

H.test("recv into a like of another structure names the leaf", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local r = dist.isend(T.TensorDict({ a = T.zeros(3), b = T.zeros(1024 * 1024) }, {}), to, 5)
  H.raises(function() dist.recv(from, 5, T.TensorDict({ a = T.zeros(3), b = T.zeros(4) }, {})) end,
    "tensordict: dist.recv: like's leaf 'b' (float32 [4]) does not match the message's leaf 'b' (float32 [1048576])")
  r:wait({ timeout = 30 }) -- the message was taken off the wire all the same
end)

H.test("isend/irecv: test() until done, queued receives keep their order", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local sends = {}
  for k = 1, 3 do sends[k] = dist.isend(T.TensorDict({ k = T.tensor({ k, rank }) }, {}), to, 9) end
  local recvs = {}
  for k = 1, 3 do recvs[k] = dist.irecv(from, 9) end
  local spins = 0
  while not recvs[3]:test() do spins = spins + 1 end
  for k = 1, 3 do
    H.eq(recvs[k]:test(), true, "earlier receives are done")
    local got = recvs[k]:wait()
    H.eq(got.k:tolist()[1], k, "order of message " .. k)
    H.eq(got.k:tolist()[2], from, "sender")
  end
  for k = 1, 3 do sends[k]:wait({ timeout = 10 }) end
end)

H.test("a large leaf (64 MiB) and an empty one", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local big = T.full({ 16 * 1024 * 1024 }, rank, "float32")
  local r = dist.isend(T.TensorDict({ big = big, empty = T.zeros(0, 3) }, {}), to, 11)
  local got = dist.recv(from, 11)
  r:wait()
  H.eq(got.big:sum(), 16 * 1024 * 1024 * from, "sum of the big leaf")
  H.eq(got:get("empty"):shape()[1], 0, "empty leaf")
  H.eq(got:get("empty"):shape()[2], 3, "empty leaf's second dim")
end)

H.test("recv with a timeout fails cleanly when nothing comes", function()
  H.raises(function() dist.recv(dist.size() - 1 - dist.rank(), 77, { timeout = 0.3 }) end,
    "tensordict: dist.recv: timed out after 0.3 s")
  dist.barrier() -- every rank past its timeout before anything is sent on that tag
  -- nothing stays posted: a later message on that tag arrives normally
  local peer = dist.size() - 1 - dist.rank()
  if peer ~= dist.rank() then
    local r = dist.isend(T.TensorDict({ v = T.tensor({ 5 }) }, {}), peer, 77)
    H.eq(dist.recv(peer, 77).v:tolist()[1], 5, "the next message")
    r:wait()
  end
end)

H.test("irecv wait with a timeout leaves the request usable", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local r = dist.irecv(from, 21)
  H.raises(function() r:wait({ timeout = 0.2 }) end, "tensordict: dist.irecv: timed out after 0.2 s")
  dist.barrier()
  local s = dist.isend(T.TensorDict({ v = T.tensor({ rank }) }, {}), to, 21)
  H.eq(r:wait({ timeout = 30 }).v:tolist()[1], from, "late message")
  s:wait()
end)

H.test("recv into a like of the same structure writes its leaves in place", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local function make(r)
    local n = T.TensorDict({ i = T.full({ 3 }, 10 * r, "int64") }, { 3 })
    return T.TensorDict({ a = T.full({ 3, 4 }, r, "float32"), n = n, tag = "same" }, { 3 })
  end
  local like = make(-1)
  local a, i = like.a, like:get({ "n", "i" })
  local addr = tonumber(ffi.cast("intptr_t", C.td_tensor_data_borrow(a.h)))
  local r = dist.isend(make(rank), to, 31)
  assert(rawequal(dist.recv(from, 31, like), like), "recv returns like")
  r:wait()
  H.same(like, make(from), "filled")
  H.eq(a:sum(), 12 * from, "like's leaf object holds the message")
  H.eq(i:sum(), 30 * from, "nested leaf object")
  H.eq(tonumber(ffi.cast("intptr_t", C.td_tensor_data_borrow(like.a.h))), addr, "same memory")
end)

H.test("a sent container may change before the send completes", function()
  local rank, size = dist.rank(), dist.size()
  local to, from = ring(rank, size)
  local td = T.TensorDict({ v = T.full({ 100000 }, rank, "float64"), w = T.arange(6):reshape(2, 3):t() }, {})
  local r = dist.irecv(from, 33)
  local s = dist.isend(td, to, 33)
  td:set("v", T.zeros(1)) -- the old leaf is dropped here: the send holds its memory
  td:set("w", T.zeros(1))
  collectgarbage()
  collectgarbage()
  local got = r:wait()
  s:wait()
  H.eq(got.v:sum(), 100000 * from, "the leaf as it was sent")
  H.same(T.TensorDict({ w = got.w }, {}), T.TensorDict({ w = T.arange(6):reshape(2, 3):t() }, {}), "strided leaf")
end)

H.test("bad arguments raise with the call's name", function()
  local size = dist.size()
  H.raises(function() dist.send(T.TensorDict({}, {}), size, 0) end,
    "tensordict: dist.send: destination " .. size .. " is out of range (ranks 0..")
  H.raises(function() dist.send(T.TensorDict({}, {}), 0, -1) end, "tensordict: dist.send: tag must be an integer")
  H.raises(function() dist.send({}, 0, 0) end, "tensordict: dist.send: td must be a TensorDict, got a table")
  H.raises(function() dist.recv(0.5, 0) end, "tensordict: dist.recv: source must be a rank (an integer), got 0.5")
  H.raises(function() dist.recv(0, 0, nil, { timeout = -1 }) end, "tensordict: dist.recv: timeout must be >= 0 seconds")
  H.raises(function() dist.recv(0, 0, nil, { wait = 1 }) end, "tensordict: dist.recv: unknown option 'wait'")
end)

H.run()
