-- tensor_forms_spec.lua: the rest of torch's everyday functions that issue 30 adds, in
-- Lua's 1-based manners: diagonal, diag, trace, kron, cross, tensor_split, baddbmm,
-- masked_scatter, scatter_add and scatter_reduce, cummax, cummin, logcumsumexp, einsum,
-- and the sampling functions bernoulli, normal, multinomial. Values, shapes, dtypes,
-- views sharing memory, and the errors; torch_api_spec.lua cross-checks them with torch.
local T = require("tensordict")
local H = require("helpers")

local nan, inf = 0 / 0, 1 / 0

local function dims(t)
  local out = {}
  for i = 1, t:dim() do out[i] = t:size(i) end
  return out
end

-- totable with NaN as the string "nan" (tables with NaN do not compare equal).
local function vals(t)
  local function walk(x)
    if type(x) ~= "table" then return x ~= x and "nan" or x end
    local o = {}
    for i, v in ipairs(x) do o[i] = walk(v) end
    return o
  end
  return walk(t:totable())
end

local function grid() return T.arange(1, 9, "float32"):view(3, 3) end

describe("diagonals", function()
  it("diagonal(offset, dim1, dim2) is a view; offsets past the matrix give an empty one", function()
    local a = grid()
    assert.are.same({ 1, 5, 9 }, a:diagonal():totable())
    assert.are.same({ 2, 6 }, a:diagonal(1):totable())
    assert.are.same({ 7 }, a:diagonal(-2):totable())
    assert.are.same({ 0 }, dims(a:diagonal(3)))
    assert.are.same({ 0 }, dims(a:diagonal(-4)))
    a:diagonal():fill_(0)
    assert.are.same({ { 0, 2, 3 }, { 4, 0, 6 }, { 7, 8, 0 } }, a:totable()) -- writes reach the source
    local g = T.arange(1, 24):view(2, 3, 4)
    local d = g:diagonal(0, 2, 3) -- the other dims first, the diagonal last
    assert.are.same({ 2, 3 }, dims(d))
    assert.are.same({ { 1, 6, 11 }, { 13, 18, 23 } }, d:totable())
    assert.are.same({ { 1, 14 }, { 5, 18 }, { 9, 22 } }, g:diagonal(0, 1, 3):totable())
    assert.are.same({ { 2, 7, 12 }, { 14, 19, 24 } }, g:diagonal(1, -2, -1):totable())
    assert.are.same({ { 1, 6, 11 }, { 13, 18, 23 } }, g:transpose(2, 3):diagonal(0, 3, 2):totable())
    H.raises(function() T.zeros(3):diagonal() end, "diagonal: expected a tensor of at least 2 dims, got 1")
    H.raises(function() g:diagonal(0, 2, -2) end, "diagonal: dim1 and dim2 must be different dims, both are 2")
    H.raises(function() g:diagonal(0.5) end, "diagonal: offset must be an integer, got 0.5")
    H.raises(function() g:diagonal(0, 1, 4) end, "diagonal")
  end)

  it("diag: a vector onto a diagonal of a square matrix, a matrix's diagonal as a copy", function()
    local v = T.tensor({ 1, 2 }, "int32")
    assert.are.same({ { 1, 0 }, { 0, 2 } }, v:diag():totable())
    assert.are.equal("int32", v:diag():dtype())
    assert.are.same({ { 0, 1, 0 }, { 0, 0, 2 }, { 0, 0, 0 } }, T.diag(v, 1):totable())
    assert.are.same({ { 0, 0, 0 }, { 1, 0, 0 }, { 0, 2, 0 } }, v:diag(-1):totable())
    local a = grid()
    local d = a:diag(1)
    assert.are.same({ 2, 6 }, d:totable())
    d:fill_(0)
    assert.are.equal(2, a[1][2]) -- a copy
    assert.are.same({ 0, 0 }, dims(T.zeros(0):diag()))
    H.raises(function() T.zeros(2, 2, 2):diag() end, "diag: expected a 1-D or 2-D tensor, got 3 dims")
    H.raises(function() v:diag("x") end, "diag: diagonal must be an integer, got 'x'")
  end)

  it("trace: the main diagonal's sum as a number (as sum gives), matrices only", function()
    assert.are.equal(15, grid():trace())
    assert.are.equal(4, T.arange(0, 5):view(2, 3):trace())
    assert.are.equal(0, T.zeros(0, 3):trace())
    H.raises(function() T.zeros(3):trace() end, "trace: expected a matrix (2 dims), got 1 dims")
    H.raises(function() T.ones(2, 2, "bool"):trace() end, "trace: not supported for bool tensors")
  end)
end)

