-- torch_api_spec.lua: torch's everyday functions that issue 30 adds, in Lua's 1-based
-- manners: the views narrow, select, movedim, swapaxes, broadcast_to, view_as; the
-- constructors linspace, logspace, eye and the *_like ones. Values, shapes, dtypes,
-- views sharing their source's memory, and the errors.
local T = require("tensordict")
local H = require("helpers")

local function grid() return T.arange(1, 24):view(2, 3, 4) end

-- A tensor's shape as a plain list.
local function dims(t)
  local size, out = t:size(), {}
  for i = 1, #size do out[i] = size[i] end
  return out
end

describe("views", function()
  it("narrow(dim, start, length): 1-based start, negative from the end, a view", function()
    local t = grid()
    local n = t:narrow(3, 2, 2)
    assert.are.same({ 2, 3, 2 }, dims(n))
    assert.are.same({ { 2, 3 }, { 6, 7 }, { 10, 11 } }, n[1]:totable())
    assert.are.same({ 3, 4 }, t:narrow(3, -2, 2)[1][1]:totable())
    assert.are.same({ 0, 3, 4 }, dims(t:narrow(1, 2, 0)))
    n:fill_(0)
    assert.are.same({ 1, 0, 0, 4 }, t[1][1]:totable()) -- writes reach the source
    H.raises(function() t:narrow(3, 4, 2) end,
      "narrow: start 4 and length 2 do not fit dim 3 of size 4 (start in 1..4 or -4..-1)")
    H.raises(function() t:narrow(3, 0, 1) end, "narrow: start 0 and length 1 do not fit")
    H.raises(function() t:narrow(3, 1, -1) end, "narrow: start and length must be integers (length >= 0)")
    H.raises(function() t:narrow(4, 1, 1) end, "narrow")
  end)

  it("select(dim, index): the dim goes, a view", function()
    local t = grid()
    assert.are.same({ 2, 4 }, dims(t:select(2, 3)))
    assert.are.same({ 9, 10, 11, 12 }, t:select(2, -1)[1]:totable())
    assert.are.same({ { 13, 14, 15, 16 }, { 17, 18, 19, 20 }, { 21, 22, 23, 24 } }, t:select(1, 2):totable())
    t:select(3, 1):fill_(-1)
    assert.are.equal(-1, t[2][3][1])
    H.raises(function() t:select(2, 4) end,
      "select: index 4 is out of range for dim 2 of size 3 (valid: 1..3 or -3..-1)")
    H.raises(function() t:select(2, 0) end, "select: index 0 is out of range")
  end)

  it("movedim, swapaxes, broadcast_to, view_as", function()
    local t = grid()
    assert.are.same({ 3, 4, 2 }, dims(t:movedim(1, 3)))
    assert.are.same({ 3, 4, 2 }, dims(t:movedim({ 1, 2 }, { 3, 1 })))
    assert.are.equal(t[2][3][4], t:movedim(1, 3)[3][4][2])
    assert.are.same({ 4, 2, 3 }, dims(t:moveaxis(-1, 1)))
    assert.are.same({ 4, 3, 2 }, dims(t:swapaxes(1, 3)))
    assert.are.equal(t[1][2][3], t:swapdims(1, 3)[3][2][1])
    local b = T.tensor({ 1, 2, 3 }):broadcast_to(2, 3)
    assert.are.same({ { 1, 2, 3 }, { 1, 2, 3 } }, b:totable())
    assert.are.same({ 4, 6 }, dims(t:view_as(T.zeros(4, 6))))
    H.raises(function() t:movedim({ 1, 1 }, { 2, 3 }) end, "movedim: source dim 1 appears twice")
    H.raises(function() t:movedim({ 1, 2 }, { 3 }) end, "movedim: 2 source dims but 1 destinations")
    H.raises(function() t:view_as(3) end, "view_as: expected a tensor, got 3")
    H.raises(function() T.zeros(3):broadcast_to(2, 4) end, "expand")
  end)
end)

