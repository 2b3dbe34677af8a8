-- flow.CsvSource (lua/tensordict/flow/csv.lua, parser in core/store/csv.c): CSV files
-- written to a temporary folder: headers, quoting, CRLF, grouping, int64 columns, bad
-- cells, empty files, last partial batches, len(), spec round trips and flow.run.
local T = require("tensordict")
local H = require("helpers")
local flow = require("tensordict.flow")
local CsvSource = require("tensordict.flow.csv").CsvSource
require("tensordict.flow.sources")

local dir

-- Writes a file of the spec's folder; returns its path.
local function write(name, text) return H.write(dir .. "/" .. name, text) end

local function all(src)
  local list = {}
  for td in src:iter({}) do list[#list + 1] = td end
  return list
end

describe("flow.CsvSource", function()
  setup(function() dir = H.tmpdir() end)
  teardown(function() H.rmtree(dir) end)

  it("reads every column as float32 leaves by default, in batches with a last partial one", function()
    local path = write("iris.csv",
      "sepal_length,sepal_width,species\n5.1,3.5,0\n4.9,3.0,0\n6.3,3.3,1\n5.8,2.7,2\n7.1,3.0,2\n")
    local src = CsvSource{ path = path, batch_size = 2 }
    assert.are.same({ "sepal_length", "sepal_width", "species" }, src.out_keys)
    assert.are.equal(5, src:len())
    local batches = all(src)
    assert.are.equal(3, #batches)
    assert.are.same({ 2 }, batches[1]:batch_size())
    assert.are.same({ 1 }, batches[3]:batch_size())
    assert.are.equal("float32", batches[1].sepal_length:dtype())
    assert.are.same({ 2 }, batches[1].sepal_length:shape())
    H.assert_near(batches[1].sepal_length:totable(), { 5.1, 4.9 }, 1e-6)
    H.assert_near(batches[3].sepal_width:totable(), { 3.0 }, 0)
    assert.are.same({ "sepal_length", "sepal_width", "species" }, batches[1]:keys())
    -- a second pass starts again
    assert.are.equal(3, #all(src))
  end)

  it("selects columns by name or number, with per-column dtypes and grouped leaves", function()
    local path = write("sel.csv", "a,b,c,label\n1,2,3,7\n4,5,6,8\n")
    local by_list = all(CsvSource{ path = path, batch_size = 10, columns = { "c", 1 } })[1]
    assert.are.same({ "c", "a" }, by_list:keys())
    assert.are.same({ 3, 6 }, by_list.c:totable())
    local typed = all(CsvSource{ path = path, batch_size = 10, columns = { label = "int64", a = "float64" } })[1]
    assert.are.same({ "a", "label" }, typed:keys()) -- a table's keys, sorted
    assert.are.equal("int64", typed.label:dtype())
    assert.are.same({ 7, 8 }, typed.label:totable())
    assert.are.equal("float64", typed.a:dtype())
    local grouped = all(CsvSource{ path = path, batch_size = 10,
      columns = { x = { "a", "b", "c" }, y = { columns = { "label" }, dtype = "int64" } } })[1]
    assert.are.same({ 2, 3 }, grouped.x:shape())
    assert.are.equal("float32", grouped.x:dtype())
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, grouped.x:totable())
    assert.are.same({ 2, 1 }, grouped.y:shape())
    assert.are.same({ { 7 }, { 8 } }, grouped.y:totable())
    local f64 = all(CsvSource{ path = path, batch_size = 10, columns = { "b" }, dtype = "float64" })[1]
    assert.are.equal("float64", f64.b:dtype())
  end)

  it("follows RFC 4180 quoting and accepts CRLF and blank lines", function()
    local path = write("quoted.csv", '"id","the ""value"", quoted",note\r\n1,"2.5","a, b"\r\n\r\n'
      .. '2,"-3e2","line\r\nbreak"\r\n3, 4 ,x\r\n')
    local src = CsvSource{ path = path, batch_size = 5, columns = { "id", 'the "value", quoted' } }
    assert.are.equal(3, src:len())
    local td = all(src)[1]
    assert.are.same({ 1, 2, 3 }, td.id:totable())
    assert.are.same({ 2.5, -300, 4 }, td:get('the "value", quoted'):totable())
  end)

  it("names columns col1, col2, ... without a header, and takes another delimiter", function()
    local path = write("plain.tsv", "1\t2\n3\t4\n5\t6")
    local src = CsvSource{ path = path, batch_size = 2, header = false, delimiter = "\t" }
    assert.are.same({ "col1", "col2" }, src.out_keys)
    assert.are.equal(3, src:len())
    local b = all(src)
    assert.are.same({ 5 }, b[2].col1:totable())
    local second = CsvSource{ path = path, batch_size = 9, header = false, delimiter = "\t", columns = { 2 } }
    assert.are.same({ 2, 4, 6 }, all(second)[1].col2:totable())
  end)

  it("yields nothing for an empty file or a header alone", function()
    local empty = CsvSource{ path = write("empty.csv", ""), batch_size = 4 }
    assert.are.equal(0, empty:len())
    assert.are.equal(0, #all(empty))
    assert.are.same({}, empty.out_keys)
    local header = CsvSource{ path = write("header.csv", "a,b\n"), batch_size = 4 }
    assert.are.same({ "a", "b" }, header.out_keys)
    assert.are.equal(0, header:len())
    assert.are.equal(0, #all(header))
    H.raises(function() CsvSource{ path = dir .. "/empty.csv", batch_size = 4, columns = { "a" } } end,
      "no column 'a' in", "(columns: none: the file is empty)")
  end)

  it("raises on a bad cell naming the file, the line, the column and the text", function()
    local path = write("bad.csv", "a,b\n1,2\n3,4\n5,oops\n")
    local src = CsvSource{ path = path, batch_size = 2 }
    local it = src:iter({})
    assert.are.same({ 2, 4 }, it().b:totable())
    H.raises(function() it() end,
      "CsvSource: " .. path .. ": line 4, column 2 ('b'): cannot parse 'oops' as float32")
    assert.is_nil(it()) -- the pass ended with the error
    local badint = write("badint.csv", "n\n1\n2.5\n")
    H.raises(function() all(CsvSource{ path = badint, batch_size = 8, columns = { n = "int64" } }) end,
      "line 3, column 1 ('n'): cannot parse '2.5' as int64")
    local range = write("range.csv", "n\n300\n")
    H.raises(function() all(CsvSource{ path = range, batch_size = 8, columns = { n = "int8" } }) end,
      "cannot parse '300' as int8 (out of range)")
    H.raises(function() all(CsvSource{ path = write("ragged.csv", "a,b\n1,2\n3\n"), batch_size = 8 }) end,
      "ragged.csv: line 3 has 1 fields, expected 2 (as in the header)")
    H.raises(function() all(CsvSource{ path = write("open.csv", 'a\n"1\n'), batch_size = 8 }) end,
      "open.csv: line 2: a quoted field is not closed before the end of the file")
  end)

  it("raises on bad parameters and unknown columns", function()
    local path = write("ok.csv", "alpha,beta\n1,2\n")
    H.raises(function() CsvSource{ path = dir .. "/missing.csv", batch_size = 2 } end,
      "CsvSource: csv_open: cannot open '" .. dir .. "/missing.csv': No such file or directory")
    H.raises(function() CsvSource{ path = path, batch_size = 2, columns = { "alpah" } } end,
      "CsvSource: columns[1]: no column 'alpah' in " .. path .. " (did you mean 'alpha'?) (columns: 'alpha', 'beta')")
    H.raises(function() CsvSource{ path = path, batch_size = 2, columns = { 3 } } end,
      "columns[1]: column 3 is out of range (" .. path .. " has 2 columns)")
    H.raises(function() CsvSource{ path = path, batch_size = 2, columns = { alpha = "bool" } } end,
      "columns.alpha: bool is not a numeric dtype")
    H.raises(function() CsvSource{ path = path, batch_size = 2, columns = { alpha = "nope" } } end,
      "columns.alpha: expected a dtype name, got 'nope'")
    H.raises(function() CsvSource{ path = path, batch_size = 2, delimiter = ";;" } end,
      "delimiter must be one ASCII character")
    H.raises(function() CsvSource{ path = path, batch_size = 0 } end, "batch_size: expected integer >= 1, got 0")
    H.raises(function() CsvSource{ batch_size = 2 } end, "path: required")
  end)

  it("reads a file larger than its read blocks exactly", function()
    local parts = { "i,x\n" }
    for i = 1, 60000 do parts[#parts + 1] = ("%d,%.3f\n"):format(i, i / 8) end
    local path = write("big.csv", table.concat(parts))
    local src = CsvSource{ path = path, batch_size = 7000, columns = { i = "int64", x = "float64" } }
    assert.are.equal(60000, src:len())
    local td = T.cat(all(src), 1)
    assert.are.same({ 60000 }, td:batch_size())
    assert.is_true(td.i:eq(T.arange(1, 60000, "int64")):all())
    assert.is_true(td.x:eq(T.arange(1, 60000, "float64") / 8):all())
  end)

  it("refuses a record of more than 256 MiB instead of growing its buffer without end (issue 28)", function()
    H.raises(function() CsvSource { path = "/dev/zero", batch_size = 2 } end,
      "tensordict: CsvSource: /dev/zero: line 1 starts a record of more than 268435456 bytes (256 MiB): "
        .. "not a CSV file, or a quote left open")
  end)

  it("round-trips through spec() and runs in flow.run", function()
    local path = write("run.csv", "a,b\n1,2\n3,4\n5,6\n")
    local src = CsvSource{ path = path, batch_size = 2, columns = { g = { "a", "b" } } }
    local spec = src:spec()
    assert.are.same({ type = "CsvSource", path = path, batch_size = 2, columns = { g = { "a", "b" } } }, spec)
    local again = flow.build(spec)
    assert.are.same(src.out_keys, again.out_keys)
    local out = flow.run(again, nil, flow.Collect{ cat = true })
    assert.are.same({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, out.g:totable())
    -- close() ends a pass in progress
    local it = src:iter({})
    it()
    src:close()
    assert.is_nil(it())
  end)
end)