describe("products", function()
  it("kron: the Kronecker product, fewer dims padded with leading ones", function()
    local k = T.kron(T.tensor({ { 1, 2 }, { 3, 4 } }, "int64"), T.tensor({ { 0, 1 }, { 1, 0 } }, "int64"))
    assert.are.same({ { 0, 1, 0, 2 }, { 1, 0, 2, 0 }, { 0, 3, 0, 4 }, { 3, 0, 4, 0 } }, k:totable())
    assert.are.equal("int64", k:dtype())
    assert.are.same({ 2, 6 }, dims(T.tensor({ 1, 2, 3 }):kron(T.ones(2, 2))))
    assert.are.same({ { 1, 1, 2, 2, 3, 3 }, { 1, 1, 2, 2, 3, 3 } }, T.tensor({ 1, 2, 3 }):kron(T.ones(2, 2)):totable())
    assert.are.equal("float32", T.tensor({ 1 }, "int32"):kron(T.ones(1)):dtype())
    H.raises(function() T.ones(2):kron(3) end, "kron: other must be a tensor, got 3")
  end)

  it("cross: 3-vectors along dim (default: the first of size 3), broadcast", function()
    local x = T.tensor({ { 1, 0, 0 }, { 0, 1, 0 } })
    local y = T.tensor({ { 0, 1, 0 }, { 0, 0, 1 } })
    assert.are.same({ { 0, 0, 1 }, { 1, 0, 0 } }, x:cross(y, 2):totable())
    assert.are.same({ { 0, 0, 1 }, { 1, 0, 0 } }, T.cross(x, y):totable())
    assert.are.same({ { 0, 0, 1 }, { 0, 0, 0 } }, x:cross(T.tensor({ { 0, 1, 0 } }), -1):totable())
    local a = T.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }) -- vectors along dim 1
    assert.are.same({ { -12, -16 }, { 24, 32 }, { -12, -16 } }, a:cross(a:flip({ 1 })):totable())
    H.raises(function() x:cross(y, 1) end, "cross: dim 1 must have size 3, got 2")
    H.raises(function() T.ones(2, 2):cross(T.ones(2, 2)) end, "cross: no dim of size 3 in the broadcast shape [2, 2]")
    H.raises(function() x:cross(T.ones(3)) end, "cross: self and other must have the same number of dims, got 2 and 1")
    H.raises(function() x:cross(T.ones(3, 3)) end,
      "cross: the shapes of self and other do not broadcast at dim 1 (2 and 3)")
  end)

  it("baddbmm: beta * self + alpha * the batched product", function()
    local r = T.ones(2, 2, 2):baddbmm(T.ones(2, 2, 3), T.ones(2, 3, 2), { beta = 0.5, alpha = 2 })
    assert.are.same({ 2, 2, 2 }, dims(r))
    assert.are.same({ { 6.5, 6.5 }, { 6.5, 6.5 } }, r[2]:totable())
    assert.are.same({ 3, 3 }, T.full({ 1 }, nan):baddbmm(T.ones(1, 1, 3), T.ones(1, 3, 2),
      { beta = 0 })[1][1]:totable())
    H.raises(function() T.ones(2, 2):baddbmm(T.ones(2, 2), T.ones(2, 2)) end,
      "baddbmm: batch1 and batch2 must have 3 dims, got 2 and 2")
    H.raises(function() T.ones(2):baddbmm(T.ones(1, 1, 1), 1) end, "baddbmm: batch2 must be a tensor, got 1")
  end)
end)

describe("tensor_split", function()
  it("splits into sections of sizes differing by one, first ones larger", function()
    local t = T.arange(0, 6)
    local p = t:tensor_split(3)
    assert.are.same({ { 0, 1, 2 }, { 3, 4 }, { 5, 6 } }, { p[1]:totable(), p[2]:totable(), p[3]:totable() })
    p = T.arange(1, 2):tensor_split(4)
    assert.are.same({ 1, 1, 0, 0 }, { p[1]:numel(), p[2]:numel(), p[3]:numel(), p[4]:numel() })
    p[1]:fill_(9) -- views
    local g = T.arange(1, 12):view(3, 4)
    local q = g:tensor_split(2, 2)
    assert.are.same({ { 1, 2 }, { 5, 6 }, { 9, 10 } }, q[1]:totable())
    q[2]:fill_(0)
    assert.are.same({ 1, 2, 0, 0 }, g[1]:totable())
  end)

  it("splits at 1-based starts (torch's 0-based indices plus one), in any order", function()
    local t = T.arange(0, 6)
    local p = t:tensor_split({ 2, 6 })
    assert.are.same({ { 0 }, { 1, 2, 3, 4 }, { 5, 6 } }, { p[1]:totable(), p[2]:totable(), p[3]:totable() })
    p = t:tensor_split({ 6, 2 })
    assert.are.same({ 5, 0, 6 }, { p[1]:numel(), p[2]:numel(), p[3]:numel() })
    p = t:tensor_split({ -2 })
    assert.are.same({ { 0, 1, 2, 3, 4 }, { 5, 6 } }, { p[1]:totable(), p[2]:totable() })
    p = t:tensor_split(T.tensor({ 9 }))
    assert.are.same({ 7, 0 }, { p[1]:numel(), p[2]:numel() })
    H.raises(function() t:tensor_split({ 0 }) end, "tensor_split: start 1 is 0; starts are 1-based integers")
    H.raises(function() t:tensor_split(0) end, "tensor_split: sections must be an integer in 1..67108864, got 0")
    H.raises(function() t:tensor_split(2 ^ 40) end, "tensor_split: sections must be an integer in 1..67108864")
    H.raises(function() t:tensor_split("x") end,
      "tensor_split: expected a number of sections or a list of 1-based starts, got 'x'")
    H.raises(function() T.tensor(1):tensor_split(1) end, "tensor_split: expected a tensor of at least 1 dim")
  end)
end)