describe("constructors", function()
  it("linspace: both ends exact, float32 by default", function()
    assert.are.same({ 0, 0.25, 0.5, 0.75, 1 }, T.linspace(0, 1, 5):totable())
    local l = T.linspace(-1, 1, 4, "float64")
    assert.are.equal("float64", l:dtype())
    H.assert_near({ -1, -1 / 3, 1 / 3, 1 }, l:totable(), 1e-15)
    local big = T.linspace(0, 0.1, 1001, "float64"):totable()
    assert.are.equal(0.1, big[1001]) -- counted down from stop: exact
    assert.are.equal(0, big[1])
    assert.are.same({ 3 }, T.linspace(3, 7, 1):totable())
    assert.are.same({ 0 }, dims(T.linspace(0, 1, 0)))
    H.raises(function() T.linspace(0, 1, -1) end, "linspace: steps must be an integer >= 0, got -1")
    H.raises(function() T.linspace(0, 1 / 0, 3) end, "linspace: start and stop must be finite numbers")
  end)

  it("logspace: base ^ linspace", function()
    assert.are.same({ 1, 10, 100 }, T.logspace(0, 2, 3):totable())
    assert.are.same({ 1, 2, 4, 8 }, T.logspace(0, 3, 4, 2, "float64"):totable())
    assert.are.equal("float64", T.logspace(0, 1, 2, "float64"):dtype())
  end)

  it("eye: ones on the diagonal, any n x m and dtype", function()
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, T.eye(3):totable())
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 } }, T.eye(2, 3, "int32"):totable())
    assert.are.same({ { 1, 0 }, { 0, 1 }, { 0, 0 } }, T.eye(3, 2):totable())
    assert.are.same({ 0, 0 }, dims(T.eye(0)))
    assert.are.equal("bool", T.eye(2, "bool"):dtype())
    H.raises(function() T.eye(-1) end, "eye: sizes must be integers >= 0, got -1 and -1")
    H.raises(function() T.eye() end, "eye: sizes must be integers >= 0, got nil and nil")
    H.raises(function() T.hstack(T.ones(2)) end, "hstack: expected a list of tensors")
  end)

  it("*_like: the shape, and the dtype unless given", function()
    local x = T.ones(2, 3, "int16")
    for _, name in ipairs({ "zeros_like", "ones_like", "empty_like" }) do
      local y = T[name](x)
      assert.are.same({ 2, 3 }, dims(y), name)
      assert.are.equal("int16", y:dtype(), name)
    end
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, T.zeros_like(x):totable())
    assert.are.same({ { 7, 7, 7 }, { 7, 7, 7 } }, T.full_like(x, 7):totable())
    assert.are.equal("float64", T.ones_like(x, "float64"):dtype())
    local r = T.rand_like(T.zeros(1000))
    assert.is_true(r:min() >= 0 and r:max() < 1)
    assert.are.equal("float64", T.randn_like(T.zeros(3), "float64"):dtype())
    H.raises(function() T.zeros_like(3) end, "zeros_like: expected a tensor or a TensorDict, got 3")
  end)
end)

