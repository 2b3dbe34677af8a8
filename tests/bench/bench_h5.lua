-- bench_h5.lua: issue 32's HDF5 figures, each next to its reference measured in the same
-- run: H5Source reading an uncompressed file (rows of [256] float32 plus an int64 id,
-- 1 KiB a row; TD_H5_BENCH_MB, default 1024) in batches of 8192 rows,
--   - vs raw H5Dread of the same hyperslabs into buffers allocated once (goal >= 0.8x:
--     our time at most 1.25x the raw one), and, to show where a gap comes from, raw
--     H5Dread into new tensors each batch (what any reader that hands out batches pays:
--     fresh memory and the collections that recycle it);
--   - vs Python tensordict's PersistentTensorDict iterating the same batches
--     (td[i:i + 8192], read into memory) where TD_PYTHON has h5py (goal >= 2x).
-- The file is read from the page cache by all three (one untimed pass warms it). Writes
-- the file under TD_BENCH_DIR (default /tmp) and deletes it. Never run by tests.
-- Usage: luajit tests/bench/bench_h5.lua
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local ffi = require("ffi")
local T = require("tensordict")
local flow = require("tensordict.flow")
local best = require("best")

local MB = tonumber(os.getenv("TD_H5_BENCH_MB")) or 1024
local ROWS, BATCH, WIDTH = MB * 1024, 8192, 256
local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/td-bench-h5"
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")
local path = dir .. "/data.h5"

if not require("tensordict.h5.lib").open() then
  print("bench_h5 skipped: libtensordict_h5 is not built")
  os.exit(0)
end

-- The file, written in pieces of 64 Mi rows' worth through H5Sink would chunk it; the
-- figure is about a contiguous (uncompressed, unchunked) file, so to_h5 writes it whole.
do
  local td = T.TensorDict({ obs = T.rand(ROWS, WIDTH), id = T.arange(ROWS, "int64") }, { ROWS })
  td:to_h5(path)
end
-- setup, before any timed run (never inside one): the 1 GiB source goes now, so that
-- its collection does not land in the first timed pass
collectgarbage()
collectgarbage()

-- The raw reference: HDF5's C API through the FFI, the same hyperslabs, buffers reused.
ffi.cdef([[
  int H5open(void);
  int64_t H5Fopen(const char *name, unsigned flags, int64_t fapl);
  int H5Fclose(int64_t f);
  int64_t H5Dopen2(int64_t loc, const char *name, int64_t dapl);
  int H5Dclose(int64_t d);
  int64_t H5Dget_space(int64_t d);
  int H5Sselect_hyperslab(int64_t space, int op, const uint64_t *start, const uint64_t *stride,
                          const uint64_t *count, const uint64_t *block);
  int64_t H5Screate_simple(int rank, const uint64_t *dims, const uint64_t *maxdims);
  int H5Sclose(int64_t s);
  int H5Dread(int64_t d, int64_t mtype, int64_t mspace, int64_t fspace, int64_t plist, void *buf);
  extern int64_t H5T_NATIVE_FLOAT_g;
  extern int64_t H5T_NATIVE_LLONG_g;
  extern int64_t H5P_CLS_FILE_ACCESS_ID_g;
  int64_t H5Pcreate(int64_t cls);
  int H5Pset_fclose_degree(int64_t fapl, int degree);
]])
local H5 = ffi.load("hdf5_serial")
H5.H5open()
-- HDF5 opens a file once per process: the same close degree as libtensordict_h5's
-- (H5F_CLOSE_STRONG), so that both may hold it open.
local fapl = H5.H5Pcreate(H5.H5P_CLS_FILE_ACCESS_ID_g)
H5.H5Pset_fclose_degree(fapl, 3)
-- fresh: each batch read into new tensors (dropped to the GC, as ours are), the cost a
-- consumer that keeps its batches pays whatever reads them; else one buffer per dataset,
-- reused (the strict reference).
local TC = require("tensordict.lib").C
local handle = require("tensordict.tensor").handle
local function raw_pass(fresh)
  local f = H5.H5Fopen(path, 0, fapl)
  local sets = {
    { d = H5.H5Dopen2(f, "/obs", 0), t = H5.H5T_NATIVE_FLOAT_g, width = WIDTH,
      buf = ffi.new("float[?]", BATCH * WIDTH) },
    { d = H5.H5Dopen2(f, "/id", 0), t = H5.H5T_NATIVE_LLONG_g, width = nil, buf = ffi.new("int64_t[?]", BATCH) },
  }
  local start, count = ffi.new("uint64_t[2]"), ffi.new("uint64_t[2]")
  for row = 0, ROWS - 1, BATCH do
    local n = math.min(BATCH, ROWS - row)
    if fresh then
      sets[1].buf = TC.td_tensor_data_borrow(handle(T.empty(n, WIDTH)))
      sets[2].buf = TC.td_tensor_data_borrow(handle(T.empty({ n }, "int64")))
    end
    for _, s in ipairs(sets) do
      local fs = H5.H5Dget_space(s.d)
      start[0], start[1], count[0], count[1] = row, 0, n, s.width or 0
      local rank = s.width and 2 or 1
      H5.H5Sselect_hyperslab(fs, 0, start, nil, count, nil)
      local ms = H5.H5Screate_simple(rank, count, nil)
      assert(H5.H5Dread(s.d, s.t, ms, fs, 0, s.buf) >= 0, "H5Dread failed")
      H5.H5Sclose(ms)
      H5.H5Sclose(fs)
    end
  end
  for _, s in ipairs(sets) do H5.H5Dclose(s.d) end
  H5.H5Fclose(f)