describe("masked_scatter", function()
  it("writes source's first elements where the mask is true, in order", function()
    local m = T.tensor({ { true, false, true }, { false, true, false } })
    local z = T.zeros(2, 3)
    local r = z:masked_scatter(m, T.arange(1, 6, "float32"))
    assert.are.same({ { 1, 0, 2 }, { 0, 3, 0 } }, r:totable())
    assert.are.same({ 0, 0, 0 }, z[1]:totable()) -- out of place
    z:masked_scatter_(T.tensor({ true, false, true }), T.tensor({ { 7, 8 }, { 9, 10 } }, "float32"))
    assert.are.same({ { 7, 0, 8 }, { 9, 0, 10 } }, z:totable()) -- a mask broadcast over rows
    assert.are.same({ 0, 0 }, T.zeros(2):masked_scatter(T.zeros(2, "bool"), T.zeros(0)):totable())
    H.raises(function() z:masked_scatter_(m, T.ones(2)) end,
      "masked_scatter_: the mask selects 3 elements, source has 2")
    H.raises(function() z:masked_scatter_(T.ones(2, 3), T.ones(6)) end, "masked_scatter_: mask must be a bool tensor")
    H.raises(function() z:masked_scatter(m, 1) end, "masked_scatter_: source must be a tensor, got 1")
  end)
end)

describe("scatter_add and scatter_reduce", function()
  local x = T.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, "float32")
  local idx = T.tensor({ { 1, 2, 1 }, { 2, 2, 1 } }, "int64")
  local src = T.tensor({ { 10, 20, 30 }, { 40, 50, 60 } }, "float32")

  it("scatter_add sums every value sent to a position", function()
    assert.are.same({ { 11, 2, 93 }, { 44, 75, 6 } }, x:scatter_add(1, idx, src):totable())
    local y = x:clone()
    assert.are.equal(y, y:scatter_add_(2, idx, src))
    assert.are.same({ { 41, 22, 3 }, { 64, 95, 6 } }, y:totable())
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, x:totable())
    local counts = T.zeros(4, "int64"):scatter_add_(1, T.tensor({ 1, 4, 4, 4 }, "int64"), T.ones(4, "int64"))
    assert.are.same({ 1, 0, 0, 3 }, counts:totable())
    H.raises(function() x:scatter_add(1, idx, 2) end, "scatter_add_: src must be a tensor, got 2")
    H.raises(function() x:scatter_add(1, T.tensor({ { 3 } }, "int64"), src) end, "scatter_add_")
  end)

  it("scatter_reduce: sum, prod, mean, amax, amin, with and without self's values", function()
    local want = {
      sum = { { { 41, 22, 3 }, { 64, 95, 6 } }, { { 40, 20, 3 }, { 60, 90, 6 } } },
      prod = { { { 300, 40, 3 }, { 240, 10000, 6 } }, { { 300, 20, 3 }, { 60, 2000, 6 } } },
      amax = { { { 30, 20, 3 }, { 60, 50, 6 } }, { { 30, 20, 3 }, { 60, 50, 6 } } },
      amin = { { { 1, 2, 3 }, { 4, 5, 6 } }, { { 10, 20, 3 }, { 60, 40, 6 } } },
      mean = { { { 41 / 3, 11, 3 }, { 32, 95 / 3, 6 } }, { { 20, 20, 3 }, { 60, 45, 6 } } },
    }
    for reduce, pair in pairs(want) do
      for k, include_self in ipairs({ true, false }) do
        local got = x:scatter_reduce(2, idx, src, reduce, { include_self = include_self })
        local ok, why = H.near(pair[k], got:totable(), 1e-5)
        assert.is_true(ok, reduce .. " " .. tostring(include_self) .. ": " .. tostring(why))
      end
    end
    -- integers: mean rounds down; amax of int64 keeps every bit
    local xi = x:to("int64")
    assert.are.same({ { 13, 11, 3 }, { 32, 31, 6 } }, xi:scatter_reduce(2, idx, src:to("int64"), "mean"):totable())
    local big = T.full({ 2 }, 2 ^ 53, "int64") + T.tensor({ 1, 0 }, "int64") -- 2^53 + 1: no double holds it
    local r = T.zeros(1, "int64"):scatter_reduce(1, T.tensor({ 1, 1 }, "int64"), big, "amax", { include_self = false })
    assert.are.equal(0, (r - big:narrow(1, 1, 1)):item())
    -- NaN stays the maximum; in place returns self
    local y = T.zeros(2)
    assert.are.equal(y, y:scatter_reduce_(1, T.tensor({ 1, 1, 2 }, "int64"), T.tensor({ 1, nan, 2 }), "amax"))
    assert.are.same({ "nan", 2 }, vals(y))
    H.raises(function() x:scatter_reduce(2, idx, src, "max") end,
      "scatter_reduce_: reduce must be one of sum, prod, mean, amax, amin (torch's names), got 'max'")
    H.raises(function() x:scatter_reduce(2, idx, src, "sum", { include = true }) end, "scatter_reduce_")
    H.raises(function() x:scatter_reduce(3, idx, src, "sum") end, "scatter_reduce_")
  end)
end)

