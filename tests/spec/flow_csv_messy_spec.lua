-- flow.CsvSource on messy files (issue 31): NA texts, on_bad_cell's three modes and
-- their counts, per-column dtypes and defaults, usecols, skip_rows (a count and line
-- numbers), comments, gzip input, the errors' file/line/column/text, the counts in
-- tdflow's report, and pandas.read_csv on the same files (TD_PYTHON with pandas).
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")
local CsvSource = require("tensordict.flow.csv").CsvSource

local dir

local function write(name, text) return H.write(dir .. "/" .. name, text) end

-- Every batch of a pass, concatenated; and the batches' sizes.
local function read_all(src)
  local list, sizes = {}, {}
  for td in src:iter({}) do
    list[#list + 1] = td
    sizes[#sizes + 1] = #td
  end
  return #list > 0 and T.cat(list, 1) or nil, sizes
end

-- A tensor's values with NaN as the string "nan" (NaN ~= NaN in comparisons).
local function values(t)
  local out = {}
  for i, v in ipairs(t:totable()) do out[i] = v ~= v and "nan" or v end
  return out
end

local function gzip(path)
  assert(H.sh(("gzip -kf %q"):format(path)), "gzip failed")
  return path .. ".gz"
end

describe("CsvSource on messy files", function()
  setup(function() dir = H.tmpdir() end)
  teardown(function() H.rmtree(dir) end)

  it("reads pandas' default NA texts as NaN in float columns and counts them", function()
    local path = write("na.csv", "a,b\n1,NA\n,2.5\nnan,null\nNaN, 4 \n")
    local src = CsvSource{ path = path, batch_size = 8 }
    local td = read_all(src)
    assert.are.equal("float32", td.a:dtype())
    assert.are.same({ 1, "nan", "nan", "nan" }, values(td.a))
    assert.are.same({ "nan", 2.5, "nan", 4 }, values(td.b))
    assert.are.same({ missing_cells = 5, bad_cells_replaced = 0, bad_rows_skipped = 0 }, src:counts())
    -- a fresh run starts the counts again
    src:open({})
    assert.are.same({ missing_cells = 0, bad_cells_replaced = 0, bad_rows_skipped = 0 }, src:counts())
  end)

  it("takes na_values as the whole list, numbers included", function()
    local path = write("sentinel.csv", "a\n1\n-999\n NA \n")
    local td = read_all(CsvSource{ path = path, batch_size = 8, na_values = { "-999", "NA" } })
    assert.are.same({ 1, "nan", "nan" }, values(td.a))
    H.raises(function() read_all(CsvSource{ path = path, batch_size = 8, na_values = {} }) end,
      "CsvSource: " .. path .. ": line 4, column 1 ('a'): cannot parse ' NA ' as float32")
    H.raises(function() CsvSource{ path = path, batch_size = 8, na_values = "NA" } end,
      "CsvSource: na_values: expected a list of texts, got 'NA'")
    H.raises(function() CsvSource{ path = path, batch_size = 8, na_values = { 1 } } end,
      "CsvSource: na_values[1]: expected a text, got 1")
  end)

  it("refuses a missing cell in an integer column without a default, naming file, line, column and text", function()
    local path = write("int_na.csv", "id,x\n1,0.5\nNA,1.5\n")
    H.raises(function() read_all(CsvSource{ path = path, batch_size = 8, columns = { id = "int64" } }) end,
      "CsvSource: " .. path .. ": line 3, column 1 ('id'): cannot parse 'NA' as int64: a missing value in an "
        .. "integer column without a default (give it a default, or skip such rows)")
    local td = read_all(CsvSource{ path = path, batch_size = 8,
      columns = { id = { dtype = "int64", default = -1 }, x = "float64" } })
    assert.are.equal("int64", td.id:dtype())
    assert.are.same({ 1, -1 }, td.id:totable())
    assert.are.equal("float64", td.x:dtype())
    assert.are.same({ 0.5, 1.5 }, td.x:totable())
  end)

  it("on_bad_cell = 'error' names the file, the line, the column and the text", function()
    local path = write("bad.csv", "a,b\n1,2\n3,\"4x\"\n")
    H.raises(function() read_all(CsvSource{ path = path, batch_size = 8 }) end,
      "CsvSource: " .. path .. ": line 3, column 2 ('b'): cannot parse '4x' as float32")
    local noheader = write("bad_nh.csv", "1,2\n3,oops\n")
    H.raises(function() read_all(CsvSource{ path = noheader, batch_size = 8, header = false }) end,
      "CsvSource: " .. noheader .. ": line 2, column 2: cannot parse 'oops' as float32")
    H.raises(function() CsvSource{ path = path, batch_size = 8, on_bad_cell = "drop" } end,
      'CsvSource: on_bad_cell: expected one of "error", "nan", "skip_row", got "drop"')
  end)

  it("on_bad_cell = 'nan' replaces bad cells by NaN or the column's default and counts them", function()
    local path = write("repl.csv", "x,n,g1,g2\n1,5,1,2\noops,x7,3,?\n3,7,NA,6\n")
    local src = CsvSource{ path = path, batch_size = 8, on_bad_cell = "nan",
      columns = { x = "float64", n = { dtype = "int32", default = 0 }, g = { columns = { "g1", "g2" }, default = 9 } } }
    local td = read_all(src)
    assert.are.same({ 1, "nan", 3 }, values(td.x))
    assert.are.equal("int32", td.n:dtype())
    assert.are.same({ 5, 0, 7 }, td.n:totable())
    assert.are.same({ { 1, 2 }, { 3, 9 }, { 9, 6 } }, td.g:totable())
    assert.are.same({ missing_cells = 1, bad_cells_replaced = 3, bad_rows_skipped = 0 }, src:counts())
    -- an integer column has no NaN: a bad cell there without a default is still an error
    H.raises(function()
      read_all(CsvSource{ path = path, batch_size = 8, on_bad_cell = "nan", columns = { n = "int32" } })
    end, "line 3, column 2 ('n'): cannot parse 'x7' as int32: a bad cell in an integer column without a default")
    H.raises(function()
      CsvSource{ path = path, batch_size = 8, columns = { n = { dtype = "int32", default = 0.5 } } }
    end,
      "CsvSource: columns.n.default: 0.5 is not an integer, and the column is int32")
    H.raises(function()
      read_all(CsvSource{ path = path, batch_size = 8, on_bad_cell = "nan",
        columns = { n = { dtype = "int8", default = 300 } } })
    end, "line 3, column 2 ('n'): cannot parse 'x7' as int8, nor its column's default '300'")
  end)

  it("on_bad_cell = 'skip_row' drops the rows and keeps batches full", function()
    local lines = { "i,x" }
    for i = 1, 10 do lines[#lines + 1] = i % 3 == 0 and ("%d,bad"):format(i) or ("%d,%d.5"):format(i, i) end
    local path = write("skip.csv", table.concat(lines, "\n") .. "\n5,NA\n")
    local src = CsvSource{ path = path, batch_size = 4, on_bad_cell = "skip_row",
      columns = { i = "int64", x = "float32" } }
    local td, sizes = read_all(src)
    assert.are.same({ 4, 4 }, sizes)
    assert.are.same({ 1, 2, 4, 5, 7, 8, 10, 5 }, td.i:totable())
    assert.are.same({ 1.5, 2.5, 4.5, 5.5, 7.5, 8.5, 10.5, "nan" }, values(td.x))
    assert.are.same({ missing_cells = 1, bad_cells_replaced = 0, bad_rows_skipped = 3 }, src:counts())
    -- a missing cell in an integer column without a default drops its row too
    local int_na = write("skip_int.csv", "n\n1\nNA\n3\n")
    local src2 = CsvSource{ path = int_na, batch_size = 4, on_bad_cell = "skip_row", columns = { n = "int16" } }
    assert.are.same({ 1, 3 }, read_all(src2).n:totable())
    assert.are.equal(1, src2:counts().bad_rows_skipped)
  end)

  it("counts dropped rows as records: checkpoints and ranks' shares stay exact", function()
    local lines = { "i" }
    for i = 1, 20 do lines[#lines + 1] = i % 4 == 0 and "bad" or tostring(i) end
    local path = write("shares.csv", table.concat(lines, "\n") .. "\n")
    local function src()
      return CsvSource{ path = path, batch_size = 3, on_bad_cell = "skip_row", columns = { i = "int64" } }
    end
    local want = {}
    for i = 1, 20 do if i % 4 ~= 0 then want[#want + 1] = i end end
    -- two ranks read disjoint record ranges (1-10, 11-20) whose rows make the whole
    local got = {}
    for rank, dropped in ipairs({ 2, 3 }) do
      local s = src()
      for b in s:iter({ dist = { size = 2, rank = rank - 1 } }) do
        for _, v in ipairs(b.i:totable()) do got[#got + 1] = v end
      end
      assert.are.same({ missing_cells = 0, bad_cells_replaced = 0, bad_rows_skipped = dropped }, s:counts())
    end
    assert.are.same(want, got)
    -- a checkpoint after the first batch names the records consumed; a restored pass goes on
    local s = src()
    local it = s:iter({})
    assert.are.same({ 1, 2, 3 }, it().i:totable())
    assert.are.same({ 5, 6, 7 }, it().i:totable())
    local state = s:state()
    assert.are.same({ rows = 7 }, state)
    local again = src()
    again:restore(state)
    local rest = {}
    for b in again:iter({}) do
      for _, v in ipairs(b.i:totable()) do rest[#rest + 1] = v end
    end
    assert.are.same({ 9, 10, 11, 13, 14, 15, 17, 18, 19 }, rest)
  end)

  it("takes usecols as pandas' name for a list of columns, by name only", function()
    local path = write("use.csv", "a,b,c\n1,2,3\n")
    local src = CsvSource{ path = path, batch_size = 2, usecols = { "c", "a" } }
    assert.are.same({ "c", "a" }, src.out_keys)
    assert.are.same({ 3 }, read_all(src).c:totable())
    H.raises(function() CsvSource{ path = path, batch_size = 2, usecols = { 0 } } end,
      "CsvSource: usecols[1]: expected a column name, got 0 (pandas counts columns from 0, columns = {...} "
        .. "from 1: select by number there)")
    H.raises(function() CsvSource{ path = path, batch_size = 2, usecols = { "a" }, columns = { "b" } } end,
      "CsvSource: usecols and columns both select columns; give one of them")
    H.raises(function() CsvSource{ path = path, batch_size = 2, usecols = { "d" } } end,
      "CsvSource: columns[1]: no column 'd' in")
  end)

  it("skips N leading data rows, or the records on listed lines, header line included", function()
    local path = write("rows.csv", "a,b\n1,2\n3,4\n5,6\n7,8\n")
    local src = CsvSource{ path = path, batch_size = 8, skip_rows = 2 }
    assert.are.equal(2, src:len())
    assert.are.same({ 5, 7 }, read_all(src).a:totable())
    local lines = CsvSource{ path = path, batch_size = 8, skip_rows = { 5, 3 } }
    assert.are.equal(2, lines:len())
    assert.are.same({ 1, 5 }, read_all(lines).a:totable())
    -- skipping line 1 makes the next record the header
    local hdr = CsvSource{ path = path, batch_size = 8, skip_rows = { 1 } }
    assert.are.same({ "1", "2" }, hdr.out_keys)
    assert.are.same({ 3, 5, 7 }, read_all(hdr)["1"]:totable())
    assert.are.equal(0, CsvSource{ path = path, batch_size = 8, skip_rows = 9 }:len())
    H.raises(function() CsvSource{ path = path, batch_size = 8, skip_rows = -1 } end,
      "CsvSource: skip_rows: expected a count >= 0 or a list of line numbers, got -1")
    H.raises(function() CsvSource{ path = path, batch_size = 8, skip_rows = { 0 } } end,
      "CsvSource: skip_rows[1]: expected a line number of the file (from 1), got 0")
  end)

  it("ignores comment lines and comment tails, but not a comment character inside quotes", function()
    local path = write("comments.csv", '# made by a logger\n#\na,"b#1"\n1,2 # the first\n# between\n"3",4#\n'
      .. '5,"6"#quoted then a comment\n')
    local src = CsvSource{ path = path, batch_size = 8, comment = "#" }
    assert.are.same({ "a", "b#1" }, src.out_keys)
    assert.are.equal(3, src:len())
    local td = read_all(src)
    assert.are.same({ 1, 3, 5 }, td.a:totable())
    assert.are.same({ 2, 4, 6 }, td:get("b#1"):totable())
    -- the line numbers of errors still count comment lines
    local bad = write("comment_bad.csv", "# x\na\n# y\nz\n")
    H.raises(function() read_all(CsvSource{ path = bad, batch_size = 8, comment = "#" }) end,
      "comment_bad.csv: line 4, column 1 ('a'): cannot parse 'z' as float32")
    H.raises(function() CsvSource{ path = path, batch_size = 8, comment = "##" } end,
      "CsvSource: comment must be one ASCII character other than a quote or a line end, got \"##\"")
    H.raises(function() CsvSource{ path = path, batch_size = 8, comment = "," } end,
      "CsvSource: comment and delimiter are both \",\"")
  end)

  it("reads gzip input as it streams, by its magic bytes whatever its name", function()
    local parts = { "i,x\n" }
    for i = 1, 30000 do parts[#parts + 1] = ("%d,%s\n"):format(i, i % 1000 == 0 and "NA" or ("%.2f"):format(i / 4)) end
    local plain = write("big.csv", table.concat(parts))
    local gz = gzip(plain)
    local a = read_all(CsvSource{ path = plain, batch_size = 4096, columns = { i = "int64", x = "float64" } })
    local src = CsvSource{ path = gz, batch_size = 4096, columns = { i = "int64", x = "float64" } }
    assert.are.equal(30000, src:len())
    local b = read_all(src)
    assert.is_true(a.i:eq(b.i):all())
    assert.is_true((a.x:eq(b.x) + a.x:isnan():logical_and(b.x:isnan())):all())
    assert.are.equal(30, src:counts().missing_cells)
    assert.is_true(H.sh(("cp %q %q"):format(gz, dir .. "/renamed.dat")))
    assert.are.equal(30000, CsvSource{ path = dir .. "/renamed.dat", batch_size = 8 }:len())
    -- a cut or corrupt stream is an error naming the file, never a short read taken for the end
    local f = assert(io.open(gz, "rb"))
    local bytes = f:read("*a")
    f:close()
    local cut = write("cut.csv.gz", bytes:sub(1, math.floor(#bytes / 2)))
    H.raises(function() read_all(CsvSource{ path = cut, batch_size = 4096 }) end,
      "CsvSource: " .. cut .. ": the gzip stream is corrupt or cut short near line")
    local corrupt = write("corrupt.csv.gz", bytes:sub(1, 200) .. ("\255"):rep(64) .. bytes:sub(265))
    H.raises(function() read_all(CsvSource{ path = corrupt, batch_size = 4096 }) end,
      "the gzip stream is corrupt or cut short near line")
    -- the errors of cells in gzip input name the line as in the plain file
    local badgz = gzip(write("badgz.csv", "a\n1\n2\nno\n"))
    H.raises(function() read_all(CsvSource{ path = badgz, batch_size = 8 }) end,
      "badgz.csv.gz: line 4, column 1 ('a'): cannot parse 'no' as float32")
  end)

  it("reports its counts in tdflow's report, as text and in --report JSON", function()
    local path = write("run.csv", "a,b\n1,2\nx,4\n5,NA\n7,8\n")
    local recipe = write("messy.json", json.encode({ source = { use = "CsvSource", path = path, batch_size = 2,
      on_bad_cell = "skip_row" }, steps = { { use = "Take", n = 100 } }, sink = { use = "Collect" } }))
    local report = dir .. "/report.json"
    local tdflow, expect = H.tdflow_runner(dir)
    local _ = tdflow
    expect("run " .. recipe .. " --report " .. report, 0,
      "\nsource CsvSource: bad rows skipped: 1, missing cells: 1\n", "3 rows out")
    local rep = json.decode(assert(H.read(report)))
    assert.are.equal("CsvSource", rep.nodes[1].type)
    assert.are.same({ missing_cells = 1, bad_cells_replaced = 0, bad_rows_skipped = 1 }, rep.nodes[1].counts)
  end)
end)

describe("CsvSource against pandas.read_csv", function()
  local py = os.getenv("TD_PYTHON") or os.getenv("TD_TORCH_PYTHON") or "python3"
  setup(function() dir = H.tmpdir() end)
  teardown(function() H.rmtree(dir) end)

  it("reads the same values from a messy file, gzip included", function()
    if not H.sh(py .. " -c 'import pandas' >/dev/null 2>&1") then
      pending("pandas not installed (TD_PYTHON): read_csv is not compared")
      return
    end
    local text = "# exported\nid,a,b,c\n0,1.5,NA,x\n1,,2,y # tail\n2,nan,null,\"z#\"\n# gap\n3,4,5,w\n4,6,7,v\n"
    local path = write("messy.csv", text)
    local gz = gzip(path)
    H.write(dir .. "/ref.py", [==[
import sys, pandas as pd
for p in sys.argv[1:]:
    d = pd.read_csv(p, comment="#", usecols=["id", "a", "b"], skiprows=[5], na_values=["", "NA", "NaN", "nan", "null"],
                    keep_default_na=False)
    for col in ["id", "a", "b"]:
        print(" ".join("nan" if v != v else repr(float(v)) for v in d[col]))
]==])
    local out = H.output_lines(("%s %s/ref.py %s %s 2>&1"):format(py, dir, path, gz))
    for k, p in ipairs({ path, gz }) do
      -- pandas' skiprows counts lines from 0: its [5] is line 6 here
      local td = read_all(CsvSource{ path = p, batch_size = 3, comment = "#", usecols = { "id", "a", "b" },
        skip_rows = { 6 }, dtype = "float64" })
      for j, col in ipairs({ "id", "a", "b" }) do
        local ours = {}
        for i, v in ipairs(values(td[col])) do ours[i] = v == "nan" and "nan" or ("%.1f"):format(v) end
        assert.are.equal(out[(k - 1) * 3 + j], table.concat(ours, " "), col)
      end
    end
  end)
end)