describe("comparisons and NaN-aware functions", function()
  it("isclose, allclose, equal", function()
    local inf = 1 / 0
    local a = T.tensor({ 1, 100, inf, 0 / 0, 2, -inf }, "float64")
    local b = T.tensor({ 1 + 1e-9, 100.0005, inf, 0 / 0, 3, inf }, "float64")
    assert.are.same({ true, true, true, false, false, false }, a:isclose(b):totable())
    assert.are.same({ true, true, true, true, false, false }, a:isclose(b, nil, nil, true):totable())
    assert.are.same({ true, false, true, false, false, false }, a:isclose(b, 0, 1e-6):totable())
    assert.is_true(T.tensor({ 1, 2 }):allclose(T.tensor({ 1, 2.000001 })))
    assert.is_false(T.tensor({ 1, 2 }):allclose(T.tensor({ 1, 2.1 })))
    assert.is_true(T.tensor({ 1, 2 }, "int32"):allclose(2 - T.tensor({ 1, 0 })))
    assert.is_true(T.tensor({ 1, 2 }, "int32"):equal(T.tensor({ 1, 2 })))
    assert.is_false(T.tensor({ 1, 2 }):equal(T.tensor({ { 1, 2 } })))
    assert.is_false(T.tensor({ 0 / 0 }):equal(T.tensor({ 0 / 0 })))
    assert.is_true(T.allclose(T.zeros(2), T.zeros(2)))
    H.raises(function() a:isclose(b, -1) end, "isclose: rtol and atol must be numbers >= 0, got -1 and 1e-08")
    H.raises(function() a:isclose("x") end, "isclose: expected a tensor, number or boolean to compare with, got 'x'")
    H.raises(function() a:equal(3) end, "equal: expected a tensor, got 3")
  end)

  it("nan_to_num, nansum, nanmean", function()
    local inf = 1 / 0
    assert.are.same({ 0, 3.4028234663852886e38, -3.4028234663852886e38, 1 },
      T.tensor({ 0 / 0, inf, -inf, 1 }):nan_to_num():totable())
    assert.are.same({ 5, 6, -7, 1 }, T.tensor({ 0 / 0, inf, -inf, 1 }, "float64"):nan_to_num(5, 6, -7):totable())
    assert.are.same({ 65504, 0 }, T.tensor({ inf, 0 / 0 }, "float16"):nan_to_num():totable())
    assert.are.same({ 1, 2 }, T.tensor({ 1, 2 }, "int32"):nan_to_num():totable())
    local n = T.tensor({ { 1, 0 / 0 }, { 3, 4 } })
    assert.are.equal(8, n:nansum())
    assert.are.same({ 4, 4 }, n:nansum(1):totable())
    H.assert_near({ 8 / 3 }, { n:nanmean() }, 1e-6)
    assert.are.same({ 1, 3.5 }, n:nanmean(2):totable())
    local all_nan = T.tensor({ 0 / 0 }):nanmean()
    assert.is_true(all_nan ~= all_nan)
    assert.are.equal(3, T.tensor({ 1, 2 }, "int64"):nansum())
    H.raises(function() T.tensor({ 1 }, "int32"):nanmean() end,
      "nanmean: not supported for int32 tensors (it takes floating point ones)")
    H.raises(function() n:nan_to_num("x") end, "nan_to_num: replacements must be numbers, got 'x'")
  end)
end)

describe("flip, roll, tril, triu", function()
  it("flip and roll copy with the elements moved", function()
    local t = T.arange(1, 6):view(2, 3)
    assert.are.same({ { 3, 2, 1 }, { 6, 5, 4 } }, t:flip(2):totable())
    assert.are.same({ { 6, 5, 4 }, { 3, 2, 1 } }, T.flip(t, { 1, 2 }):totable())
    local f = t:flip(1)
    f:fill_(0)
    assert.are.same({ 1, 2, 3 }, t[1]:totable()) -- a copy, as torch's
    assert.are.same({ { 3, 1, 2 }, { 6, 4, 5 } }, t:roll(1, 2):totable())
    assert.are.same({ { 5, 6, 4 }, { 2, 3, 1 } }, t:roll({ 1, -1 }, { 1, 2 }):totable())
    assert.are.same({ { 5, 6, 1 }, { 2, 3, 4 } }, t:roll(2):totable())
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t:roll(3, 2):totable())
    H.raises(function() t:flip({ 1, 1 }) end, "flip: dim 1 appears twice")
    H.raises(function() t:flip() end, "flip: expected the dims to flip")
    H.raises(function() t:roll({ 1, 2 }, 1) end, "roll: 2 shifts but 1 dims")
    H.raises(function() t:roll({ 1 }) end, "roll: without dims shifts must be one integer")
  end)

  it("tril and triu keep a triangle of the last two dims", function()
    local m = T.ones(3, 4)
    assert.are.same({ { 1, 0, 0, 0 }, { 1, 1, 0, 0 }, { 1, 1, 1, 0 } }, m:tril():totable())
    assert.are.same({ { 0, 1, 1, 1 }, { 0, 0, 1, 1 }, { 0, 0, 0, 1 } }, m:triu(1):totable())
    assert.are.same({ { 0, 0, 0, 0 }, { 1, 0, 0, 0 }, { 1, 1, 0, 0 } }, m:tril(-1):totable())
    local batch = T.ones(2, 2, 2, "int32"):triu()
    assert.are.same({ { 1, 1 }, { 0, 1 } }, batch[2]:totable())
    assert.are.equal("int32", batch:dtype())
    H.raises(function() T.ones(3):tril() end, "tril: expected a tensor of 2 or more dims, got 1")
  end)
