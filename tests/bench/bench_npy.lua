-- bench_npy.lua: NumPy's files (issue 32): t:save_npy of 1 GiB next to a raw sequential
-- write (and fsync) of the same bytes in the same run, and T.load_npy{mmap = true} of
-- that file, and numpy's np.save / np.load(mmap_mode="r") of the same where TD_PYTHON
-- has numpy. Writes ~2 GiB under TD_BENCH_DIR (default /tmp). Run by 'make bench'.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local best = require("best") -- best(runs, fn): the shortest run, in seconds
local C = require("tensordict.lib").C
local raw_write_file = require("raw_write")

local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/td-bench-npy"
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")

local t = T.rand(4096 * 1024, 64) -- 1 GiB of float32
local bytes = t:numel() * 4

-- The reference: the same bytes written sequentially from memory into one new file.
local function raw_write(fsync)
  local path = dir .. "/raw.bin"
  return best(3, function() raw_write_file(path, C.td_tensor_data_borrow(t.h), bytes, fsync) end,
    function() os.remove(path) end)
end

local path = dir .. "/a.npy"
for _, fsync in ipairs({ true, false }) do
  -- each side writes a new file (the previous one removed, untimed), in turn
  local ours = best(3, function() t:save_npy(path, { fsync = fsync }) end, function() os.remove(path) end)
  local raw = raw_write(fsync)
  print(("%-40s %8.3f s, raw write%s %8.3f s, raw/ours %.2f (target >= 0.9)"):format(
    ("save_npy 1 GiB%s"):format(fsync and " (fsync)" or ""), ours, fsync and "+fsync" or "", raw, raw / ours))
end
local load = best(20, function() local _ = T.load_npy(path, { mmap = true }) end)
print(("%-40s %8.3f ms (target <= 1 ms)"):format("load_npy{mmap = true} of it", load * 1e3))

local py = os.getenv("TD_PYTHON") or "python3"
if os.execute(py .. " -c 'import numpy' >/dev/null 2>&1") == 0 then
  local p = io.popen(([[%s -c "
import time, numpy as np
a = np.load('%s', mmap_mode='r')
best = min((lambda t0: (np.load('%s', mmap_mode='r'), time.perf_counter() - t0)[1])(time.perf_counter())
           for _ in range(20))
b = np.array(a)
t0 = time.perf_counter(); np.save('%s/np.npy', b); s = time.perf_counter() - t0
print('%%.3f %%.3f' %% (s, best * 1e3))
"]]):format(py, path, path, dir))
  local s, l = p:read("*a"):match("([%d.]+) ([%d.]+)")
  p:close()
  if s then print(("numpy: np.save of it %s s (no fsync), np.load(mmap_mode='r') %s ms"):format(s, l)) end
end
os.execute("rm -rf '" .. dir .. "'")
