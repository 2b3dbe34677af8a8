-- tdflow_inspect_stats_spec.lua: looking at data (issue 31): `tdflow inspect PATH --stats`,
-- `--head N`, `--hist KEY [--bins N] [--plot FILE.png]` on folders written here with known
-- contents (every statistic, NaN and inf counts, distinct counts small and past 1000,
-- bool/int/float dtypes, nested keys), Python-written folders (the repository's fixtures,
-- and one written now where TD_PYTHON has tensordict), HDF5 files read a slab at a time,
-- and the errors; T.describe and T.hist in the library.
local T = require("tensordict")
local H = require("helpers")
local inspect_stats = require("tensordict.host.inspect_stats")
local show = require("tensordict.repl.show")

local dir = H.tmpdir()
local tdflow, expect = H.tdflow_runner(dir)

-- The folder every command case reads: batch [6].
local FOLDER = dir .. "/data"
do
  local big = T.arange(1500):to("int64"):mul(7) -- 1500 distinct values
  T.save(T.TensorDict({
    x = T.tensor({ 1.5, 2, 3, 0 / 0, 1 / 0, -1 / 0 }, "float32"),
    n = T.tensor({ 1, 2, 2, 3, 3, 3 }, "int32"),
    flag = T.tensor({ true, false, true, true, false, true }),
    obs = { pos = T.tensor({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 }, { 1, 1, 1 }, { 2, 2, 2 }, { 3, 3, 3 } }, "float64"),
            img = T.zeros(6, 4, 4) },
    big = big:view(6, 250),
    label = "not numbers",
  }, { 6 }), FOLDER)
end

