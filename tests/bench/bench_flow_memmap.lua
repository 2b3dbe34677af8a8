-- bench_flow_memmap.lua: the memmap figures of issue 9, each next to its reference
-- measured in the same run:
--   - MemmapSink: 1 GiB appended as 256 batches of 4 MiB, committed (fsync, rename), vs a
--     raw sequential write() of the same bytes in 4 MiB calls with the same fsync policy
--     (goal >= 0.8x);
--   - ReplayBuffer:sample(256) of rows of [84] float32 from a 1M-row buffer on disk vs
--     copying the same rows one by one with ffi.copy (goal >= 0.5x).
-- Writes ~1.4 GiB under TD_BENCH_DIR (default /tmp) and deletes it. Never run by tests.
-- Usage: TENSORDICT_LIB=build/libtensordict.so luajit tests/bench/bench_flow_memmap.lua
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local ffi = require("ffi")
local T = require("tensordict")
local flow = require("tensordict.flow")
local now = require("clock")
local best = require("best") -- best(runs, fn): the shortest run, in seconds
local C = require("tensordict.lib").C
local nodes = require("tensordict.flow.memmap")
local MemmapSink = flow.MemmapSink or nodes.MemmapSink
local ReplayBuffer = flow.ReplayBuffer or nodes.ReplayBuffer

pcall(ffi.cdef, [[
  int open(const char *path, int flags, int mode);
  long write(int fd, const void *buf, size_t n);
  int fsync(int fd);
  int close(int fd);
  int unlink(const char *path);
]])
local O_WRONLY, O_CREAT, O_TRUNC = 1, 64, 512
local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/td-bench-flow-memmap"
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")

-- TD_BENCH_ONLY=sink or =sample runs one of the two.
local only = os.getenv("TD_BENCH_ONLY")
local function want(name) return only == nil or only == "" or only == name end

------------------------------------------------------------- MemmapSink append
if want("sink") then

-- One batch of 4 MiB: 4096 rows of [255] float32 plus an int64 id (1 KiB a row).
local ROWS, BATCHES = 4096, 256
local batch = T.TensorDict({ x = T.rand(ROWS, 255), id = T.arange(1, ROWS) }, { ROWS })
local batch_bytes = ROWS * (255 * 4 + 8)
local total = batch_bytes * BATCHES
local block = T.rand(batch_bytes / 4) -- the reference's source: the same bytes per call
local block_p = ffi.cast("const char *", C.td_tensor_data_borrow(block.h))

-- Each figure is the best of 3 runs, the two alternating; deleting the files of a run
-- is not timed (for either).
local raw_path, prefix = dir .. "/raw.bin", dir .. "/sink"
local function raw_once()
  local t0 = now()
  local fd = ffi.C.open(raw_path, O_WRONLY + O_CREAT + O_TRUNC, 420)
  for _ = 1, BATCHES do
    local left, off = batch_bytes, 0
    while left > 0 do
      local n = tonumber(ffi.C.write(fd, block_p + off, left))
      assert(n > 0, "write failed")
      left, off = left - n, off + n
    end
  end
  ffi.C.fsync(fd)
  ffi.C.close(fd)
  local t = now() - t0
  ffi.C.unlink(raw_path)
  return t
end
local function sink_once()
  local t0 = now()
  local sink = MemmapSink({ path = prefix, existsok = true })
  sink:open({})
  for _ = 1, BATCHES do sink:write(batch) end
  sink:finish():free()
  local t = now() - t0
  os.execute("rm -rf '" .. prefix .. "'")
  return t
end
local raw, sink_time = math.huge, math.huge
for _ = 1, 3 do
  raw = math.min(raw, raw_once())
  sink_time = math.min(sink_time, sink_once())
end
print(("%-52s %8.3f s, raw write+fsync %8.3f s, raw/ours %.2f (goal >= 0.8)"):format(
  ("MemmapSink: %d MiB in %d batches (fsync)"):format(total / 2 ^ 20, BATCHES), sink_time, raw, raw / sink_time))
end

------------------------------------------------------------ ReplayBuffer sample
if want("sample") then

local CAP, FEAT, N = 1048576, 84, 256
local rb = ReplayBuffer({ path = dir .. "/rb", capacity = CAP, fsync = false })
local chunk = T.TensorDict({ obs = T.rand(65536, FEAT) }, { 65536 })
for _ = 1, CAP / 65536 do rb:extend(chunk) end
chunk = nil -- luacheck: ignore
collectgarbage()
local gen = T.Generator(1)
local REPS = 2000
for _ = 1, 200 do rb:sample(N, gen) end -- warm: the JIT, the page cache
local ours = best(5, function()
  for _ = 1, REPS do rb:sample(N, gen) end
end) / REPS

-- The reference: the same number of rows at random positions, each copied with ffi.copy
-- from the mapping into an output block (indices drawn beforehand, so no RNG is timed).
local ring = rb:storage().obs
local src = ffi.cast("const char *", C.td_tensor_data_borrow(ring.h))
local out = T.empty(N, FEAT)
local dst = ffi.cast("char *", C.td_tensor_data_borrow(out.h))
local ROW = FEAT * 4
local picks = {}
for r = 1, REPS do
  local idx = T.randint(0, CAP - 1, { N }, gen)
  local t = {}
  for i = 1, N do t[i] = idx[i] end
  picks[r] = t
end
local ref = best(5, function()
  for r = 1, REPS do
    local t = picks[r]
    for i = 1, N do ffi.copy(dst + (i - 1) * ROW, src + t[i] * ROW, ROW) end
  end
end) / REPS
print(("%-52s %8.2f us, row-by-row ffi.copy %8.2f us, copy/ours %.2f (goal >= 0.5)"):format(
  ("ReplayBuffer:sample(%d) of [%d] float32, %d rows"):format(N, FEAT, CAP), ours * 1e6, ref * 1e6, ref / ours))

rb = nil -- luacheck: ignore
ring = nil -- luacheck: ignore
collectgarbage()
end
os.execute("rm -rf '" .. dir .. "'")