describe("running scans", function()
  it("cummax and cummin: the running extreme and its 1-based index (latest of equals; NaN stays)", function()
    local v, i = T.tensor({ 1, 3, 3, 2, nan, 5, nan }):cummax(1)
    assert.are.same({ 1, 3, 3, 3, "nan", "nan", "nan" }, vals(v))
    assert.are.same({ 1, 2, 3, 3, 5, 5, 7 }, i:totable())
    assert.are.equal("int64", i:dtype())
    v, i = T.tensor({ { 3, 1 }, { 1, 2 }, { 2, 0 } }, "int32"):cummin(1)
    assert.are.same({ { 3, 1 }, { 1, 1 }, { 1, 0 } }, v:totable())
    assert.are.same({ { 1, 1 }, { 2, 1 }, { 2, 3 } }, i:totable())
    assert.are.equal("int32", v:dtype())
    v, i = T.tensor({ true, false, true }):cummax(1)
    assert.are.same({ true, true, true }, v:totable())
    assert.are.same({ 1, 1, 3 }, i:totable())
    local big = T.full({ 2 }, 2 ^ 53, "int64") + T.tensor({ 1, 0 }, "int64")
    assert.are.same({ 1, 1 }, select(2, big:cummax(1)):totable()) -- int64 compared exactly
    local g = T.arange(1, 12):view(3, 4):t() -- non-contiguous
    assert.are.same(g:contiguous():cummax(2):totable(), g:cummax(2):totable())
    v, i = T.cummax(T.tensor({ 2, 1, 3 }), 1) -- the function form gives both results too
    assert.are.same({ { 2, 2, 3 }, { 1, 1, 3 } }, { v:totable(), i:totable() })
    v, i = T.tensor(4):cummin(1)
    assert.are.same({ 0, 0 }, { v:dim(), i:dim() })
    assert.are.same({ 0 }, dims(T.zeros(0):cummax(1)))
    H.raises(function() T.zeros(2):cummax() end, "cummax: a dim is required")
    H.raises(function() T.zeros(2):cummin(2) end, "cummin")
  end)

  it("logcumsumexp: log of the running sum of exp, without overflow", function()
    local r = T.tensor({ -inf, 1, inf, 2 }):logcumsumexp(1)
    assert.are.same({ -inf, 1, inf, inf }, r:totable())
    local big = T.tensor({ 1000, 1000 }, "float64"):logcumsumexp(1)
    assert.is_true(math.abs(big[2] - (1000 + math.log(2))) < 1e-12)
    local x = T.tensor({ { 0.5, -1, 2 }, { 3, 0, -2 } }, "float64")
    local want = x:exp():cumsum(2):log()
    assert.is_true(x:logcumsumexp(2):allclose(want, 1e-12))
    assert.are.equal("float32", T.ones(2):logcumsumexp(1):dtype())
    H.raises(function() T.ones(2, "int64"):logcumsumexp(1) end,
      "logcumsumexp: not supported for int64 tensors (it takes floating point ones)")
  end)
end)

describe("einsum", function()
  local a = T.arange(1, 6, "float64"):view(2, 3)
  local b = T.arange(1, 12, "float64"):view(3, 4)

  it("contracts, transposes, takes diagonals and sums as torch's equations say", function()
    assert.is_true(T.einsum("ij,jk->ik", a, b):equal(a:matmul(b)))
    assert.is_true(T.einsum("ij,jk", { a, b }):equal(a:matmul(b)))
    assert.is_true(T.einsum("ij->ji", a):equal(a:t()))
    assert.is_true(T.einsum("ji", a):equal(a:t())) -- implicit output: sorted letters
    assert.are.same({ 1, 6 }, T.einsum("ii->i", T.tensor({ { 1, 2 }, { 3, 6 } })):totable())
    assert.are.equal(21, T.einsum("ij->", a):item())
    assert.are.same({ 5, 7, 9 }, T.einsum("ij->j", a):totable())
    assert.are.same({ { 3, 4, 5 }, { 6, 8, 10 } }, T.einsum("i,j->ij", T.tensor({ 1, 2 }), T.tensor({ 3, 4,
      5 })):totable())
    assert.are.equal(32, T.einsum("i,i->", T.tensor({ 1, 2, 3 }), T.tensor({ 4, 5, 6 })):item())
    local x, y = T.randn(2, 3, 4, "float64"), T.randn(2, 4, 5, "float64")
    assert.is_true(T.einsum("bij,bjk->bik", x, y):allclose(x:bmm(y), 1e-12))
    assert.is_true(T.einsum("...ij,...jk", x, y):allclose(x:bmm(y), 1e-12))
    assert.is_true(T.einsum("bij,bjk->bki", x, y):allclose(x:bmm(y):transpose(2, 3), 1e-12))
    -- three operands, a label summed early, integers (no BLAS), broadcast ... dims
    local v = T.arange(1, 4, "float64")
    assert.is_true(T.einsum("ij,jk,k->i", a, b, v):allclose(a:matmul(b):matmul(v), 1e-12))
    assert.are.same({ { 14, 32 }, { 32, 77 } }, T.einsum("ij,kj->ik", T.arange(1, 6):view(2, 3),
      T.arange(1, 6):view(2, 3)):totable())
    assert.are.equal("int64", T.einsum("ij,kj->ik", T.arange(1, 6):view(2, 3), T.arange(1, 6):view(2, 3)):dtype())
    assert.are.same({ 2, 3 }, dims(T.einsum("...j,j->...", T.ones(2, 3, 4), T.ones(4))))
    assert.are.equal("float64", T.einsum("i,i->", T.ones(2), T.ones(2, "float64")):dtype())
  end)

  it("names what is wrong with an equation", function()
    H.raises(function() T.einsum("ij,jk->ik", a) end, "einsum: 2 terms for 1 operands (in 'ij,jk->ik')")
    H.raises(function() T.einsum("ijk", a) end, "einsum: the term 'ijk' has 3 labels for an operand of 2 dims")
    H.raises(function() T.einsum("ij,jk->ik", a, a) end, "einsum: 'j' has size 2 in operand 2 but 3 before")
    H.raises(function() T.einsum("ij->iz", a) end, "einsum: the output label 'z' is in no operand")
    H.raises(function() T.einsum("ij->ii", a) end, "einsum: the output label 'i' appears twice")
    H.raises(function() T.einsum("i1", a) end, "einsum: '1' is not a letter")
    H.raises(function() T.einsum("ij", 3) end, "einsum: operand 1 is 3, not a tensor")
    H.raises(function() T.einsum(3, a) end, "einsum: the equation must be a string, got 3")
    H.raises(function() T.einsum("ij") end, "einsum: expected at least one operand")
  end)
end)