end)

describe("gathers, scatters and combinations", function()
  it("scatter, index_add, index_fill, index_copy (out of place and in place), take, take_along_dim", function()
    local t = T.arange(1, 6):view(2, 3)
    local i = T.tensor({ 1, 3 }, "int64")
    assert.are.same({ { 0, 2, 0 }, { 0, 5, 0 } }, t:index_fill(2, i, 0):totable())
    local rows = T.tensor({ { 9, 9, 9 } }, "int64")
    assert.are.same({ { 1, 2, 3 }, { 9, 9, 9 } }, t:index_copy(1, T.tensor({ 2 }, "int64"), rows):totable())
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t:totable()) -- the out-of-place forms copy
    local u = t:clone()
    assert.are.equal(u, u:index_fill_(1, T.tensor({ 1 }, "int64"), -1))
    assert.are.same({ -1, -1, -1 }, u[1]:totable())
    assert.are.same({ { 0, 2, 3 }, { 4, 0, 6 } }, t:scatter(2, T.tensor({ { 1 }, { 2 } }, "int64"), 0):totable())
    local added = T.zeros(3):index_add(1, T.tensor({ 1, 1, 3 }, "int64"), T.tensor({ 1, 2, 3 }))
    assert.are.same({ 3, 0, 3 }, added:totable())
    assert.are.same({ { 1, 6 } }, t:take(T.tensor({ { 1, 6 } }, "int64")):totable())
    assert.are.same({ { 3 }, { 4 } }, t:take_along_dim(T.tensor({ { 3 }, { 1 } }, "int64"), 2):totable())
    assert.are.same({ 6, 1 }, t:take_along_dim(T.tensor({ 6, 1 }, "int64")):totable())
    H.raises(function() t:index_fill(2, T.tensor({ { 1 } }, "int64"), 0) end,
      "index_fill_: index must be a 1-D integer tensor")
    H.raises(function() t:index_fill(2, i, "x") end, "index_fill_: value must be a number or boolean, got 'x'")
    H.raises(function() t:take(3) end, "take: index must be an integer tensor, got 3")
  end)

  it("outer, diff, addcmul, addcdiv, addmm, tile, vstack, hstack", function()
    assert.are.same({ { 1, 10 }, { 2, 20 }, { 3, 30 } }, T.tensor({ 1, 2, 3 }):outer(T.tensor({ 1, 10 })):totable())
    local t = T.tensor({ { 1, 4, 9 }, { 16, 25, 36 } }, "int64")
    assert.are.same({ { 3, 5 }, { 9, 11 } }, t:diff():totable())
    assert.are.same({ { 2 }, { 2 } }, t:diff(2):totable())
    assert.are.same({ { 15, 21, 27 } }, t:diff(1, 1):totable())
    assert.are.same({ true, false }, T.tensor({ true, false, false }):diff():totable())
    assert.are.same({ 5, 8.5 }, T.ones(2):addcmul(T.tensor({ 2, 3 }), T.tensor({ 4, 5 }), 0.5):totable())
    assert.are.same({ 1.5, 1.5 }, T.ones(2):addcdiv(T.tensor({ 2, 3 }), T.tensor({ 4, 6 })):totable())
    assert.are.same({ { 3.5, 3.5 }, { 3.5, 3.5 } },
      T.ones(2, 2):addmm(T.ones(2, 3), T.ones(3, 2), { beta = 2, alpha = 0.5 }):totable())
    assert.are.same({ { 1, 2, 1, 2 }, { 1, 2, 1, 2 } }, T.tensor({ 1, 2 }):tile(2, 2):totable())
    assert.are.same({ { 1, 2 }, { 3, 4 } }, T.vstack({ T.tensor({ 1, 2 }), T.tensor({ 3, 4 }) }):totable())
    assert.are.same({ 1, 2, 3 }, T.hstack({ T.tensor({ 1, 2 }), T.tensor({ 3 }) }):totable())
    H.raises(function() T.ones(2, 2):outer(T.ones(2)) end, "outer: expected two 1-D tensors, got 2 and 1 dims")
    H.raises(function() t:diff(-1) end, "diff: n must be an integer >= 0, got -1")
    H.raises(function() T.ones(2):addmm(T.ones(2), T.ones(2)) end, "addmm: mat1 and mat2 must be matrices")
    H.raises(function() T.vstack({ 1 }) end, "vstack: element 1 is 1, not a tensor")
  end)
