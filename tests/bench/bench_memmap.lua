-- bench_memmap.lua: the memmap figures of issue 5, each next to its reference measured
-- in the same run: a raw sequential write of the same bytes with the same fsync policy,
-- memcpy of the same bytes, and Python tensordict's save and load of the same container
-- where it is installed (TD_PYTHON, default python3; bench_memmap_python.py).
-- Writes ~2 GiB under TD_BENCH_DIR (default /tmp). Run by 'make bench'; never by tests.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local ffi = require("ffi")
local T = require("tensordict")
local best = require("best") -- best(runs, fn): the shortest run, in seconds
local C = require("tensordict.lib").C
local raw_write = require("raw_write") -- the reference write

ffi.cdef [[
  void *memcpy(void *dst, const void *src, size_t n);
]]
local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/td-bench-memmap"
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")

-- 1 GiB in 10 leaves of [409600, 64] float32 (100 MiB each, 1000 MiB in all).
local ROWS, LEAVES = 409600, 10
local src = {}
for i = 1, LEAVES do src["leaf" .. i] = T.rand(ROWS, 64) end
local td = T.TensorDict(src, { ROWS })
local bytes = LEAVES * ROWS * 64 * 4

-- The reference: one file written sequentially from memory, then fsynced.
local buf = T.rand(ROWS * LEAVES, 64)
local raw_path = dir .. "/raw.bin"
local raw = best(3, function() raw_write(raw_path, C.td_tensor_data_borrow(buf.h), bytes, true) end)
os.remove(raw_path)
local prefix = dir .. "/td"
local save = best(3, function() td:memmap(prefix, { existsok = true }):free() end)
print(("%-44s %8.3f s, raw write+fsync %8.3f s, raw/ours %.2f (target >= 0.9)"):format(
  "save 1000 MiB in 10 leaves (fsync)", save, raw, raw / save))
-- Python tensordict does not fsync: the same save without fsync, for its comparison.
local save_nofsync = best(3, function() td:memmap(prefix, { existsok = true, fsync = false }):free() end)
local load = best(20, function() local _ = T.load_memmap(prefix) end)
print(("%-44s %8.3f ms (target <= 1 ms)"):format("load_memmap of that container", load * 1e3))

-- A 4M-row [.., 64] float32 memmap buffer, resident, for the write below (sampling
-- from it is bench_memmap_sample.lua).
local BIG = 4194304
local rows = T.TensorDict({ x = T.empty(BIG, 64) }, { BIG })
local buffer = rows:memmap_like(dir .. "/big")
rows = nil -- luacheck: ignore
collectgarbage()
buffer.x:fill_(1) -- every page resident

-- buf[{{i, i + 4095}}] = batch into the resident buffer vs memcpy of the same bytes.
local batch = T.TensorDict({ x = T.rand(4096, 64) }, { 4096 })
local i = 1
local put = best(50, function()
  buffer[{ { i, i + 4095 } }] = batch
  i = (i + 4096) % (BIG - 4096)
end)
local dst = ffi.cast("char *", C.td_tensor_data_borrow(buffer.x.h))
local sp = C.td_tensor_data_borrow(batch.x.h)
local j = 0
local ref = best(50, function()
  ffi.C.memcpy(dst + j * 64 * 4, sp, 4096 * 64 * 4)
  j = (j + 4096) % (BIG - 4096)
end)
print(("%-44s %8.1f us, memcpy %8.1f us, memcpy/ours %.2f (target >= 0.8)"):format(
  "buf[{{i, i + 4095}}] = batch (memmap buffer)", put * 1e6, ref * 1e6, ref / put))

-- Python tensordict's save and load of the same container, where installed.
local py = os.getenv("TD_PYTHON") or "python3"
local pipe = io.popen(("%s tests/bench/bench_memmap_python.py '%s' %d %d 2>/dev/null"):format(py, dir, ROWS, LEAVES))
local out = pipe and pipe:read("*a") or ""
if pipe then pipe:close() end
local psave, pload = out:match("save (%S+)"), out:match("load (%S+)")
if psave then
  print(("%-44s python save %.3f s (no fsync), ours without fsync %.3f s, ours/python %.3f; "
    .. "python load %.3f ms, ours/python %.3f"):format("Python tensordict, same container",
    tonumber(psave), save_nofsync, save_nofsync / tonumber(psave), tonumber(pload) * 1e3,
    load / tonumber(pload)))
else
  print("Python tensordict: not installed (skipped)")
end
os.execute("rm -rf '" .. dir .. "'")
