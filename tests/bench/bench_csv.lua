-- bench_csv.lua: CsvSource's reading speed (issue 31). A clean file of ROWS rows of
-- numbers read plainly (the reference: what the reader did before the messy-file
-- options), with the options on (NA texts, a comment character, on_bad_cell = "nan": the
-- clean file costs the same parse), and gzip-compressed against `zcat file > /dev/null`
-- (inflating alone) timed in the same run. A tree without the options (an older
-- checkout) runs the plain case alone, so the figure can be compared across commits.
-- Writes ~2 files under TD_BENCH_DIR (default /tmp); TD_CSV_BENCH_ROWS sets ROWS.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local flow = T.flow
local now = require("clock")
local best = require("best")

local ROWS = tonumber(os.getenv("TD_CSV_BENCH_ROWS")) or 400000
local COLS, REPEATS = 6, 5
local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. ("/td_bench_csv_%d"):format(os.time())
assert(os.execute(("mkdir -p %q"):format(dir)) == 0)
local path = dir .. "/data.csv"

-- The file: a header and ROWS rows of COLS numbers with 3 to 6 significant digits.
do
  local f = assert(io.open(path, "wb"))
  local names = {}
  for c = 1, COLS do names[c] = "c" .. c end
  f:write(table.concat(names, ","), "\n")
  local g, row = T.Generator(1), {}
  local vals = T.rand({ ROWS, COLS }, "float64", g):mul(2000):sub(1000):totable()
  for r = 1, ROWS do
    for c = 1, COLS do row[c] = ("%.3f"):format(vals[r][c]) end
    f:write(table.concat(row, ","), "\n")
  end
  f:close()
end
assert(os.execute(("gzip -1 -c %q > %q.gz"):format(path, path)) == 0)
local function size(p)
  local f = assert(io.open(p, "rb"))
  local n = f:seek("end")
  f:close()
  return n
end
local mb, gz_mb = size(path) / 1e6, size(path .. ".gz") / 1e6

local has_options = pcall(flow.CsvSource, { path = path, batch_size = 8, on_bad_cell = "nan" })

local function read_all(params)
  return function()
    local n = 0
    for td in flow.CsvSource(params):iter({}) do n = n + #td end
    assert(n == ROWS, n)
  end
end

local plain = best(REPEATS, read_all({ path = path, batch_size = 65536 }))
print(("CsvSource, %d rows x %d float32 columns (%.1f MB): plain %.3f s (%.2f M rows/s, %.0f MB/s)"):format(ROWS,
  COLS, mb, plain, ROWS / plain / 1e6, mb / plain))
if has_options then
  local messy = best(REPEATS, read_all({ path = path, batch_size = 65536, comment = "#", on_bad_cell = "nan" }))
  print(("  with na_values (default), comment, on_bad_cell = \"nan\": %.3f s = %.3fx plain"):format(messy,
    messy / plain))
  local gz = best(REPEATS, read_all({ path = path .. ".gz", batch_size = 65536 }))
  local zcat = best(REPEATS, function()
    local t0 = now()
    assert(os.execute(("zcat %q > /dev/null"):format(path .. ".gz")) == 0)
    return now() - t0
  end)
  print(("  gzip (%.1f MB, level 1): %.3f s (%.2f M rows/s, %.0f MB/s of text) vs zcat > /dev/null %.3f s "
    .. "(%.0f MB/s): %.2fx zcat's time"):format(gz_mb, gz, ROWS / gz / 1e6, mb / gz, zcat, mb / zcat, gz / zcat))
end
os.execute(("rm -rf %q"):format(dir))
