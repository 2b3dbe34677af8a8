local T = require("tensordict")

describe("tostring", function()
  it("prints a matrix with aligned columns, then shape and dtype", function()
    assert.are.equal(
      "tensor([[ 1.5000,  2.0000],\n" ..
      "        [-3.0000,  4.2500]], shape=[2, 2], dtype=float32)",
      tostring(T.tensor({ { 1.5, 2 }, { -3, 4.25 } })))
  end)

  it("prints integral floats with a trailing dot and integers plainly", function()
    assert.are.equal("tensor([1., 2., 3.], shape=[3], dtype=float32)", tostring(T.tensor({ 1, 2, 3 })))
    assert.are.equal("tensor([ 1, 10], shape=[2], dtype=int64)", tostring(T.tensor({ 1, 10 }, "int64")))
    assert.are.equal("tensor([ true, false], shape=[2], dtype=bool)", tostring(T.tensor({ true, false })))
  end)

  it("switches to scientific notation for wide ranges and shows nan and inf", function()
    assert.are.equal("tensor([[1.0000e-05, 1.0000e+00]], shape=[1, 2], dtype=float64)",
      tostring(T.tensor({ { 1e-5, 1 } }, "float64")))
    assert.are.equal("tensor([ 1.0000, -2.5000,     nan,     inf], shape=[4], dtype=float32)",
      tostring(T.tensor({ 1, -2.5, 0 / 0, 1 / 0 })))
  end)

  it("prints scalars and empty tensors", function()
    assert.are.equal("tensor(7, shape=[], dtype=int32)", tostring(T.tensor(7, "int32")))
    assert.are.equal("tensor([], shape=[0, 3], dtype=float32)", tostring(T.zeros(0, 3)))
  end)

  it("wraps long rows at 80 columns", function()
    assert.are.equal(
      "tensor([[ 1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n" ..
      "         18, 19, 20]], shape=[1, 20], dtype=int64)",
      tostring(T.arange(20):view(1, 20)))
  end)

  it("summarises large tensors with the first and last 3 per dim", function()
    assert.are.equal(
      "tensor([[   1.,    2.,    3., ...,   48.,   49.,   50.],\n" ..
      "        [  51.,   52.,   53., ...,   98.,   99.,  100.],\n" ..
      "        [ 101.,  102.,  103., ...,  148.,  149.,  150.],\n" ..
      "        ...,\n" ..
      "        [1851., 1852., 1853., ..., 1898., 1899., 1900.],\n" ..
      "        [1901., 1902., 1903., ..., 1948., 1949., 1950.],\n" ..
      "        [1951., 1952., 1953., ..., 1998., 1999., 2000.]], shape=[40, 50], dtype=float32)",
      tostring(T.arange(1, 2000, "float32"):view(40, 50)))
  end)

  it("separates 3-D blocks by a blank line and prints views as their values", function()
    local c = T.arange(8):view(2, 2, 2):transpose(1, 3)
    assert.are.equal(
      "tensor([[[1, 5],\n" ..
      "         [3, 7]],\n" ..
      "\n" ..
      "        [[2, 6],\n" ..
      "         [4, 8]]], shape=[2, 2, 2], dtype=int64)", tostring(c))
  end)
end)

describe("int64 printing", function()
  it("prints values beyond 2^53 exactly (int64 max was shown as -2^63)", function()
    assert.are.equal("tensor([9223372036854775807], shape=[1], dtype=int64)",
      tostring(T.tensor({ -2 ^ 63 }, "int64") - 1))
    assert.are.equal("tensor(-9223372036854775808, shape=[], dtype=int64)",
      tostring(T.full({}, -2 ^ 63, "int64")))
    assert.are.equal("tensor([[1, 3],\n        [2, 4]], shape=[2, 2], dtype=int64)",
      tostring(T.arange(1, 4):view(2, 2):t()))
  end)
end)
