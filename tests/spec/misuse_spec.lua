-- A few thousand random calls with hostile arguments (tests/fuzz/misuse.lua; make fuzz
-- runs 100,000): every outcome is a result or a "tensordict: " error.
package.path = "tests/fuzz/?.lua;" .. package.path
local misuse = require("misuse")

describe("misuse", function()
  it("random calls with wrong arguments give results or tensordict errors only", function()
    local report = misuse.run({ calls = 4000, seed = 7 })
    assert.are.equal(4000, report.calls)
    assert.are.equal(4000, report.ok + report.errors)
    assert.is_true(report.ok > 400, "too few calls succeeded: the pool is off")
    assert.are.same({}, report.findings)
  end)

  it("the sites the issue named raise tensordict errors", function()
    local T = require("tensordict")
    local H = require("helpers")
    local td = T.TensorDict({ a = T.ones(2, 3) }, { 2 })
    H.raises(function() T.pad(nil, { 1, 1 }) end, "pad: expected a tensor, got nil")
    H.raises(function() T.pad({}, { 1, 1 }) end, "pad: expected a tensor")
    H.raises(function() T.pad(td, { 1, 1 }, td) end, "pad: value must be a number")
    H.raises(function() T.zeros(3):permute() end, "permute: expected the new order of the dims")
    H.raises(function() td:permute() end, "permute: expected the new order of the batch dims")
    H.raises(function() td:refine_names() end, "refine_names: expected names")
    H.raises(function() return T.zeros(3) + require("ffi").new("int[3]") end, "tensordict: ")
    H.raises(function() T.arange(nil, 3) end, "tensordict: arange")
    H.raises(function() T.pad_sequence({ td, td }, 1) end, "tensordict: ")
  end)
end)
