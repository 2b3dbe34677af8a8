-- The JSON codec that keeps TensorDict's non-tensor leaves: exact texts, exact values,
-- and the exact message of every error.
local J = require("tensordict.json")
local ffi = require("ffi")
local H = require("helpers")

local huge = math.huge

local function obj(t) return setmetatable(t, J.object_mt) end

-- assert.same ignores metatables; this also checks that objects and arrays match in kind.
local function same_kinds(expected, actual, where)
  if type(expected) ~= "table" then return end
  assert.are.equal(getmetatable(expected), getmetatable(actual), "metatable at " .. where)
  for k, v in pairs(expected) do same_kinds(v, actual[k], where .. "/" .. tostring(k)) end
end

local function assert_decodes(text, expected)
  local got = J.decode(text)
  assert.are.same(expected, got)
  same_kinds(expected, got, "")
end

local function nested(depth)
  local root = {}
  local t = root
  for _ = 2, depth do
    t[1] = {}
    t = t[1]
  end
  return root
end

describe("json.encode", function()
  it("writes scalars", function()
    assert.are.equal('"abc"', J.encode("abc"))
    assert.are.equal('""', J.encode(""))
    assert.are.equal("true", J.encode(true))
    assert.are.equal("false", J.encode(false))
    assert.are.equal("null", J.encode(J.null))
    assert.are.equal("null", J.encode(nil))
  end)

  it("writes integers without a decimal point up to 2^53", function()
    assert.are.equal("3", J.encode(3))
    assert.are.equal("0", J.encode(0))
    assert.are.equal("-0", J.encode(-0.0))
    assert.are.equal("-42", J.encode(-42))
    assert.are.equal("100", J.encode(100.0))
    assert.are.equal("9007199254740992", J.encode(2 ^ 53))
    assert.are.equal("-9007199254740992", J.encode(-2 ^ 53))
  end)

  it("writes other numbers in the fewest digits that read back exactly", function()
    assert.are.equal("-0.5", J.encode(-0.5))
    assert.are.equal("0.1", J.encode(0.1))
    assert.are.equal("123.456", J.encode(123.456))
    assert.are.equal("1e+300", J.encode(1e300))
    assert.are.equal("1e-05", J.encode(1e-5))
    assert.are.equal("0.3333333333333333", J.encode(1 / 3))
    assert.are.equal("0.30000000000000004", J.encode(0.1 + 0.2))
    assert.are.equal("9007199254740994", J.encode(2 ^ 53 + 2))
    assert.are.equal("1.7976931348623157e+308", J.encode(1.7976931348623157e308))
  end)

  it("round-trips random doubles bit for bit", function()
    math.randomseed(42)
    for _ = 1, 2000 do
      local x = (math.random() - 0.5) * 10 ^ math.random(-300, 300)
      local back = J.decode(J.encode(x))
      assert.are.equal(x, back)
    end
  end)

  it("escapes quotes, backslashes and control characters, and nothing else", function()
    assert.are.equal([["a\"b\\c"]], J.encode('a"b\\c'))
    assert.are.equal([["\n\t\r\b\f"]], J.encode("\n\t\r\b\f"))
    assert.are.equal([["\u0000\u0001\u001f"]], J.encode("\0\1\31"))
    assert.are.equal('"/ \127 ~"', J.encode("/ \127 ~"))
    assert.are.equal('"héllo ☃ 😀"', J.encode("héllo ☃ 😀"))
    assert.are.equal([["\"x\\"]], J.encode('"x\\'))
    assert.are.equal([["a\\b"]], J.encode("a\\b"))
    assert.are.equal('"' .. string.rep("ab", 50000) .. '\\n"', J.encode(string.rep("ab", 50000) .. "\n"))
  end)

  it("writes arrays and objects compactly, object keys sorted", function()
    assert.are.equal("[1,2,[3,[]]]", J.encode({ 1, 2, { 3, {} } }))
    assert.are.equal('{"a":{"c":true},"b":1,"é":"x"}', J.encode({ b = 1, ["é"] = "x", a = { c = true } }))
    assert.are.equal('[null,1,{"k":null}]', J.encode({ J.null, 1, { k = J.null } }))
    assert.are.equal('{"1":"one","10":"ten","2":"two"}', J.encode({ ["10"] = "ten", ["2"] = "two", ["1"] = "one" }))
    assert.are.equal('{"a b":1,"q\\"":2}', J.encode({ ["a b"] = 1, ['q"'] = 2 }))
  end)

  it("writes an empty table as [] unless it carries object_mt", function()
    assert.are.equal("[]", J.encode({}))
    assert.are.equal("{}", J.encode(obj({})))
    assert.are.equal('{"a":[],"b":{}}', J.encode({ a = {}, b = obj({}) }))
  end)

  it("encodes a table shared by two branches twice", function()
    local shared = { 1 }
    assert.are.equal('{"a":[1],"b":[1]}', J.encode({ a = shared, b = shared }))
  end)

  it("names the value it cannot encode and its path", function()
    assert.has_error(function() J.encode({ a = { 1, print } }) end, "json: cannot encode a function at .a[2]")
    assert.has_error(function() J.encode(print) end, "json: cannot encode a function at .")
    assert.has_error(function() J.encode({ ["a b"] = { io.stdout } }) end,
      'json: cannot encode a userdata at ["a b"][1]')
    assert.has_error(function() J.encode({ x = { y = ffi.new("int", 1) } }) end, "json: cannot encode a cdata at .x.y")
    assert.has_error(function() J.encode({ coroutine.create(print) }) end, "json: cannot encode a thread at [1]")
  end)

  it("refuses NaN and infinities", function()
    assert.has_error(function() J.encode({ x = 0 / 0 }) end, "json: cannot encode NaN at .x")
    assert.has_error(function() J.encode({ 1, huge }) end, "json: cannot encode inf at [2]")
    assert.has_error(function() J.encode(-huge) end, "json: cannot encode -inf at .")
  end)

  it("refuses tables that are neither arrays nor objects", function()
    assert.has_error(function() J.encode({ 1, a = 2 }) end,
      "json: cannot encode a table with mixed or non-string keys at .")
    assert.has_error(function() J.encode({ k = { [true] = 1 } }) end,
      "json: cannot encode a table with mixed or non-string keys at .k")
    assert.has_error(function() J.encode({ [1.5] = 1 }) end,
      "json: cannot encode a table with mixed or non-string keys at .")
    assert.has_error(function() J.encode({ [0] = 1 }) end,
      "json: cannot encode a table with mixed or non-string keys at .")
    assert.has_error(function() J.encode({ { 1, nil, 3 } }) end,
      "json: cannot encode a sparse array (integer keys not 1..n) at [1]")
  end)

  it("refuses cycles", function()
    local t = { a = {} }
    t.a.back = t
    assert.has_error(function() J.encode(t) end, "json: cannot encode a circular reference at .a.back")
    local u = {}
    u[1] = u
    assert.has_error(function() J.encode(u) end, "json: cannot encode a circular reference at [1]")
  end)

  it("encodes 1000 levels of nesting and refuses 1001", function()
    assert.are.equal(string.rep("[", 1000) .. string.rep("]", 1000), J.encode(nested(1000)))
    assert.has_error(function() J.encode(nested(1001)) end,
      "json: nesting deeper than 1000 levels at " .. string.rep("[1]", 1000))
  end)

  it("starts clean after an error", function()
    local shared = {}
    assert.has_error(function() J.encode({ shared, print }) end, "json: cannot encode a function at [2]")
    assert.are.equal("[[],[]]", J.encode({ shared, shared }))
  end)
end)