end

-- Ours: a pass of the node (made once, as a pipeline's epochs use it), its batches each
-- a new TensorDict dropped to the GC.
local rows_seen = 0
local src = flow.H5Source({ path = path, batch_size = BATCH })
local function source_pass()
  rows_seen = 0
  for b in src:iter() do rows_seen = rows_seen + b:batch_size()[1] end
end

raw_pass() -- warms the page cache
local raw, raw_fresh, ours = math.huge, math.huge, math.huge
for _ = 1, 5 do
  raw = math.min(raw, best(1, raw_pass))
  raw_fresh = math.min(raw_fresh, best(1, function() raw_pass(true) end))
  ours = math.min(ours, best(1, source_pass))
end
assert(rows_seen == ROWS, "H5Source saw " .. rows_seen .. " rows")
src:close()
local gib = ROWS * (WIDTH * 4 + 8) / 2 ^ 30
print(("file: %.2f GiB, %d rows of [%d] float32 + int64, batches of %d rows, contiguous, uncompressed")
  :format(gib, ROWS, WIDTH, BATCH))
print(("raw H5Dread of the same hyperslabs: %.3f s (%.2f GiB/s)"):format(raw, gib / raw))
print(("raw H5Dread into new tensors:       %.3f s (%.2f GiB/s)"):format(raw_fresh, gib / raw_fresh))
print(("H5Source:                           %.3f s (%.2f GiB/s)  ratio raw/ours %.2fx (goal >= 0.8x), "
  .. "raw into new tensors/ours %.2fx"):format(ours, gib / ours, raw / ours, raw_fresh / ours))

local py = os.getenv("TD_PYTHON") or "python3"
local ok_py = os.execute(py .. " -c 'import h5py, tensordict' >/dev/null 2>&1")
if ok_py == 0 or ok_py == true then
  local p = io.popen(("%s tests/bench/bench_h5_python.py '%s' %d 2>/dev/null"):format(py, path, BATCH))
  local out = p:read("*a")
  p:close()
  local secs = tonumber(out:match("seconds%s+([%d.]+)"))
  if secs then
    print(("PersistentTensorDict (Python):      %.3f s  ratio python/ours %.2fx (goal >= 2x)")
      :format(secs, secs / ours))
  else
    print("PersistentTensorDict: no figure (" .. out:gsub("\n", " ") .. ")")
  end
else
  print("PersistentTensorDict: skipped (TD_PYTHON has no h5py or tensordict)")
end
os.execute("rm -rf '" .. dir .. "'")