describe("sampling functions", function()
  it("bernoulli: 0/1 draws in the probabilities' dtype, seeded", function()
    T.manual_seed(7)
    local p = T.full({ 20000 }, 0.3, "float64")
    local d = p:bernoulli()
    assert.are.equal("float64", d:dtype())
    assert.is_true(math.abs(d:mean() - 0.3) < 0.02)
    assert.are.same({ 0, 1, 0 }, T.tensor({ 0, 1, 0 }):bernoulli():totable())
    T.manual_seed(7)
    assert.is_true(p:bernoulli():equal(d))
    local g = T.Generator(3)
    assert.is_true(T.bernoulli(p, g):equal(p:bernoulli(T.Generator(3))))
    H.raises(function() T.tensor({ 0.5, 1.5 }):bernoulli() end, "bernoulli: every probability must be in [0, 1]")
    H.raises(function() T.ones(2, "int64"):bernoulli() end, "bernoulli: expected a floating point tensor")
    H.raises(function() p:bernoulli(3) end, "bernoulli: expected a T.Generator, got 3")
  end)

  it("normal: numbers with a shape, or tensors broadcast", function()
    T.manual_seed(1)
    local d = T.normal(2, 3, { 20000 })
    assert.are.equal("float32", d:dtype())
    assert.is_true(math.abs(d:mean() - 2) < 0.1 and math.abs(d:std() - 3) < 0.1)
    local m = T.normal(T.tensor({ 0, 100 }, "float64"), T.tensor({ { 0 }, { 0 } }, "float64"))
    assert.are.same({ { 0, 100 }, { 0, 100 } }, m:totable())
    assert.are.equal("float64", m:dtype())
    assert.are.same({ 5, 5 }, T.normal(5, T.zeros(2)):totable())
    assert.is_true(T.normal(0, 1, { 3 }, T.Generator(2)):equal(T.normal(0, 1, { 3 }, T.Generator(2))))
    H.raises(function() T.normal(0, -1, { 2 }) end, "normal: std must be >= 0 everywhere")
    H.raises(function() T.normal(0, 1) end, "normal: with numbers for mean and std, size must be a shape table")
    H.raises(function() T.normal(T.zeros(2), 1, { 2 }) end, "normal: size is taken only when mean and std are numbers")
    H.raises(function() T.normal("a", 1, { 2 }) end, "normal: mean must be a number or a tensor, got 'a'")
    H.raises(function() T.normal(T.zeros(2, "int64"), 1) end, "normal: expected floating point tensors, got int64")
  end)

  it("multinomial: 1-based categories by weight, with and without replacement", function()
    T.manual_seed(5)
    local w = T.tensor({ { 0.1, 0, 0.9, 0 }, { 1, 1, 0, 1 } })
    local s = w:multinomial(2)
    assert.are.same({ 2, 2 }, dims(s))
    assert.are.equal("int64", s:dtype())
    local r1 = s[1]:totable()
    table.sort(r1)
    assert.are.same({ 1, 3 }, r1) -- the only two categories of weight > 0
    local r2 = s[2]:totable()
    assert.are_not.equal(r2[1], r2[2])
    for _, c in ipairs(r2) do assert.is_true(c ~= 3) end
    -- frequencies with replacement
    local draws = T.tensor({ 1, 3 }):multinomial(40000, true)
    assert.are.same({ 40000 }, dims(draws))
    local ones = draws:eq(1):sum()
    assert.is_true(math.abs(ones / 40000 - 0.25) < 0.015)
    -- without replacement the first draw follows the weights
    local first = T.zeros(3)
    for _ = 1, 3000 do
      local c = T.tensor({ 1, 2, 7 }):multinomial(2)[1]
      first[c] = first[c] + 1
    end
    assert.is_true(math.abs(first[3] / 3000 - 0.7) < 0.04)
    assert.is_true(T.multinomial(w, 1, T.Generator(9)):equal(w:multinomial(1, T.Generator(9))))
    H.raises(function() w:multinomial(3) end,
      "multinomial: a row has fewer than 3 categories of weight > 0 to draw without replacement")
    H.raises(function() w:multinomial(5) end,
      "multinomial: cannot draw 5 samples without replacement from 4 categories")
    H.raises(function() T.tensor({ 1, -1 }):multinomial(1) end, "multinomial: the weights must be finite and >= 0")
    H.raises(function() T.zeros(2):multinomial(1, true) end, "multinomial: the weights of a row sum to 0")
    H.raises(function() T.ones(2, 2, 2):multinomial(1) end,
      "multinomial: expected a 1-D or 2-D tensor of weights, got 3")
    H.raises(function() T.ones(2, "int64"):multinomial(1) end,
      "multinomial: expected floating point weights, got int64")
    H.raises(function() T.ones(2):multinomial(0) end, "multinomial: num_samples must be an integer >= 1, got 0")
    H.raises(function() T.ones(2):multinomial(1, "yes") end, "multinomial: replacement must be a boolean")
  end)
end)