describe("tdflow inspect --stats", function()
  it("gives every statistic of every tensor leaf, nested keys with dots", function()
    local out = expect("inspect " .. FOLDER .. " --stats", 0)
    assert.are.equal(table.concat({
      FOLDER .. "  (memmap folder, batch size [6], 6 tensor leaves; min, max, mean and std of the finite values)",
      "key      dtype    count      mean       std  min    max  nan  inf  distinct",
      "big      int64     1500    5253.5    3032.1    7  10500    0    0    > 1000",
      "flag     bool         6  0.666667  0.516398    0      1    0    0         2",
      "n        int32        6   2.33333  0.816497    1      3    0    0         3",
      "obs.img  float32     96         0         0    0      0    0    0         -",
      "obs.pos  float64     18       3.5   2.50294    1      9    0    0         -",
      "x        float32      6   2.16667  0.763763  1.5      3    1    2         -",
    }, "\n") .. "\n", out)
  end)

  it("reads Python-written folders: every dtype, NaN and inf, nested and escaped keys", function()
    local out = expect("inspect tests/fixtures/python-all-dtypes --stats", 0)
    for _, line in ipairs({
      "bool           bool         12  0.333333  0.492366    0     1    0    0         2",
      "uint8          uint8        12      2.75   1.48477    1     5    0    0         5",
      "int64          int64        12      4.75   1.48477    3     7    0    0         5",
      "float16        float16      12      5.75   1.48477    4     8    0    0         -",
      "bfloat16       bfloat16     12      6.75   1.48477    5     9    0    0         -",
      "special        float32       6   1.58333    1.6266   -0  3.25    1    2         -",
      "nested.deep.y  int64         6       9.5   1.87083    7    12    0    0         6",
      "a b/c%d        float64       6     0.625  0.467707    0  1.25    0    0         -",
      "empty          float32       0         -         -    -     -    0    0         -",
    }) do
      assert.is_truthy(out:find(line, 1, true), line .. "\n" .. out)
    end
  end)

  it("reads Python-written consolidated files", function()
    local out = expect("inspect tests/fixtures/python-consolidated/dtypes.td --stats", 0,
      "(consolidated file, batch size [2], 10 tensor leaves;")
    for _, line in ipairs({
      "uint8     uint8         6          125    93.5414               0            250    0    0         6",
      "int64     int64         6  5.49756e+11  2.057e+12  -2199023255552  3298534883328    0    0         6",
      "bfloat16  bfloat16      6         0.25   0.935414              -1            1.5    0    0         -",
    }) do
      assert.is_truthy(out:find(line, 1, true), line .. "\n" .. out)
    end
  end)

  it("shows Python's lazy stacks as a tree: -1 where the members' sizes differ, nested stacks", function()
    local out = expect("inspect tests/fixtures/python-lazy-stack", 0)
    assert.are.equal(table.concat({
      "tests/fixtures/python-lazy-stack  (memmap folder, batch size [2], 3 tensor leaves, 96 B, 1 non-tensor values)",
      "|-- obs              float32  [2, -1]              32 B",
      "|-- r                int64    [2, 3]               48 B",
      "|-- n/  LazyStackedTensorDict batch [2]",
      "|   `-- x                float32  [2, 2]               16 B",
      "`-- s                [\"first\",\"second\"] (non-tensor)",
    }, "\n") .. "\n", out)
    out = expect("inspect tests/fixtures/python-lazy-stack-dim1", 0) -- stacked at dim 2: the count goes there
    assert.is_truthy(out:find("`-- x                float64  [3, 2, -1]           144 B", 1, true), out)
  end)

  it("summarises Python's lazy stacks, whose members differ in shape, member by member", function()
    local out = expect("inspect tests/fixtures/python-lazy-stack --stats", 0)
    assert.are.equal(table.concat({
      "tests/fixtures/python-lazy-stack  (memmap folder, batch size [2], 4 tensor leaves; min, max, mean and std "
        .. "of the finite values)",
      "key     dtype    count    mean      std  min  max  nan  inf  distinct",
      "obs     float32      8  12.875  15.4867    0   40    0    0         -",
      "r       int64        6     3.5  1.87083    1    6    0    0         6",
      "n.x     float32      4     0.5  0.57735    0    1    0    0         -",
      "only_a  bool         1       1        -    1    1    0    0         1",
    }, "\n") .. "\n", out)
    local d = T.describe(T.lazy_stack({ T.TensorDict({ x = T.tensor({ 1, 2 }) }, {}),
      T.TensorDict({ x = T.tensor({ 3, 4, 5 }) }, {}) }))
    assert.are.same({ 5, 3, 1, 5 }, { d.x.count, d.x.mean, d.x.min, d.x.max })
    local ok, err = pcall(T.describe, T.lazy_stack({ T.TensorDict({ x = T.tensor({ 1, 2 }) }, {}),
      T.TensorDict({ x = T.tensor({ 3, 4 }, "float64") }, {}) }))
    assert.is_false(ok)
    assert.is_truthy(err:find("describe: the members of the stack hold 'x' as float32 and as float64", 1, true), err)
  end)

  -- (NumPy alone: importing Python tensordict takes 10+ s here; the fixtures above are
  -- Python tensordict's own folders)
  it("matches NumPy's statistics of the same values", function()
    local py = os.getenv("TD_PYTHON") or "python3"
    if not H.sh(py .. " -c 'import numpy' >/dev/null 2>&1") then
      pending("numpy not installed where TD_PYTHON points")
      return
    end
    local script = H.write(dir .. "/write.py", ([[
import numpy as np
g = np.random.default_rng(3)
x = (g.standard_normal(20000) * 3 + 1e4).astype(np.float32)
x[::1000] = np.nan
k = g.integers(-20, 20, 20000).astype(np.int16)
np.save("%s/x.npy", x)
np.save("%s/k.npy", k)
d = x[~np.isnan(x)].astype(np.float64)
print(*[repr(float(v)) for v in (d.mean(), d.std(ddof=1), d.min(), d.max())], len(np.unique(k)))
]]):format(dir, dir))
    local want = H.output_lines(py .. " " .. script)[1]
    local mean, std, lo, hi, distinct = want:match("(%S+) (%S+) (%S+) (%S+) (%S+)")
    local path = dir .. "/np"
    T.save(T.TensorDict({ x = T.load_npy(dir .. "/x.npy"), s = { k = T.load_npy(dir .. "/k.npy") } }, { 20000 }), path)
    local d = T.describe(T.load_memmap(path))
    assert.is_true(math.abs(d.x.mean - tonumber(mean)) <= 1e-12 * 1e4, want)
    assert.is_true(math.abs(d.x.std - tonumber(std)) <= 1e-12 * 3, want)
    assert.are.same({ tonumber(lo), tonumber(hi), 20, 0 }, { d.x.min, d.x.max, d.x.nan, d.x.inf })
    assert.are.equal(tonumber(distinct), d["s.k"].distinct)
    expect("inspect " .. path .. " --stats", 0, "s.k  int16    20000", "  20    0         -\n")
  end)

  it("reads an HDF5 file a slab of rows at a time, with the same results", function()
    if require("tensordict.h5.lib").open() == nil then
      pending("libtensordict_h5 is not built")
      return
    end
    local td = T.load_memmap(FOLDER):exclude("label")
    local h5 = dir .. "/data.h5"
    td:to_h5(h5)
    local whole = inspect_stats.text(FOLDER):gsub("^[^\n]*\n", "")
    local saved = inspect_stats.SLAB_BYTES
    inspect_stats.SLAB_BYTES = 100 -- two rows a slab: three slabs
    local ok, text = pcall(inspect_stats.text, h5)
    inspect_stats.SLAB_BYTES = saved
    assert.is_true(ok, text)
    assert.are.equal(h5 .. "  (HDF5 file, batch size [6], 6 tensor leaves; min, max, mean and std of the finite "
      .. "values)", text:match("^[^\n]*"))
    assert.are.equal(whole, (text:gsub("^[^\n]*\n", "")))
  end)
end)

describe("tdflow inspect --head", function()
  it("shows the first rows, a column per leaf, trailing dims compact", function()
    local out = expect("inspect " .. FOLDER .. " --head 3", 0)
    assert.are.equal(table.concat({
      FOLDER .. ": rows 1-3 of 6",
      "row  big          flag   n  obs.img         obs.pos    x",
      "1    [250] int64  true   1  [4, 4] float32  [1, 2, 3]  1.5",
      "2    [250] int64  false  2  [4, 4] float32  [4, 5, 6]  2",
      "3    [250] int64  true   2  [4, 4] float32  [7, 8, 9]  3",
    }, "\n") .. "\n", out)
    -- more rows than there are: all of them; NaN and inf as Lua writes them
    out = expect("inspect " .. FOLDER .. " --head 100", 0, ": rows 1-6 of 6")
    assert.is_truthy(out:find("\n6    [250] int64  true   3  [4, 4] float32  [3, 3, 3]  -inf\n", 1, true), out)
    assert.is_truthy(out:find("  nan\n", 1, true), out)
  end)

  it("refuses a count that is not a positive integer", function()
    expect("inspect " .. FOLDER .. " --head 0", 2, "--head expects a positive integer, got '0'")
  end)
end)

describe("tdflow inspect --hist", function()
  it("draws the bins with their edges and counts; NaN and inf are counted apart", function()
    local out = expect("inspect " .. FOLDER .. " --hist x --bins 3", 0)
    local full = ("\u{2588}"):rep(40)
    assert.are.equal(table.concat({
      FOLDER .. "  x: 6 values (float32), 3 bins; not counted: 1 NaN, 2 inf",
      "[1.5, 2)  " .. full .. "  1",
      "[2, 2.5)  " .. full .. "  1",
      "[2.5, 3]  " .. full .. "  1",
    }, "\n") .. "\n", out)
    out = expect("inspect " .. FOLDER .. " --hist obs.pos --bins 2", 0)
    assert.is_truthy(out:find("obs.pos: 18 values (float64), 2 bins\n", 1, true), out)
    -- 13 values in 1..4, 5 in 5..9: a bar of 5/13 of 40 cells, 15 and 3 eighths (U+258D)
    assert.is_truthy(out:find("[1, 5)  " .. full .. "  13\n", 1, true), out)
    assert.is_truthy(out:find("[5, 9]  " .. ("\u{2588}"):rep(15) .. "\u{258D}" .. (" "):rep(24) .. "  5\n", 1, true),
      out)
    -- bool and integer leaves count as float64; the default is 10 bins
    out = expect("inspect " .. FOLDER .. " --hist flag", 0, "flag: 6 values (bool), 10 bins")
    assert.is_truthy(out:find("[0, 0.1)    " .. ("\u{2588}"):rep(20), 1, true), out)
    assert.is_truthy(out:find("[0.9, 1]    " .. full .. "  4", 1, true), out)
  end)

  it("writes the chart as a PNG with --plot where gnuplot is installed", function()
    if not require("tensordict.host.gnuplot").available() then
      pending("gnuplot is not installed (apt-get install gnuplot-nox)")
      return
    end
    local png = dir .. "/hist.png"
    expect("inspect " .. FOLDER .. " --hist n --bins 3 --plot " .. png, 0, "wrote " .. png)
    assert.are.equal("\137PNG\r\n\26\n", H.read(png):sub(1, 8))
  end)

  it("says how to install gnuplot where it is missing", function()
    local out, err, code = tdflow("inspect " .. FOLDER .. " --hist n --plot " .. dir .. "/none.png",
      "TDFLOW_GNUPLOT=/nonexistent/gnuplot")
    assert.are.equal(1, code, out)
    assert.are.equal("tdflow: --plot " .. dir .. "/none.png: gnuplot is not installed (apt-get install gnuplot-nox)\n",
      err)
    assert.is_false(H.exists(dir .. "/none.png"))
  end)

  it("names the key, the option and the values that are wrong", function()
    local _, err = expect("inspect " .. FOLDER .. " --hist obs.pso", 1)
    assert.are.equal(("tdflow: inspect --hist: %s has no key 'obs.pso' (did you mean 'obs.pos'?)\n"):format(FOLDER),
      err)
    _, err = expect("inspect " .. FOLDER .. " --hist obs", 1)
    assert.are.equal(("tdflow: inspect --hist: 'obs' in %s is a nested container, not a leaf of numbers "
      .. "(its leaves: obs.img, obs.pos)\n"):format(FOLDER), err)
    _, err = expect("inspect " .. FOLDER .. " --hist label", 1)
    assert.are.equal(("tdflow: inspect --hist: 'label' in %s is a non-tensor value, not a leaf of numbers\n")
      :format(FOLDER), err)
    expect("inspect " .. FOLDER .. " --hist x --bins 0", 2, "--bins expects a positive integer, got '0'")
    expect("inspect " .. FOLDER .. " --hist x --bins x", 2, "--bins expects a positive integer, got 'x'")
    expect("inspect " .. FOLDER .. " --bins 4", 1, "tdflow: inspect: --bins needs --hist KEY")
    expect("inspect " .. FOLDER .. " --plot a.png", 1, "tdflow: inspect: --plot needs --hist KEY")
    expect("inspect " .. FOLDER .. " --stats --hist x", 2, "option '--hist' can not be used together with option")
    expect("inspect " .. dir .. "/nope --stats", 1, "tdflow: inspect: " .. dir .. "/nope: no such file or folder")
  end)
end)

describe("T.describe", function()
  it("summarises a tensor, and prints as a table (tdrepl too)", function()
    local d = T.describe(T.tensor({ 1, 2, 3, 4, 0 / 0 }, "float64"))
    assert.are.same({ 5, 1, 0, 1, 4, 2.5, "float64" }, { d.count, d.nan, d.inf, d.min, d.max, d.mean, d.dtype })
    assert.is_true(math.abs(d.std - math.sqrt(5 / 3)) < 1e-15)
    assert.is_nil(d.distinct)
    local text = "dtype    count  mean      std  min  max  nan  inf  distinct\n"
      .. "float64      5   2.5  1.29099    1    4    1    0         -"
    assert.are.equal(text, tostring(d))
    assert.are.equal(text, show.value(d))
  end)

  it("summarises every tensor leaf of a TensorDict, by key", function()
    local td = T.TensorDict({ a = T.tensor({ 5, 5, 7 }, "uint8"), b = { c = T.tensor({ true, true, true }) },
      note = "skipped" }, { 3 })
    local d = T.describe(td)
    assert.are.equal(2, #d)
    assert.are.same({ "a", "b.c" }, { d[1].key, d[2].key })
    assert.are.same({ 2, 5, 7 }, { d.a.distinct, d.a.min, d.a.max })
    assert.are.equal(1, d["b.c"].distinct)
    assert.are.equal(table.concat({
      "key  dtype  count     mean     std  min  max  nan  inf  distinct",
      "a    uint8      3  5.66667  1.1547    5    7    0    0         2",
      "b.c  bool       3        1       0    1    1    0    0         1",
    }, "\n"), tostring(d))
    assert.are.equal("(no tensor leaves)", tostring(T.describe(T.TensorDict({}, {}))))
  end)

  it("keeps the mean and std of 1e6 float32 values near 1e4 to float32 precision", function()
    local x = T.arange(0, 999999):to("float32"):remainder(7):mul(0.125):add(1e4) -- 1e6 values, exact in float32
    local d = T.describe(x)
    local v, n, s, q = x:totable(), x:numel(), 0, 0
    for i = 1, n do s = s + v[i] end
    local mean = s / n
    for i = 1, n do q = q + (v[i] - mean) ^ 2 end
    assert.are.equal(1e6, d.count)
    assert.is_true(math.abs(d.mean - mean) < 1e-9, ("%.17g vs %.17g"):format(d.mean, mean))
    assert.is_true(math.abs(d.std - math.sqrt(q / (n - 1))) < 1e-9)
    assert.are.same({ 1e4, 1e4 + 0.75 }, { d.min, d.max })
  end)

  it("refuses what is neither a tensor, a TensorDict nor a lazy stack", function()
    local ok, err = pcall(T.describe, 3)
    assert.is_false(ok)
    assert.is_truthy(err:find("describe: expected a tensor, a TensorDict or a lazy stack, got 3", 1, true), err)
  end)
end)

describe("T.hist", function()
  it("gives histc's counts and the edges, and prints the chart", function()
    local h = T.hist(T.tensor({ 0, 1, 1, 2, 2, 2, 3, 0 / 0 }, "float32"), { bins = 3 })
    assert.are.same({ 1, 2, 4 }, h.counts)
    assert.are.same({ 0, 1, 2, 3 }, h.edges)
    assert.are.same({ 8, 1, 0, 0 }, { h.total, h.nan, h.inf, h.outside })
    assert.are.equal(table.concat({
      "8 values (float32), 3 bins; not counted: 1 NaN",
      "[0, 1)  " .. ("\u{2588}"):rep(10) .. (" "):rep(30) .. "  1",
      "[1, 2)  " .. ("\u{2588}"):rep(20) .. (" "):rep(20) .. "  2",
      "[2, 3]  " .. ("\u{2588}"):rep(40) .. "  4",
    }, "\n"), tostring(h))
    -- a range of its own: values outside are counted apart; eighths of a cell
    h = T.hist(T.tensor({ 1, 2, 3, 4, 5, 6, 7, 8, 9 }), { bins = 2, min = 2, max = 4, width = 3 })
    assert.are.same({ 1, 2 }, h.counts)
    assert.are.equal(6, h.outside)
    assert.is_truthy(tostring(h):find("[2, 3)  \u{2588}\u{258C}   1", 1, true), tostring(h))
    -- one value alone: a bin of width 1 around it
    assert.are.same({ 4.5, 5, 5.5 }, T.hist(T.tensor({ 5, 5 }), { bins = 2 }).edges)
    -- a range wider than the dtype holds still gets its bins and finite edges
    h = T.hist(T.tensor({ -1e308, 1e308, 0, 5e307 }, "float64"), { bins = 4 })
    assert.are.same({ 1, 0, 1, 2 }, h.counts) -- 0 in [0, 5e307), 5e307 in [5e307, 1e308]
    assert.are.same({ -1e308, -5e307, 0, 5e307, 1e308 }, h.edges)
    assert.are.same({ 1, 2 }, T.hist(T.tensor({ -3e38, 3e38, 0 }, "float32"), { bins = 2 }).counts)
    -- nothing finite: empty bins, everything counted apart
    h = T.hist(T.tensor({ 0 / 0, 1 / 0 }), { bins = 2 })
    assert.are.same({ { 0, 0 }, 1, 1 }, { h.counts, h.nan, h.inf })
  end)

  it("refuses bad options naming them", function()
    for _, case in ipairs({
      { { bins = 0 }, "hist: bins must be an integer in 1..1000000, got 0" },
      { { bins = 2.5 }, "hist: bins must be an integer in 1..1000000, got 2.5" },
      { { min = 3, max = 1 }, "hist: the range must be finite with min <= max, got [3, 1]" },
      { { bin = 3 }, "hist: unknown option 'bin'" },
    }) do
      local ok, err = pcall(T.hist, T.tensor({ 1, 2 }), case[1])
      assert.is_false(ok)
      assert.is_truthy(err:find(case[2], 1, true), err)
    end
    local ok, err = pcall(T.hist, "x")
    assert.is_false(ok)
    assert.is_truthy(err:find("hist: expected a tensor, got 'x'", 1, true), err)
  end)
end)