describe("json.decode", function()
  it("reads scalars", function()
    assert.are.equal("abc", J.decode('"abc"'))
    assert.are.equal(true, J.decode("true"))
    assert.are.equal(false, J.decode("false"))
    assert.are.equal(J.null, J.decode("null"))
  end)

  it("reads numbers", function()
    assert.are.equal(3, J.decode("3"))
    assert.are.equal(-0.5, J.decode("-0.5"))
    assert.are.equal(1e300, J.decode("1e300"))
    assert.are.equal(100, J.decode("1E+2"))
    assert.are.equal(0.015, J.decode("1.5e-2"))
    assert.are.equal(0.1, J.decode("0.1"))
    assert.are.equal(2 ^ 53, J.decode("9007199254740992"))
    assert.are.equal(-huge, 1 / J.decode("-0"))
    assert.are.equal(huge, J.decode("1e400"))
  end)

  it("reads Python's NaN, Infinity and -Infinity", function()
    local t = J.decode("[NaN,Infinity,-Infinity]")
    assert.are.equal(3, #t)
    assert.is_true(t[1] ~= t[1])
    assert.are.equal(huge, t[2])
    assert.are.equal(-huge, t[3])
    assert.are.equal(-huge, J.decode("-Infinity"))
  end)

  it("reads every escape", function()
    assert.are.equal('"\\/\b\f\n\r\t', J.decode([["\"\\\/\b\f\n\r\t"]]))
    assert.are.equal("a\0b", J.decode([["a\u0000b"]]))
    assert.are.equal("é€", J.decode([["\u00e9\u20AC"]]))
    assert.are.equal("\xF0\x9F\x98\x80", J.decode([["\ud83d\ude00"]]))
    assert.are.equal("x😀y", J.decode([["x\uD83D\uDE00y"]]))
    assert.are.equal("\xEF\xBF\xBF", J.decode([["\uffff"]]))
    assert.are.equal("\xDF\xBF", J.decode([["\u07ff"]]))
  end)

  it("reads long strings, escaped quotes and neighbouring strings", function()
    local plain = string.rep("plain text ", 100000)
    assert.are.equal(plain, J.decode('"' .. plain .. '"'))
    assert.are.equal(string.rep('a"b\\', 10000), J.decode('"' .. string.rep('a\\"b\\\\', 10000) .. '"'))
    assert_decodes('["a\\"b","c",{"d\\\\":"\\"e"},"\\n"]', { 'a"b', "c", obj({ ["d\\"] = '"e' }), "\n" })
    local long = string.rep("x\n\"\\", 5000)
    assert.are.equal(long, J.decode(J.encode(long)))
  end)

  it("passes UTF-8 through", function()
    assert.are.equal("héllo ☃", J.decode('"héllo ☃"'))
  end)

  it("reads arrays as plain tables and objects as tables with object_mt", function()
    assert_decodes('{"a":[1,2,{"b":null}],"c":{},"d":[],"e":"x"}',
      obj({ a = { 1, 2, obj({ b = J.null }) }, c = obj({}), d = {}, e = "x" }))
    assert_decodes("[[],[[]],{}]", { {}, { {} }, obj({}) })
    assert_decodes('{"a":1,"a":2}', obj({ a = 2 }))
  end)

  it("allows whitespace wherever the grammar does", function()
    assert_decodes(' \t\n\r{ "a" : [ 1 , 2 ] ,\n"b" : { } } \n', obj({ a = { 1, 2 }, b = obj({}) }))
    assert_decodes(" [ ] ", {})
  end)

  it("round-trips texts it writes", function()
    for _, text in ipairs({
      '{"a":[],"b":{},"c":[{"d":null}]}',
      '[1,-0.5,1e+300,0.1,9007199254740992,true,false,null]',
      '{"k":"\\"\\\\\\n\\u0001\\u001f","u":"é😀"}',
      '[[[[]]],{"x":{"y":{"z":[1]}}}]',
    }) do
      assert.are.equal(text, J.encode(J.decode(text)))
    end
  end)

  it("round-trips Lua values", function()
    local v = obj({ name = "iris", dims = { 150, 4 }, scale = -0.25, tags = obj({}), none = J.null,
      nested = { obj({ ok = true }), obj({ ok = false }) } })
    assert_decodes(J.encode(v), v)
  end)

  it("reads 1000 levels of nesting and refuses 1001", function()
    assert_decodes(string.rep("[", 1000) .. string.rep("]", 1000), nested(1000))
    assert.has_error(function() J.decode(string.rep("[", 1001) .. string.rep("]", 1001)) end,
      "json: nesting deeper than 1000 levels at byte 1001")
    assert.has_error(function() J.decode(string.rep('{"a":', 1001)) end,
      "json: nesting deeper than 1000 levels at byte 5001")
  end)

  it("names the problem and the byte", function()
    local cases = {
      { "", "unexpected end of input at byte 1" },
      { "   ", "unexpected end of input at byte 4" },
      { "[1,2", "unexpected end of input at byte 5" },
      { '{"a":', "unexpected end of input at byte 6" },
      { "[1 2]", "expected ',' or ']' but found '2' at byte 4" },
      { '{"a" 1}', "expected ':' but found '1' at byte 6" },
      { '{"a":1 "b":2}', "expected ',' or '}' but found '\"' at byte 8" },
      { '{"a":1,}', "expected a string key but found '}' at byte 8" },
      { "{1:2}", "expected a string key but found '1' at byte 2" },
      { "[1,]", "expected a value but found ']' at byte 4" },
      { ".5", "expected a value but found '.' at byte 1" },
      { "+1", "expected a value but found '+' at byte 1" },
      { "tru", "expected a value but found 't' at byte 1" },
      { "nan", "expected a value but found 'n' at byte 1" },
      { "[undefined]", "expected a value but found 'u' at byte 2" },
      { "\xEF\xBB\xBF1", "expected a value but found byte 0xef at byte 1" },
      { "1 2", "trailing garbage at byte 3" },
      { "truex", "trailing garbage at byte 5" },
      { "{} []", "trailing garbage at byte 4" },
      { '"abc', "unterminated string at byte 1" },
      { '["a\\', "unterminated string at byte 2" },
      { '"a\\"', "unterminated string at byte 1" },
      { '"\\x"', "invalid escape '\\x' at byte 2" },
      { '"ab\\\1"', "invalid escape at byte 4" },
      { '"\\u12"', "invalid \\u escape at byte 2" },
      { '"\\u12g4"', "invalid \\u escape at byte 2" },
      { '"\\ud800"', "unpaired surrogate at byte 2" },
      { '"\\ud800\\u0041"', "unpaired surrogate at byte 2" },
      { '"x\\udc00\\ud800"', "unpaired surrogate at byte 3" },
      { '"a\nb"', "control character in string at byte 3" },
      { '"a\\n\0"', "control character in string at byte 5" },
      { "01", "leading zero in number at byte 1" },
      { "[-012]", "leading zero in number at byte 2" },
      { "1.", "invalid number at byte 1" },
      { "1.e5", "invalid number at byte 1" },
      { "[1e]", "invalid number at byte 2" },
      { "1e+", "invalid number at byte 1" },
      { "-", "invalid number at byte 1" },
      { "-Inf", "invalid number at byte 1" },
    }
    for _, case in ipairs(cases) do
      assert.has_error(function() J.decode(case[1]) end, "json: " .. case[2])
    end
  end)

  it("refuses what is not a string", function()
    assert.has_error(function() J.decode(5) end, "json: decode expects a string, got number")
    assert.has_error(function() J.decode(nil) end, "json: decode expects a string, got nil")
  end)
end)

describe("json.read (texts people write: recipes)", function()
  it("reads what decode reads, with line and column in its messages", function()
    assert.are.same({ a = 1 }, (J.read('{"a": 1}', "r.json")))
    H.raises(function() J.read('{"a":\n 1,, 2}', "r.json") end,
      "tensordict: r.json: line 2, column 4: invalid JSON near ', 2}'")
  end)

  it("refuses raw invalid UTF-8 in strings and keys at its line and column (issue 28)", function()
    local cases = {
      { '{"path": "out/a\255b"}', "line 1, column 16: invalid UTF-8 in a string (byte 0xff)" },
      { '{\n  "k\192\175": 1}', "line 2, column 5: invalid UTF-8 in a string (byte 0xc0)" }, -- overlong '/'
      { '["ok", "\237\160\128"]', "line 1, column 9: invalid UTF-8 in a string (byte 0xed)" }, -- a surrogate
      { '["\244\144\128\128"]', "line 1, column 3: invalid UTF-8 in a string (byte 0xf4)" }, -- past U+10FFFF
      { '["\226\130"]', "line 1, column 3: invalid UTF-8 in a string (byte 0xe2)" }, -- cut short
      { '["a\\n\128"]', "line 1, column 6: invalid UTF-8 in a string (byte 0x80)" }, -- after an escape
    }
    for _, case in ipairs(cases) do
      H.raises(function() J.read(case[1], "r.json") end, "tensordict: r.json: " .. case[2])
    end
    -- well-formed UTF-8, raw or escaped, passes; decode (values in memmap folders) keeps any byte
    assert.are.same({ "h\195\169llo \226\152\131", "\240\159\152\128", "\195\169" },
      (J.read('["h\195\169llo \226\152\131", "\240\159\152\128", "\\u00e9"]', "r.json")))
    assert.are.equal("a\255b", J.decode('"a\255b"'))
  end)
end)

describe("json.null", function()
  it("prints as json.null and refuses writes", function()
    assert.are.equal("json.null", tostring(J.null))
    assert.has_error(function() J.null.x = 1 end, "json: json.null is read-only")
    assert.is_nil(next(J.null))
  end)

  it("is what null decodes to, in arrays and objects", function()
    local t = J.decode('[null,{"a":null}]')
    assert.are.equal(J.null, t[1])
    assert.are.equal(J.null, t[2].a)
  end)
end)

describe("json.is_array", function()
  it("is true for keys exactly 1..n, n >= 1", function()
    assert.is_true(J.is_array({ 1 }))
    assert.is_true(J.is_array({ "a", "b", J.null }))
    assert.is_true(J.is_array({ [2] = "b", [1] = "a" }))
  end)

  it("is false for everything else", function()
    assert.is_false(J.is_array({}))
    assert.is_false(J.is_array(obj({})))
    assert.is_false(J.is_array({ a = 1 }))
    assert.is_false(J.is_array({ 1, nil, 3 }))
    assert.is_false(J.is_array({ [0] = 1 }))
    assert.is_false(J.is_array({ 1, x = 2 }))
    assert.is_false(J.is_array({ [1.5] = 1 }))
    assert.is_false(J.is_array(J.null))
    assert.is_false(J.is_array("abc"))
    assert.is_false(J.is_array(nil))
  end)
end)

describe("json.read's integers a double cannot hold", function()
  it("are listed with their path, literal and value", function()
    local v, dups, inexact = J.read('{"a": [1, 9007199254740993], "b": 18446744073709551616, '
      .. '"c": 9007199254740992, "d": -9007199254740993, "e": 1e30, "f": 123456789012345678.5}')
    assert.are.equal(18446744073709551616, v.b)
    assert.are.same({}, dups)
    assert.are.same({ { path = "a[2]", literal = "9007199254740993", value = 2 ^ 53 },
      { path = "d", literal = "-9007199254740993", value = -2 ^ 53 } }, inexact)
    assert.are.equal("a[2]: 9007199254740993 is an integer that a double cannot hold exactly (it would be read "
      .. "as 9007199254740992); integers are exact up to 2^53 = 9007199254740992", J.inexact_text(inexact[1]))
    local _, _, alone = J.read("36028797018963969")
    assert.are.same({ { path = "", literal = "36028797018963969", value = 2 ^ 55 } }, alone)
    assert.are.equal(3, J.decode("3")) -- decode keeps its one result
  end)
end)