end)

describe("sort, argsort, topk, kthvalue", function()
  it("sort: NaN greatest, stable, every dtype, any dim; indices 1-based", function()
    local t = T.tensor({ { 3, 1, 0 / 0, 2 }, { 5, 5, -1, 0 } })
    local v, i = t:sort()
    H.assert_near({ { 1, 2, 3, 0 / 0 }, { -1, 0, 5, 5 } }, v:totable(), 0)
    assert.are.same({ { 2, 4, 1, 3 }, { 3, 4, 1, 2 } }, i:totable())
    assert.are.equal("int64", i:dtype())
    v, i = t:sort(2, true)
    H.assert_near({ { 0 / 0, 3, 2, 1 }, { 5, 5, 0, -1 } }, v:totable(), 0)
    assert.are.same({ { 3, 1, 4, 2 }, { 1, 2, 4, 3 } }, i:totable()) -- equal 5s keep their order
    assert.are.same({ { 1, 1, 2, 2 }, { 2, 2, 1, 1 } }, t:argsort(1):totable())
    for _, dtype in ipairs({ "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float64" }) do
      local x = T.tensor({ 1, 0, 1, 0 }, dtype)
      local sv, si = x:sort()
      assert.are.equal(dtype, sv:dtype())
      assert.are.same({ 2, 4, 1, 3 }, si:totable(), dtype)
    end
    -- past 2^53 (no double tells them apart): compared as int64
    local big = T.tensor({ 2 ^ 53, 2 ^ 53 }, "int64") + T.tensor({ 1, 0 }, "int64")
    assert.are.same({ 2, 1 }, big:argsort():totable())
    local s0, i0 = T.tensor(5):sort()
    assert.are.same({ 5, 1 }, { s0:item(), i0:item() })
    local e = T.zeros(0, 3):sort(1)
    assert.are.same({ 0, 3 }, { e:size(1), e:size(2) })
    H.raises(function() t:sort(3) end, "sort")
  end)

  it("topk and kthvalue", function()
    local t = T.tensor({ { 3, 1, 4, 2 }, { 8, 6, 7, 5 } })
    local v, i = t:topk(2)
    assert.are.same({ { 4, 3 }, { 8, 7 } }, v:totable())
    assert.are.same({ { 3, 1 }, { 1, 3 } }, i:totable())
    v, i = t:topk(1, 1, false)
    assert.are.same({ { 3, 1, 4, 2 } }, v:totable())
    assert.are.same({ { 1, 1, 1, 1 } }, i:totable())
    v, i = t:kthvalue(2)
    assert.are.same({ 2, 6 }, v:totable())
    assert.are.same({ 4, 2 }, i:totable())
    v = t:kthvalue(1, 1, true)
    assert.are.same({ { 3, 1, 4, 2 } }, v:totable())
    assert.are.same({ 2, 0 }, { t:topk(0):size(1), t:topk(0):size(2) })
    H.raises(function() t:topk(5) end, "topk: k must be an integer in 0..4 (the size of the dim), got 5")
    H.raises(function() t:kthvalue(0) end, "kthvalue: k must be an integer in 1..4, got 0")
  end)
end)

