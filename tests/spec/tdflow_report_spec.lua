-- tdflow_report_spec.lua: `tdflow report FILE [--metric NAME] [--png OUT.png]` (issue 31):
-- the time shares of a report a real `tdflow run --report` wrote, a sweep summary written
-- by hand in tdflow sweep's format (a table of variants and metrics, a bar chart of one
-- metric), --metric, --png where gnuplot is installed (and the message where it is not),
-- and files that are neither, each with its exact message.
local json = require("tensordict.json")
local H = require("helpers")

local dir = H.tmpdir()
local tdflow, expect = H.tdflow_runner(dir)
local function write(name, text) return H.write(dir .. "/" .. name, text) end
local has_gnuplot = require("tensordict.host.gnuplot").available()
local FULL = "\u{2588}"

local SWEEP = [[{"recipe": "r.json", "out": "/tmp/out", "metrics": ["loss", "acc"], "variants": [
  {"id": "v1", "path": "/tmp/out/v1", "overrides": {"steps.1.n": 1, "seed": 1}, "status": "ok", "rows_in": 100,
   "rows_out": 90, "seconds": 1.5, "metrics": {"loss": 0.5, "acc": 0.9}},
  {"id": "v2", "path": "/tmp/out/v2", "overrides": {"steps.1.n": 2, "seed": 1}, "status": "ok", "rows_in": 100,
   "rows_out": 1200, "seconds": 1.25, "metrics": {"loss": 0.25, "acc": 0.95}},
  {"id": "v3", "path": "/tmp/out/v3", "overrides": {"steps.1.n": 4, "seed": 1}, "status": "failed", "rows_in": 10,
   "rows_out": 0, "seconds": 0.1, "metrics": {}, "error": "steps[1]: boom"}]}]]

