-- Non-tensor values on disk keep exactly what was written (issue 12, items 1 and 9): both
-- loaders (memmap folders and consolidated files) read them through the one JSON layer,
-- so Python's NaN and Infinity, \u0000 in values and keys, floats such as 3.0 and
-- integers past 2^53 come back as they were, and re-saving writes them back unchanged.
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")

local tmpdir, sh = H.tmpdir, H.sh

local NTD = "<class 'tensordict.tensorclass.NonTensorData'>"

-- A memmap folder as Python tensordict 0.15 writes it, with one NonTensorData per value:
-- values maps a key (as JSON text, escapes allowed) to the data's literal JSON text.
local function python_folder(dir, values, order)
  sh(("mkdir -p '%s'"):format(dir))
  local entries = {}
  for _, key in ipairs(order) do
    local sub = key:gsub("\\u0000", "%%00")
    sh(("mkdir -p '%s/%s'"):format(dir, sub))
    H.write(("%s/%s/meta.json"):format(dir, sub),
      ('{"_type": "%s", "data": %s, "_metadata": null, "_is_non_tensor": true}')
        :format(NTD, values[key]))
    entries[#entries + 1] = ('"%s": {"type": "NonTensorData"}'):format(key)
  end
  H.write(dir .. "/meta.json", ("{%s, \"shape\": [], \"device\": \"cpu\", \"_type\": \"<class "
    .. "'tensordict._td.TensorDict'>\", \"_format_version\": 1, \"_class\": "
    .. "\"tensordict:TensorDict\"}"):format(table.concat(entries, ", ")))
end

local VALUES = {
  nan = "NaN", inf = "Infinity", ninf = "-Infinity", big = "1000000000000000000000000000000",
  float = "3.0", sum = "0.30000000000000004", p53 = "9007199254740993", nul = '"a\\u0000b"',
  ["k\\u0000ey"] = '"v"', list = '[1.0, NaN, {"x": -0.0}]',
}
local ORDER = { "nan", "inf", "ninf", "big", "float", "sum", "p53", "nul", "k\\u0000ey", "list" }

-- What the Lua values of VALUES are.
local function check_values(td)
  local nan = td:get("nan")
  assert.is_true(nan ~= nan)
  assert.are.equal(math.huge, td:get("inf"))
  assert.are.equal(-math.huge, td:get("ninf"))
  assert.are.equal(1e30, td:get("big"))
  assert.are.equal(3, td:get("float"))
  assert.are.equal(0.1 + 0.2, td:get("sum"))
  assert.are.equal(2 ^ 53, td:get("p53")) -- the nearest double; the text keeps ...993
  assert.are.equal("a\0b", td:get("nul"))
  assert.are.equal("v", td:get("k\0ey"))
  local list = td:get("list")
  assert.are.equal(1, list[1])
  assert.is_true(list[2] ~= list[2])
  assert.are.equal(-math.huge, 1 / list[3].x)
end

-- The data of a NonTensorData folder as written (its literal text).
local function data_text(dir, sub)
  local meta = H.read(("%s/%s/meta.json"):format(dir, sub))
  return meta:match('"data": (.*), "_metadata"')
end

describe("non-tensor values read from Python's files", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("load_memmap reads NaN, Infinity, \\u0000, big integers and floats exactly", function()
    python_folder(dir .. "/py", VALUES, ORDER)
    check_values(T.load_memmap(dir .. "/py"))
  end)

  it("re-saving writes every value back as Python wrote it", function()
    python_folder(dir .. "/py", VALUES, ORDER)
    T.load_memmap(dir .. "/py"):memmap(dir .. "/again")
    for key, text in pairs(VALUES) do
      assert.are.equal(text, data_text(dir .. "/again", (key:gsub("\\u0000", "%%00"))), key)
    end
  end)

  it("from_consolidated reads the same values as load_memmap", function()
    python_folder(dir .. "/py", VALUES, ORDER)
    local td = T.load_memmap(dir .. "/py")
    td:consolidate(dir .. "/c.td")
    local back = T.from_consolidated(dir .. "/c.td")
    check_values(back)
    assert.is_true(back:equal(td))
    back:memmap(dir .. "/from-c")
    for key, text in pairs(VALUES) do
      assert.are.equal(text, data_text(dir .. "/from-c", (key:gsub("\\u0000", "%%00"))), key)
    end
  end)
end)

describe("non-tensor values through our own memmap save and load", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("keep \\u0000 in values and keys", function()
    local td = T.TensorDict({ s = "a\0b", ["k\0"] = T.tensor({ 1, 2 }) }, {})
    td:set("n\0n", { "x\0", 1 })
    td:memmap(dir .. "/m")
    local back = T.load_memmap(dir .. "/m")
    assert.are.equal("a\0b", back:get("s"))
    assert.are.same({ 1, 2 }, back:get("k\0"):totable())
    assert.are.same({ "x\0", 1 }, back:get("n\0n"))
    assert.is_nil(back:get("k", nil))
    assert.is_true(back:equal(td))
  end)

  it("keep 0.1 + 0.2 and 2^53 exactly", function()
    local td = T.TensorDict({ sum = 0.1 + 0.2, p53 = 2 ^ 53, third = 1 / 3 }, {})
    td:memmap(dir .. "/m")
    local back = T.load_memmap(dir .. "/m")
    assert.are.equal(0.30000000000000004, back:get("sum"))
    assert.are.equal(9007199254740992, back:get("p53"))
    assert.are.equal(1 / 3, back:get("third"))
    assert.are.equal("0.30000000000000004", data_text(dir .. "/m", "sum"))
    assert.are.equal("9007199254740992", data_text(dir .. "/m", "p53"))
  end)

  it("td:equal holds after a round trip of a value without a short decimal form", function()
    local td = T.TensorDict({ x = T.zeros(2) }, { 2 })
    td:set("n", 1 / 3)
    td:set("l", { 1 / 3, 2 / 3, { z = 0.1 + 0.2 } })
    td:memmap(dir .. "/m")
    local back = T.load_memmap(dir .. "/m")
    assert.is_true(td:equal(back))
    assert.is_true(back:equal(td))
    td:consolidate(dir .. "/c.td")
    assert.is_true(td:equal(T.from_consolidated(dir .. "/c.td")))
  end)

  it("td:equal compares values: 3.0 written by Python equals 3, not 3.5", function()
    python_folder(dir .. "/py", { f = "3.0", o = '{"b": 1, "a": [2.0]}' }, { "f", "o" })
    local back = T.load_memmap(dir .. "/py")
    local function td_of(f, b) -- o is an object value (json.object_mt), not a nested container
      return T.TensorDict({ f = f, o = setmetatable({ a = { 2 }, b = b }, json.object_mt) }, {})
    end
    assert.is_true(back:equal(td_of(3, 1)))
    assert.is_false(back:equal(td_of(3.5, 1)))
    assert.is_false(back:equal(td_of(3, 2)))
  end)
end)

describe("non-tensor values across Python tensordict", function()
  local py = os.getenv("TD_PYTHON") or "python3"
  local has_python = sh(py .. " -c 'import tensordict' >/dev/null 2>&1")
  if not has_python then
    pending("python tensordict not installed: values are not cross-checked")
    return
  end
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  local function python(script)
    H.write(dir .. "/script.py", script)
    local p = io.popen(("%s '%s/script.py' '%s' 2>&1"):format(py, dir, dir))
    local out = p:read("*a")
    p:close()
    return out
  end

  local WRITE = [[
import sys, torch
from tensordict import TensorDict, NonTensorData as N
d = sys.argv[1]
td = TensorDict({"nan": N(float("nan")), "inf": N(float("inf")), "ninf": N(float("-inf")),
                 "big": N(10**30), "float": N(3.0), "sum": N(0.1 + 0.2), "p53": N(2**53 + 1),
                 "nul": N("a\0b"), "k\0ey": N("v"), "list": N([1.0, float("nan"), {"x": -0.0}]),
                 "t\0": torch.arange(3)}, [])
td.memmap(d + "/py")
td.consolidate(filename=d + "/py.td")
print("ok")
]]

  it("a folder and a consolidated file Python wrote load here exactly", function()
    assert.are.equal("ok\n", python(WRITE))
    for _, td in ipairs({ T.load_memmap(dir .. "/py"), T.from_consolidated(dir .. "/py.td") }) do
      check_values(td)
      assert.are.same({ 0, 1, 2 }, td:get("t\0"):totable())
    end
  end)

  it("re-saved here, Python reads back every value exactly", function()
    assert.are.equal("ok\n", python(WRITE))
    T.load_memmap(dir .. "/py"):memmap(dir .. "/lua")
    T.from_consolidated(dir .. "/py.td"):consolidate(dir .. "/lua.td")
    local out = python([[
import sys, math
from tensordict import TensorDict
d = sys.argv[1]
for td in (TensorDict.load_memmap(d + "/lua"), TensorDict.from_consolidated(d + "/lua.td")):
    assert math.isnan(td["nan"]) and td["inf"] == math.inf and td["ninf"] == -math.inf
    assert type(td["big"]) is int and td["big"] == 10**30
    assert type(td["float"]) is float and td["float"] == 3.0
    assert td["sum"] == 0.1 + 0.2 and td["p53"] == 2**53 + 1 and type(td["p53"]) is int
    assert td["nul"] == "a\0b" and td["k\0ey"] == "v"
    l = td["list"]
    assert l[0] == 1.0 and type(l[0]) is float and math.isnan(l[1])
    assert math.copysign(1, l[2]["x"]) == -1
    assert td["t\0"].tolist() == [0, 1, 2]
print("ok")
]])
    assert.are.equal("ok\n", out)
  end)
end)