describe("against torch", function()
  local py = os.getenv("TD_TORCH_PYTHON") or os.getenv("TD_PYTHON") or "python3"
  it("gives torch's results for the same calls (0-based dims and indices on torch's side)", function()
    if not H.sh(py .. " -c 'import torch' >/dev/null 2>&1") then
      pending("torch not installed (TD_TORCH_PYTHON): these functions are not cross-checked")
      return
    end
    local inf = 1 / 0
    local x = T.tensor({ { 0.5, -1.25, 0 / 0, 3 }, { inf, 2, -inf, -0.75 }, { 1, 1e-9, -4, 8 } }, "float64")
    local g = T.arange(1, 24):view(2, 3, 4)
    local r = T.tensor({ { 0.5, -3, 7, 2.25, 1 }, { 9, 4, -8, 6, 0 } })
    -- name -> our result; the same names in the Python below compute torch's
    local ours = {
      linspace = T.linspace(-2, 3, 7, "float64"), linspace32 = T.linspace(0, 1, 11),
      logspace = T.logspace(-1, 2, 5, "float64"), eye = T.eye(3, 5),
      isclose = x:isclose(x + 1e-6), isclose_nan = x:isclose(x, 1e-3, 0, true),
      nan_to_num = x:nan_to_num(), nan_to_num3 = x:nan_to_num(1, 2, 3),
      nansum = x:nansum(2), nanmean = x:nanmean(1),
      flip = g:flip({ 1, 3 }), roll = g:roll({ 2, -1 }, { 2, 3 }), roll_flat = g:roll(5),
      tril = g:tril(1), triu = g:triu(-1),
      narrow = g:narrow(3, 2, 2):contiguous(), select = g:select(2, -1):contiguous(),
      movedim = g:movedim({ 1, 3 }, { 3, 1 }):contiguous(),
      index_fill = g:index_fill(3, T.tensor({ 1, 4 }, "int64"), -5),
      take = g:take(T.tensor({ { 1, 24 }, { 7, 12 } }, "int64")),
      take_along_dim = g:take_along_dim(T.tensor({ { { 4, 1 } } }, "int64"), 3),
      outer = T.tensor({ 1, 2, 3 }):outer(T.tensor({ 0.5, -1 })),
      diff = g:diff(2, 3), diff_dim = g:diff(1, 1),
      addcmul = x:addcmul(x, x, 0.25), addmm = T.ones(2, 2):addmm(T.arange(1, 6):view(2, 3):float(),
        T.arange(1, 6):view(3, 2):float(), { beta = 0.5, alpha = 2 }),
      tile = g:tile(2, 1, 1, 2), vstack = T.vstack({ T.tensor({ 1, 2 }), T.tensor({ { 3, 4 }, { 5, 6 } }) }),
      sort_values = x:sort(1), sort_indices = select(2, x:sort(1)),
      sort_desc = (g % 5):sort(3, true), argsort = (g % 5):argsort(2),
      topk = r:topk(3), topk_indices = select(2, r:topk(3)), kthvalue = r:kthvalue(2, 1),
      kth_indices = select(2, r:kthvalue(2, 1)),
      diagonal = g:diagonal(1, 2, 3):contiguous(), diag = r:diag(-1), diag_vec = T.tensor({ 1, 2, 3 }):diag(1),
      kron = T.kron(T.arange(1, 4):view(2, 2), T.tensor({ { 1, -1, 0 } }, "int64")),
      cross = T.cross(x:narrow(2, 1, 3), x:narrow(2, 2, 3), 2),
      baddbmm = T.ones(2, 1, 1):baddbmm(r:view(2, 1, 5), r:view(2, 5, 1), { beta = 2, alpha = 0.5 }),
      masked_scatter = g:masked_scatter(g:gt(12), -g),
      scatter_add = g:scatter_add(3, (g % 4 + 1):to("int64"), g * 10),
      scatter_prod = r:scatter_reduce(2, T.tensor({ { 1, 1, 2, 2, 3 } }, "int64"), r, "prod"),
      scatter_mean = r:scatter_reduce(2, T.tensor({ { 1, 1, 2, 2, 3 } }, "int64"), r, "mean", { include_self = false }),
      scatter_amin = g:scatter_reduce(1, T.tensor({ { { 2, 1, 2, 1 } } }, "int64"), -g, "amin"),
      cummax = x:cummax(2), cummax_i = select(2, x:cummax(2)), cummin = g:cummin(3),
      cummin_i = select(2, (g % 3):cummin(3)), logcumsumexp = x:logcumsumexp(1),
      einsum = T.einsum("bij,bjk->bik", g:to("float64"):view(2, 3, 4), g:to("float64"):view(2, 4, 3)),
      einsum_int = T.einsum("ijk,ik->j", g, g:sum(2)), einsum_diag = T.einsum("ii->i", r:narrow(2, 1, 2)),
    }
    for i, p in ipairs(g:tensor_split({ 2, 3 }, 2)) do ours["tensor_split" .. i] = p:contiguous() end
    local gf = g:to("float64")
    local more = {
      square = g:square(), logit = (gf / 25):logit(), sinc = (x / 3):sinc(), heaviside = x:heaviside(x * 0 + 0.5),
      rot90 = g:rot90(1, { 2, 3 }):contiguous(), diag_embed = r:diag_embed(1), tril_indices = T.tril_indices(3, 4, 1),
      cartesian_prod = T.cartesian_prod(T.tensor({ 1, 2 }, "int64"), T.tensor({ 3, 4, 5 }, "int64")),
      block_diag = T.block_diag(r, T.tensor({ { 1 } }, "float64")),
      tensordot = gf:tensordot(gf, { { 1, 2 }, { 1, 2 } }),
      inner = gf:inner(gf), cov = r:cov(), corrcoef = r:corrcoef(), cdist = r:view(2, 5, 1):cdist(r:view(2, 5, 1), 1),
      count_nonzero = (g % 3):count_nonzero(2), float_power = g:float_power(0.5),
      column_stack = T.column_stack({ r[1], r[2] }), dstack = T.dstack({ r, r }), diagflat = r:diagflat(-1),
    }
    for k, v in pairs(more) do ours[k] = v end
    local dir = H.tmpdir()
    T.TensorDict(ours, {}):memmap(dir .. "/ours")
    H.write(dir .. "/check.py", [==[
import json, sys, numpy as np, torch
d = sys.argv[1]
meta = json.load(open(d + "/ours/meta.json"))
inf, nan = float("inf"), float("nan")
x = torch.tensor([[0.5, -1.25, nan, 3], [inf, 2, -inf, -0.75], [1, 1e-9, -4, 8]], dtype=torch.float64)
g = torch.arange(1, 25).view(2, 3, 4)
r = torch.tensor([[0.5, -3, 7, 2.25, 1], [9, 4, -8, 6, 0]])
theirs = {
    "linspace": torch.linspace(-2, 3, 7, dtype=torch.float64), "linspace32": torch.linspace(0, 1, 11),
    "logspace": torch.logspace(-1, 2, 5, dtype=torch.float64), "eye": torch.eye(3, 5),
    "isclose": torch.isclose(x, x + 1e-6), "isclose_nan": torch.isclose(x, x, 1e-3, 0, True),
    "nan_to_num": torch.nan_to_num(x), "nan_to_num3": torch.nan_to_num(x, 1, 2, 3),
    "nansum": torch.nansum(x, 1), "nanmean": torch.nanmean(x, 0),
    "flip": g.flip((0, 2)), "roll": g.roll((2, -1), (1, 2)), "roll_flat": g.roll(5),
    "tril": g.tril(1), "triu": g.triu(-1),
    "narrow": g.narrow(2, 1, 2), "select": g.select(1, -1), "movedim": g.movedim((0, 2), (2, 0)),
    "index_fill": g.index_fill(2, torch.tensor([0, 3]), -5),
    "take": g.take(torch.tensor([[0, 23], [6, 11]])),
    "take_along_dim": torch.take_along_dim(g, torch.tensor([[[3, 0]]]), 2),
    "outer": torch.outer(torch.tensor([1., 2, 3]), torch.tensor([0.5, -1])),
    "diff": torch.diff(g, 2, 2), "diff_dim": torch.diff(g, 1, 0),
    "addcmul": torch.addcmul(x, x, x, value=0.25),
    "addmm": torch.addmm(torch.ones(2, 2), torch.arange(1., 7).view(2, 3), torch.arange(1., 7).view(3, 2),
                         beta=0.5, alpha=2),
    "sort_values": torch.sort(x, dim=0, stable=True).values,
    "sort_indices": torch.sort(x, dim=0, stable=True).indices + 1,
    "sort_desc": torch.sort(g % 5, dim=2, descending=True, stable=True).values,
    "argsort": torch.argsort(g % 5, dim=1, stable=True) + 1,
    "topk": torch.topk(r, 3).values, "topk_indices": torch.topk(r, 3).indices + 1,
    "kthvalue": torch.kthvalue(r, 2, 0).values, "kth_indices": torch.kthvalue(r, 2, 0).indices + 1,
    "tile": g.tile((2, 1, 1, 2)), "vstack": torch.vstack([torch.tensor([1., 2]), torch.tensor([[3., 4], [5, 6]])]),
    "diagonal": g.diagonal(1, 1, 2), "diag": r.diag(-1), "diag_vec": torch.tensor([1., 2, 3]).diag(1),
    "kron": torch.kron(torch.arange(1, 5).view(2, 2), torch.tensor([[1, -1, 0]])),
    "cross": torch.cross(x[:, 0:3], x[:, 1:4], dim=1),
    "baddbmm": torch.baddbmm(torch.ones(2, 1, 1), r.view(2, 1, 5), r.view(2, 5, 1), beta=2, alpha=0.5),
    "masked_scatter": g.masked_scatter(g > 12, -g),
    "scatter_add": g.scatter_add(2, g % 4, g * 10),
    "scatter_prod": r.scatter_reduce(1, torch.tensor([[0, 0, 1, 1, 2]]), r, "prod"),
    "scatter_mean": r.scatter_reduce(1, torch.tensor([[0, 0, 1, 1, 2]]), r, "mean", include_self=False),
    "scatter_amin": g.scatter_reduce(0, torch.tensor([[[1, 0, 1, 0]]]), -g, "amin"),
    "cummax": x.cummax(1).values, "cummax_i": x.cummax(1).indices + 1, "cummin": g.cummin(2).values,
    "cummin_i": (g % 3).cummin(2).indices + 1, "logcumsumexp": x.logcumsumexp(0),
    "einsum": torch.einsum("bij,bjk->bik", g.double().view(2, 3, 4), g.double().view(2, 4, 3)),
    "einsum_int": torch.einsum("ijk,ik->j", g, g.sum(1)), "einsum_diag": torch.einsum("ii->i", r[:, 0:2]),
}
gf = g.double()
theirs.update({
    "square": g.square(), "logit": (gf / 25).logit(), "sinc": (x / 3).sinc(),
    "heaviside": x.heaviside(torch.full_like(x, 0.5)), "rot90": g.rot90(1, (1, 2)), "diag_embed": r.diag_embed(1),
    "tril_indices": torch.tril_indices(3, 4, 1) + 1,
    "cartesian_prod": torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5])),
    "block_diag": torch.block_diag(r, torch.tensor([[1.]], dtype=torch.float64)),
    "tensordot": torch.tensordot(gf, gf, ([0, 1], [0, 1])), "inner": torch.inner(gf, gf), "cov": r.cov(),
    "corrcoef": r.corrcoef(), "cdist": torch.cdist(r.view(2, 5, 1), r.view(2, 5, 1), 1),
    "count_nonzero": (g % 3).count_nonzero(1), "float_power": g.float_power(0.5),
    "column_stack": torch.column_stack([r[0], r[1]]), "dstack": torch.dstack([r, r]), "diagflat": r.diagflat(-1),
})
for i, p in enumerate(torch.tensor_split(g, [1, 2], 1)):
    theirs[f"tensor_split{i + 1}"] = p
bad = []
for k, t in theirs.items():
    m = meta[k]
    if m["dtype"] != str(t.dtype) or m["shape"] != list(t.shape):
        bad.append(f"{k}: ours {m['dtype']} {m['shape']}, torch's {t.dtype} {list(t.shape)}")
        continue
    raw = np.fromfile(f"{d}/ours/{k}.memmap", dtype=np.uint8)
    o = torch.from_numpy(raw.copy()).view(t.dtype).view(t.shape)
    if t.dtype.is_floating_point:
        same = torch.allclose(o, t, rtol=1e-6, atol=0, equal_nan=True)
    else:
        same = torch.equal(o, t)
    if not same:
        bad.append(f"{k}: ours {o.tolist()}, torch's {t.tolist()}")
print(json.dumps(bad))
]==])
    local out = H.output_lines(("%s %s/check.py %s 2>&1"):format(py, dir, dir))
    assert.are.equal(1, #out, table.concat(out, "\n"))
    assert.are.same({}, require("tensordict.json").decode(out[1]))
    H.rmtree(dir)
  end)
end)