describe("tdflow report of a run", function()
  local recipe = write("r.json", [[{"batch_size": 16, "source": {"use": "ParticleSource", "n": 40, "steps": 2,
    "seed": 1}, "steps": [{"use": "Apply", "keys": ["pos"], "fn": "Tensor.neg", "out_keys": ["neg"]},
    {"use": "Take", "n": 3}], "sink": {"use": "Discard"}}]])
  local rep = dir .. "/rep.json"
  expect("run " .. recipe .. " --quiet --report " .. rep, 0)

  it("draws each step's share of the time", function()
    local doc = json.decode(H.read(rep))
    local out = expect("report " .. rep, 0)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal(5, #lines, out)
    assert.are.equal(("%s: run of %s, ok, 16 rows in, 3 rows out in %.3f s; share of the time per step:")
      :format(rep, recipe, doc.seconds), lines[1])
    local top = 0
    for _, n in ipairs(doc.nodes) do top = math.max(top, n.share) end
    for i, where in ipairs({ "source (ParticleSource)", "steps[1] (Apply)", "steps[2] (Take)", "sink (Discard)" }) do
      local n = doc.nodes[i]
      assert.are.equal(where, lines[i + 1]:sub(1, #where))
      -- the bar's full cells: share / largest share of 40 cells, to the nearest eighth
      local eighths = math.floor(n.share / top * 320 + 0.5)
      local bar = lines[i + 1]:match("^" .. where:gsub("%p", "%%%0") .. "%s+(%S*)")
      assert.are.equal(math.floor(eighths / 8), select(2, bar:gsub(FULL, "")), lines[i + 1])
      assert.is_truthy(lines[i + 1]:find(("%.1f%%  %.3f s"):format(n.share * 100, n.seconds), 1, true), lines[i + 1])
    end
  end)

  it("draws it with gnuplot with --png", function()
    if not has_gnuplot then
      pending("gnuplot is not installed (apt-get install gnuplot-nox)")
      return
    end
    local png = dir .. "/run.png"
    expect("report " .. rep .. " --png " .. png, 0, "wrote " .. png)
    assert.are.equal("\137PNG\r\n\26\n", H.read(png):sub(1, 8))
  end)

  it("says how a failed run ended", function()
    local failed = write("failed.json", '{"recipe": "r.json", "status": "failed", "error": "steps[1]: boom", '
      .. '"seconds": 2, "rows_in": 10, "rows_out": 0, "nodes": [{"where": "source", "type": "CsvSource", '
      .. '"seconds": 1.5}, {"where": "steps[1]", "seconds": 0.5}]}')
    local out = expect("report " .. failed, 0)
    assert.are.equal(table.concat({
      failed .. ": run of r.json, failed, 10 rows in, 0 rows out in 2.000 s; share of the time per step:",
      "source (CsvSource)  " .. FULL:rep(40) .. "   75.0%  1.500 s",
      "steps[1]            " .. FULL:rep(13) .. "\u{258D}" .. (" "):rep(26) .. "   25.0%  0.500 s",
      "error: steps[1]: boom",
    }, "\n") .. "\n", out)
  end)

  it("refuses --metric, which is for sweeps", function()
    local _, err = expect("report " .. rep .. " --metric loss", 1)
    assert.are.equal(("tdflow: report: --metric is for a sweep summary; %s is a run report\n"):format(rep), err)
  end)
end)

describe("tdflow report of a sweep", function()
  local path = write("sweep.json", SWEEP)

  it("prints the variants with every metric and a chart of the first", function()
    local out = expect("report " .. path, 0)
    assert.are.equal(table.concat({
      path .. ": sweep of r.json, 3 variants",
      "variant  status  rows out  seconds  loss   acc  overrides",
      "v1       ok            90    1.500   0.5   0.9  seed=1 steps.1.n=1",
      "v2       ok         1,200    1.250  0.25  0.95  seed=1 steps.1.n=2",
      "v3       failed         0    0.100     -     -  seed=1 steps.1.n=4",
      "v3: steps[1]: boom",
      "",
      "loss per variant:",
      "v1  " .. FULL:rep(40) .. "  0.5",
      "v2  " .. FULL:rep(20) .. (" "):rep(20) .. "  0.25",
      "v3  " .. (" "):rep(40) .. "  - (failed)",
    }, "\n") .. "\n", out)
  end)

  it("charts the metric --metric names", function()
    local out = expect("report " .. path .. " --metric acc", 0, "acc per variant:\n")
    -- 0.9 / 0.95 of 40 cells: 37 and 7/8 (U+2589)
    assert.is_truthy(out:find("v1  " .. FULL:rep(37) .. "\u{2589}  " .. "  0.9\n", 1, true), out)
    assert.is_truthy(out:find("v2  " .. FULL:rep(40) .. "  0.95\n", 1, true), out)
    local _, err = expect("report " .. path .. " --metric acx", 1)
    assert.are.equal("tdflow: report: --metric acx: the sweep has no such metric (metrics: loss, acc) "
      .. "(did you mean 'acc'?)\n", err)
  end)

  it("draws the chart with gnuplot with --png, or says how to install it", function()
    local png = dir .. "/sweep.png"
    if has_gnuplot then
      expect("report " .. path .. " --png " .. png, 0, "wrote " .. png)
      assert.are.equal("\137PNG\r\n\26\n", H.read(png):sub(1, 8))
    end
    local _, err, code = tdflow("report " .. path .. " --png " .. dir .. "/none.png", "TDFLOW_GNUPLOT=/no/gnuplot")
    assert.are.equal(1, code)
    assert.are.equal(("tdflow: --png %s/none.png: gnuplot is not installed (apt-get install gnuplot-nox)\n")
      :format(dir), err)
    _, err = expect("report " .. path .. " --png " .. dir .. "/no/such/x.png", 1)
    if has_gnuplot then
      assert.are.equal(("tdflow: --png %s/no/such/x.png: the folder '%s/no/such' does not exist\n"):format(dir, dir),
        err)
    end
  end)

  it("says what is wrong with a sweep it cannot chart", function()
    local empty = write("empty.json", '{"recipe": "r", "out": "o", "metrics": [], "variants": []}')
    local _, err = expect("report " .. empty, 1)
    assert.are.equal(("tdflow: report: %s: the sweep has no metrics to chart\n"):format(empty), err)
    local bad = write("bad.json", '{"recipe": "r", "out": "o", "metrics": ["m"], "variants": [3]}')
    _, err = expect("report " .. bad, 1)
    assert.are.equal(("tdflow: report: %s: variant 1 is not an object\n"):format(bad), err)
  end)
end)

describe("tdflow report of other files", function()
  local NEITHER = "is neither a run report (tdflow run --report FILE) nor a sweep summary (tdflow sweep's sweep.json)"
  it("names what the file is not", function()
    local cases = {
      { "recipe.json", '{"source": {"use": "X"}}', "(a JSON object without 'nodes' and 'seconds', or 'variants' and "
        .. "'metrics')" },
      { "array.json", "[1, 2]", "(a JSON array without 'nodes' and 'seconds', or 'variants' and 'metrics')" },
      { "text.txt", "hello", "(not JSON: json: " },
    }
    for _, case in ipairs(cases) do
      local file = write(case[1], case[2])
      local _, err = expect("report " .. file, 1)
      assert.are.equal(("tdflow: report: %s %s %s"):format(file, NEITHER, case[3]), err:sub(1, #file + #NEITHER
        + #case[3] + 18), err)
    end
    local nodes = write("nodes.json", '{"seconds": 1, "nodes": [{"where": "source"}]}')
    local _, err = expect("report " .. nodes, 1)
    assert.are.equal(("tdflow: report: %s: node 1 has no 'where' and 'seconds'\n"):format(nodes), err)
    _, err = expect("report " .. dir .. "/missing.json", 1)
    assert.are.equal(("tdflow: report: %s/missing.json: no such file\n"):format(dir), err)
    _, err = expect("report " .. dir, 1)
    assert.are.equal(("tdflow: report: %s is a folder, not a file\n"):format(dir), err)
    expect("report", 2, "missing argument 'file'")
  end)
end)
