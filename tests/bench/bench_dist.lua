-- bench_dist.lua: tensordict.dist against raw MPI calls of the same bytes, in the same
-- run (scripts/run-bench.sh launches it with scripts/mpirun.sh -n 2). Rank 0 prints.
--   all_reduce of a 64 MiB container (8 float32 leaves) vs one MPI_Allreduce of 64 MiB
--     (the library's raw wrapper td_mpi_allreduce): goal >= 0.9x
--   send/recv ping-pong of a 25-leaf container vs one raw send of its bytes: goal >= 0.8x;
--     and the same container as one consolidated buffer (td_ship_pack, one message,
--     td_ship_unpack), the transport not chosen, for comparison; and Python tensordict's
--     td.send/td.recv over torch.distributed (gloo) where TD_PYTHON has it
--     (tests/bench/bench_dist_python.py, run by rank 0 at the end): ours/theirs
-- Ratios are raw time / our time (1.0: no overhead). Best of N, wall clock.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local ffi = require("ffi")
local T = require("tensordict")
local dist = T.dist
local wire = require("tensordict.dist.wire")
local best_of = require("best")

dist.init()
local MPI = require("tensordict.dist.lib").open()
local rank, size = dist.rank(), dist.size()
local C = require("tensordict.lib").C
local function say(...) if rank == 0 then print(string.format(...)) io.stdout:flush() end end

-- Best of n, every rank starting together; the slowest rank's time is the figure.
local function timed(n, body)
  local t = best_of(n, body, function() dist.barrier() end)
  local slowest = T.TensorDict({ t = T.tensor({ t }, "float64") }, {})
  dist.all_reduce(slowest, "max")
  return slowest.t:tolist()[1]
end

------------------------------------------------------------------------ all_reduce
do
  local MiB = 1024 * 1024
  local leaves = {}
  for i = 1, 8 do leaves["w" .. i] = T.full({ 2 * MiB }, 1.0) end -- 8 MiB each
  local td = T.TensorDict(leaves, {})
  local raw = T.full({ 16 * MiB }, 1.0)
  local raw_p = raw.h
  local ours = timed(7, function() dist.all_reduce(td, "sum") end)
  local ref = timed(7, function()
    assert(MPI.td_mpi_allreduce(C.td_tensor_data_borrow(raw_p), 16 * MiB, C.TD_FLOAT32, 0, -1) == 0)
  end)
  say("all_reduce 64 MiB, 8 leaves, %d ranks: ours %7.2f ms  raw MPI_Allreduce %7.2f ms  ratio %.2fx (goal >= 0.9)",
    size, ours * 1e3, ref * 1e3, ref / ours)
end

----------------------------------------------------------------------- send/recv
local ours_by_size = {}
local function pingpong(leaf_elems, runs)
  local fields = {}
  for i = 1, 25 do fields["k" .. i] = T.full({ leaf_elems }, i) end
  local td = T.TensorDict(fields, {})
  local bytes = 25 * leaf_elems * 4
  local buf = ffi.new("uint8_t[?]", bytes)
  local peer = 1 - rank
  if rank > 1 then return end -- the pair 0 <-> 1; other ranks wait at the barriers
  local function ours_round()
    if rank == 0 then dist.send(td, peer, 1); dist.recv(peer, 1, td)
    else dist.recv(peer, 1, td); dist.send(td, peer, 1) end
  end
  local function raw_round()
    if rank == 0 then
      assert(MPI.td_mpi_send(buf, bytes, peer, 2, -1) == 0); assert(MPI.td_mpi_recv(buf, bytes, peer, 2, -1) == 0)
    else
      assert(MPI.td_mpi_recv(buf, bytes, peer, 2, -1) == 0); assert(MPI.td_mpi_send(buf, bytes, peer, 2, -1) == 0)
    end
  end
  -- Ours and raw take turns in blocks, so that a slow spell of the shared machine
  -- falls on both rather than on whichever ran during it.
  local ours, ref = math.huge, math.huge
  local blocks = runs >= 50 and 5 or 1
  for _ = 1, blocks do
    ours = math.min(ours, best_of(runs, ours_round))
    ref = math.min(ref, best_of(runs, raw_round))
  end
  -- The other transport: the whole container shipped in one region and one message.
  local function ship_send()
    local region, n = wire.pack_whole(td)
    local len = ffi.new("int64_t[1]", n)
    assert(MPI.td_mpi_send(len, 8, peer, 3, -1) == 0)
    assert(MPI.td_mpi_send(wire.region_data(region), n, peer, 3, -1) == 0)
  end
  local function ship_recv()
    local len = ffi.new("int64_t[1]")
    assert(MPI.td_mpi_recv(len, 8, peer, 3, -1) == 0)
    local region = wire.region(tonumber(len[0]))
    assert(MPI.td_mpi_recv(wire.region_data(region), len[0], peer, 3, -1) == 0)
    return wire.unpack_whole(region)
  end
  local shipped = best_of(runs, function()
    if rank == 0 then ship_send(); ship_recv() else ship_recv(); ship_send() end
  end)
  ours_by_size[leaf_elems * 4] = ours
  say("send/recv 25 leaves x %-8s ping-pong: ours %8.3f ms  raw send %8.3f ms  ratio %.2fx (goal >= 0.8); "
    .. "one shipped buffer %8.3f ms (%.2fx)", (leaf_elems * 4 >= 1024 * 1024) and ((leaf_elems * 4 / 1048576) .. " MiB")
    or ((leaf_elems * 4 / 1024) .. " KiB"), ours * 1e3, ref * 1e3, ref / ours, shipped * 1e3, ref / shipped)
  local _ = C
end
for _, elems in ipairs({ 1024, 64 * 1024, 1024 * 1024 }) do
  pingpong(elems, elems >= 1024 * 1024 and 7 or 50)
  dist.barrier()
end

-- Python tensordict over gloo, two processes of its own, while rank 1 waits (a barrier
-- with a timeout sleeps between polls, leaving the cores to Python).
if rank == 0 then
  local py = os.getenv("TD_PYTHON") or "python3"
  local pipe = io.popen(py .. " tests/bench/bench_dist_python.py 2>/dev/null")
  local text = pipe:read("*a")
  pipe:close()
  local any = false
  for nbytes, secs in text:gmatch("(%d+) ([%d.e+-]+)") do
    local ours = ours_by_size[tonumber(nbytes)]
    if ours then
      any = true
      say("send/recv 25 leaves x %7d B, Python tensordict over gloo: %8.3f ms, ours/theirs time %.2f",
        tonumber(nbytes), tonumber(secs) * 1e3, ours / tonumber(secs))
    end
  end
  if not any then say("Python tensordict over gloo: not measured (TD_PYTHON=%s lacks torch or tensordict)", py) end
end
dist.barrier({ timeout = 1200 })
dist.finalize()