describe("the one-pass kernels behind linspace, tril and triu", function()
  it("give the same values for any layout and thread count", function()
    local m = T.arange(1, 30, "float64"):view(5, 6)
    local t = m:t() -- non-contiguous, 6 x 5
    local want = t:contiguous()
    for _, k in ipairs({ -7, -2, 0, 1, 4, 9 }) do
      local lower, upper = t:tril(k), t:triu(k)
      for i = 1, 6 do
        for j = 1, 5 do
          assert.are.equal(j - i <= k and want[i][j] or 0, lower[i][j])
          assert.are.equal(j - i >= k and want[i][j] or 0, upper[i][j])
        end
      end
    end
    assert.are.same({ 2, 0, 3 }, dims(T.zeros(2, 0, 3):tril()))
    assert.are.equal("bool", T.ones(2, 2, "bool"):triu():dtype())
    local threads = T.get_num_threads()
    T.set_num_threads(1)
    local one, ramp1 = T.linspace(-3, 7, 1000001, "float64"), T.arange(0, 999999, "float32")
    T.set_num_threads(2)
    local two, ramp2 = T.linspace(-3, 7, 1000001, "float64"), T.arange(0, 999999, "float32")
    T.set_num_threads(threads)
    assert.is_true(one:equal(two) and ramp1:equal(ramp2))
    assert.are.same({ -3, 7 }, { one[1], one[1000001] })
    assert.are.equal(2, one[500001])
  end)
end)

describe("torch's other spellings and small forms", function()
  local a = T.arange(1, 6, "float32"):view(2, 3)

  it("aliases call the same method", function()
    assert.is_true(T.tensor({ -1, 2 }):absolute():equal(T.tensor({ 1, 2 })))
    assert.is_true(a:clip(2, 4):equal(a:clamp(2, 4)))
    assert.is_true(T.tensor({ -1.5, 2.5 }):fix():equal(T.tensor({ -1, 2 })))
    assert.is_true(T.tensor({ 0.5 }):arccos():equal(T.tensor({ 0.5 }):acos()))
    assert.is_true(a:greater_equal(3):equal(a:ge(3)))
    assert.is_true(T.true_divide(T.tensor({ 3 }, "int64"), 2):equal(T.tensor({ 1.5 })))
    assert.are.same({ { 1, 2 }, { 2, 1 } }, T.tensor({ { 0, 1 }, { 1, 0 } }):argwhere():totable())
    assert.are.equal(6, a:nelement())
  end)

  it("square, positive, zero_, new_*, is_floating_point, element_size", function()
    assert.are.same({ { 1, 4, 9 }, { 16, 25, 36 } }, a:square():totable())
    assert.are.equal("int32", T.tensor({ 3 }, "int32"):square():dtype())
    assert.are.equal(a, a:positive())
    H.raises(function() T.ones(1, "bool"):positive() end, "positive: not supported for bool tensors")
    assert.are.same({ 0, 0 }, T.ones(2):zero_():totable())
    local i = T.tensor({ 1 }, "int16")
    assert.are.equal("int16", i:new_zeros({ 2, 2 }):dtype())
    assert.are.same({ { 7, 7 } }, i:new_full({ 1, 2 }, 7):totable())
    assert.are.same({ 1, 1, 1 }, i:new_ones({ 3 }):totable())
    assert.are.equal("float64", i:new_ones({ 3 }, "float64"):dtype())
    assert.are.same({ 4, 0 }, dims(i:new_empty({ 4, 0 })))
    assert.are.same({ 5, 6 }, i:new_tensor({ 5, 6 }):totable())
    assert.are.equal("int16", i:new_tensor({ 5, 6 }):dtype())
    assert.is_false(i:is_floating_point())
    assert.is_true(a:is_floating_point())
    assert.are.same({ 2, 4, 8 }, { i:element_size(), a:element_size(), T.ones(1, "int64"):element_size() })
    H.raises(function() i:new_zeros(2) end, "new_zeros: size must be a shape table such as {2, 3}, got 2")
  end)

  it("count_nonzero, aminmax, std_mean, var_mean", function()
    local t = T.tensor({ { 0, 2, 0 }, { 3, 0, 1 } })
    assert.are.equal(3, t:count_nonzero())
    assert.are.same({ 1, 1, 1 }, t:count_nonzero(1):totable())
    local lo, hi = t:aminmax()
    assert.are.same({ 0, 3 }, { lo, hi })
    lo, hi = t:aminmax({ dim = 2 })
    assert.are.same({ { 0, 0 }, { 2, 3 } }, { lo:totable(), hi:totable() })
    assert.are.same({ 0, 3 }, { T.aminmax(t) })
    local s, m = a:std_mean(2)
    assert.are.same({ { 1, 1 }, { 2, 5 } }, { s:totable(), m:totable() })
    local v, m2 = a:var_mean(1, { correction = 0, keepdim = true })
    assert.are.same({ { { 2.25, 2.25, 2.25 } }, { { 2.5, 3.5, 4.5 } } }, { v:totable(), m2:totable() })
  end)

  it("logit, sinc, heaviside, rad2deg, deg2rad, float_power", function()
    local l = T.tensor({ 0.25, 0, 1 }, "float64"):logit()
    assert.are.same({ math.log(1 / 3), -inf, inf }, l:totable())
    assert.is_true(math.abs(T.tensor({ 0, 1 }, "float64"):logit(0.1)[1] - math.log(0.1 / 0.9)) < 1e-12)
    H.raises(function() a:logit(0.7) end, "logit: eps must be a number in [0, 0.5], got 0.7")
    local s = T.tensor({ 0, 0.5, 1 }, "float64"):sinc()
    assert.is_true(math.abs(s[1] - 1) < 1e-15 and math.abs(s[2] - 2 / math.pi) < 1e-15 and math.abs(s[3]) < 1e-15)
    assert.are.equal("float32", T.tensor({ 0 }, "int64"):sinc():dtype())
    assert.are.same({ 0, 0.5, 1 }, T.tensor({ -1, 0, 2 }):heaviside(T.tensor({ 0.5 })):totable())
    H.raises(function() a:heaviside(T.ones(1, "float64")) end, "heaviside: values must have self's dtype float32")
    assert.are.same({ 180 }, T.tensor({ math.pi }, "float64"):rad2deg():totable())
    assert.are.same({ math.pi }, T.tensor({ 180 }, "float64"):deg2rad():totable())
    local f = T.tensor({ 2 }, "int32"):float_power(0.5)
    assert.are.equal("float64", f:dtype())
    assert.are.equal(math.sqrt(2), f[1])
  end)

  it("fliplr, flipud, rot90, diag_embed, diagflat", function()
    assert.are.same({ { 3, 2, 1 }, { 6, 5, 4 } }, a:fliplr():totable())
    assert.are.same({ { 4, 5, 6 }, { 1, 2, 3 } }, a:flipud():totable())
    assert.are.same({ { 3, 6 }, { 2, 5 }, { 1, 4 } }, a:rot90():totable())
    assert.are.same({ { 6, 5, 4 }, { 3, 2, 1 } }, a:rot90(2):totable())
    assert.are.same({ { 4, 1 }, { 5, 2 }, { 6, 3 } }, a:rot90(-1):totable())
    assert.are.same({ { 4, 1 }, { 5, 2 }, { 6, 3 } }, a:rot90(1, { 2, 1 }):totable())
    assert.is_true(a:rot90(4):equal(a))
    H.raises(function() T.ones(2):fliplr() end, "fliplr: expected a tensor of at least 2 dims, got 1")
    H.raises(function() a:rot90(1, { 1, 1 }) end, "rot90: the two dims must differ, both are 1")
    local e = T.tensor({ { 1, 2 }, { 3, 4 } }):diag_embed()
    assert.are.same({ { { 1, 0 }, { 0, 2 } }, { { 3, 0 }, { 0, 4 } } }, e:totable())
    local e1 = T.tensor({ { 1, 2 } }):diag_embed(1, 1, 3) -- the new dims 1 and 3
    assert.are.same({ 3, 1, 3 }, dims(e1))
    assert.are.same({ 0, 1, 0 }, e1:select(2, 1)[1]:totable())
    assert.are.same({ { 0, 1, 0, 0 }, { 0, 0, 2, 0 }, { 0, 0, 0, 3 }, { 0, 0, 0, 0 } },
      T.tensor({ { 1, 2, 3 } }):diagflat(1):totable())
  end)

  it("assembles: atleast_*, column_stack, row_stack, dstack, meshgrid, cartesian_prod, block_diag", function()
    assert.are.same({ { 1 }, { 1, 1 }, { 1, 2, 1 }, { 2, 3, 1 } },
      { dims(T.atleast_1d(T.tensor(5))), dims(T.atleast_2d(T.tensor(5))), dims(T.atleast_3d(T.ones(2))),
        dims(T.atleast_3d(T.ones(2, 3))) })
    assert.are.same({ { 1, 3 }, { 2, 4 } }, T.column_stack({ T.tensor({ 1, 2 }), T.tensor({ 3, 4 }) }):totable())
    assert.are.same({ { 1, 2 }, { 3, 4 } }, T.row_stack({ T.tensor({ 1, 2 }), T.tensor({ 3, 4 }) }):totable())
    assert.are.same({ { { 1, 3 }, { 2, 4 } } }, T.dstack(T.tensor({ 1, 2 }), T.tensor({ 3, 4 })):totable())
    local x, y = unpack(T.meshgrid(T.tensor({ 1, 2 }), T.tensor({ 3, 4, 5 })))
    assert.are.same({ { 1, 1, 1 }, { 2, 2, 2 } }, x:totable())
    assert.are.same({ { 3, 4, 5 }, { 3, 4, 5 } }, y:totable())
    x = T.meshgrid(T.tensor({ 1, 2 }), T.tensor({ 3, 4, 5 }), { indexing = "xy" })[1]
    assert.are.same({ { 1, 2 }, { 1, 2 }, { 1, 2 } }, x:totable())
    H.raises(function() T.meshgrid(T.ones(2), { indexing = "yx" }) end, "meshgrid: indexing must be 'ij' or 'xy'")
    assert.are.same({ { 1, 3 }, { 1, 4 }, { 2, 3 }, { 2, 4 } },
      T.cartesian_prod(T.tensor({ 1, 2 }), T.tensor({ 3, 4 })):totable())
    local b = T.block_diag(T.ones(2, 2, "int32"), T.tensor({ 5, 6 }, "float64"), T.tensor(7, "int64"))
    assert.are.equal("float64", b:dtype())
    assert.are.same({ { 1, 1, 0, 0, 0 }, { 1, 1, 0, 0, 0 }, { 0, 0, 5, 6, 0 }, { 0, 0, 0, 0, 7 } }, b:totable())
    H.raises(function() T.block_diag(T.ones(1, 1, 1)) end, "block_diag: tensor 1 has 3 dims, expected at most 2")
    H.raises(function() T.column_stack({}) end, "column_stack: expected at least one tensor")
    assert.are.same({ { 1, 2, 2, 3, 3, 3 }, { 1, 1, 2, 1, 2, 3 } }, T.tril_indices(3, 3):totable())
    assert.are.same({ { 1, 1, 2 }, { 2, 3, 3 } }, T.triu_indices(2, 3, 1):totable())
    H.raises(function() T.tril_indices(-1, 2) end, "tril_indices: rows and cols must be integers >= 0, got -1")
  end)

  it("tensordot, inner, vdot, cov, corrcoef, dist, cdist", function()
    local x = T.arange(1, 24, "float64"):view(2, 3, 4)
    local y = T.arange(1, 12, "float64"):view(3, 4)
    assert.is_true(x:tensordot(y, 2):allclose(T.einsum("ijk,jk->i", x, y)))
    assert.is_true(x:tensordot(y, { { 2 }, { 1 } }):allclose(T.einsum("ijk,jl->ikl", x, y)))
    assert.is_true(T.inner(y, y):allclose(y:matmul(y:t())))
    assert.are.equal(14, T.tensor({ 1, 2, 3 }):vdot(T.tensor({ 1, 2, 3 })))
    H.raises(function() x:tensordot(y, { { 1 }, { 1 } }) end,
      "tensordot: dim 1 of self (size 2) and dim 1 of other (size 3) differ")
    H.raises(function() x:tensordot(y, 4) end, "tensordot: dims 4 is out of range for tensors of 3 and 2 dims")
    local obs = T.tensor({ { 0, 1, 2 }, { 2, 1, 0 } }, "float64")
    assert.are.same({ { 1, -1 }, { -1, 1 } }, obs:cov():totable())
    assert.are.same({ { 2 / 3, -2 / 3 }, { -2 / 3, 2 / 3 } }, obs:cov({ correction = 0 }):totable())
    assert.are.same({ { 1, -1 }, { -1, 1 } }, obs:corrcoef():totable())
    assert.are.equal(1, T.tensor({ 1, 2, 3 }):cov())
    assert.are.equal(5, T.tensor({ 0, 0 }):dist(T.tensor({ 3, 4 })))
    assert.are.equal(7, T.tensor({ 0, 0 }):dist(T.tensor({ 3, 4 }), 1))
    local d = T.tensor({ { 0, 0 }, { 1, 1 } }):cdist(T.tensor({ { 3, 4 } }))
    assert.are.same({ 2, 1 }, dims(d))
    assert.is_true(math.abs(d[1][1] - 5) < 1e-6 and math.abs(d[2][1] - math.sqrt(13)) < 1e-6)
    H.raises(function() T.ones(2, 2):cdist(T.ones(2, 3)) end, "cdist: the last dims must match, got 2 and 3")
  end)

  it("exponential_, geometric_, cauchy_, log_normal_: seeded draws of their distributions", function()
    T.manual_seed(11)
    local e = T.zeros(40000, "float64"):exponential_(2)
    assert.is_true(math.abs(e:mean() - 0.5) < 0.02 and e:min() >= 0)
    local g = T.zeros(40000):geometric_(0.25)
    assert.is_true(math.abs(g:mean() - 4) < 0.1 and g:min() >= 1)
    assert.are.same({ 1, 1 }, T.zeros(2):geometric_(1):totable())
    local c = T.zeros(40001, "float64"):cauchy_(3, 2)
    assert.is_true(math.abs(c:sort()[20001] - 3) < 0.1) -- the median
    local ln = T.zeros(40000, "float64"):log_normal_(0, 0.5)
    assert.is_true(ln:min() > 0 and math.abs(ln:log():std() - 0.5) < 0.02)
    assert.is_true(T.zeros(3):exponential_(T.Generator(4)):equal(T.zeros(3):exponential_(1, T.Generator(4))))
    H.raises(function() T.zeros(2):exponential_(0) end, "exponential_: lambd must be a number > 0, got 0")
    H.raises(function() T.zeros(2):geometric_(1.5) end, "geometric_: p must be a number in (0, 1], got 1.5")
    H.raises(function() T.zeros(2, "int64"):cauchy_() end, "cauchy_: expected a floating point tensor, got int64")
  end)
end)

describe("in-place comparisons and storage_offset", function()
  it("write the comparison into self as 1 or 0 of its dtype", function()
    local t = T.tensor({ 1, 5, 3 })
    assert.are.equal(t, t:gt_(2))
    assert.are.same({ 0, 1, 1 }, t:totable())
    assert.are.equal("float32", t:dtype())
    local i = T.tensor({ 1, 2, 3 }, "int32")
    i:eq_(T.tensor({ 1, 0, 3 }, "int32"))
    assert.are.same({ 1, 0, 1 }, i:totable())
    assert.are.same({ 1, 1, 0 }, T.tensor({ 1, 2, 3 }):le_(2):totable())
    H.raises(function() T.ones(2):lt_(T.ones(3)) end, "lt")
    local g = T.arange(1, 12):view(3, 4)
    assert.are.same({ 0, 4, 6 }, { g:storage_offset(), g[2]:storage_offset(), g:narrow(2, 3, 2)[2]:storage_offset() })
  end)
end)
