-- torch_ops_spec.lua: every unary and binary op of the op table against torch on the
-- same inputs (seeded values and the special ones: signed zeros, infinities, NaN, huge
-- and tiny; a binary op takes them against the same values reversed), every dtype: the
-- result dtype, the refusals, and the values (integer and bool results exactly, floats
-- within a few ulp of the dtype). Inputs go to Python as raw files, results come back
-- so. Skipped and counted when TD_TORCH_PYTHON (else TD_PYTHON, else python3) has no
-- torch.
local T = require("tensordict")
local helpers = require("helpers")
local json = require("tensordict.json")
local ops = require("tensordict.tensor.ops")

local DTYPES = { "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64" }
-- The tolerance of a float result: relative, as a few ulp of the dtype (SLEEF and glibc
-- are within 1-1.5 ulp of the exact value, so of each other within 3).
local RTOL = { float16 = 2e-3, bfloat16 = 1.6e-2, float32 = 1e-6, float64 = 1e-14 }
-- torch's digamma is itself off by up to ~2e3 ulp next to its zeros (psi(-0.5) in float32
-- by 16 ulp, psi(-0.999) in float64 by 2e-14 relative): its recurrence cancels and its cot
-- takes an unreduced argument; next to a zero its error is absolute (OP_ATOL). Ours is
-- checked against exact values in special_functions_spec.
local OP_RTOL = { digamma = { float16 = 2e-3, bfloat16 = 1.6e-2, float32 = 1e-5, float64 = 1e-12 } }
local OP_ATOL = { digamma = { float16 = 1e-3, bfloat16 = 1e-2, float32 = 1e-6, float64 = 1e-14 } }

local function inputs(dtype)
  local v = {}
  if dtype == "bool" then
    v = { true, false, true, true, false }
  elseif dtype:match("int") then
    local lo = dtype == "uint8" and 0 or -100
    for i = 1, 40 do v[i] = math.random(lo, 100) end
  else
    v = { 0, -0.0, 1 / 0, -1 / 0, 0 / 0, 0.5, -0.5, 1, -1, 2.5, -2.5, 3.75, -7.25, 1e-3, -1e-3, 0.999, -0.999 }
    if dtype == "float32" or dtype == "float64" then
      for _, x in ipairs({ 1e30, -1e30, 1e-30, 88.5, -88.5, 700, 1e10 }) do v[#v + 1] = x end
    end
    for _ = 1, 40 do v[#v + 1] = (math.random() - 0.5) * 12 end
  end
  return T.tensor(v, dtype)
end

describe("elementwise ops against torch", function()
  local py = os.getenv("TD_TORCH_PYTHON") or os.getenv("TD_PYTHON") or "python3"
  it("give torch's dtypes, refusals and values on every dtype", function()
    if not helpers.sh(py .. " -c 'import torch' >/dev/null 2>&1") then
      pending("torch not installed (TD_TORCH_PYTHON): the unary ops are not cross-checked")
      return
    end
    math.randomseed(30)
    local dir = helpers.tmpdir()
    local names, arity = {}, {}
    for name in pairs(ops.UNARY) do names[#names + 1], arity[name] = name, 1 end
    for name in pairs(ops.BINARY) do names[#names + 1], arity[name] = name, 2 end
    table.sort(names)
    local manifest = { ops = names, arity = arity, inputs = {} }
    local xs, ys = {}, {}
    for _, dtype in ipairs(DTYPES) do
      local x = inputs(dtype)
      local v, r = x:totable(), {}
      for i = #v, 1, -1 do r[#r + 1] = v[i] end
      xs[dtype], ys[dtype] = x, T.tensor(r, dtype)
      -- a memmap folder's leaf files are the raw bytes
      T.TensorDict({ x = x, y = ys[dtype] }, { x:numel() }):memmap(("%s/in_%s"):format(dir, dtype))
      manifest.inputs[#manifest.inputs + 1] = { dtype = dtype, n = x:numel() }
    end
    helpers.write(dir .. "/manifest.json", json.encode(manifest))
    helpers.write(dir .. "/run.py", [[
import json, sys, numpy as np, torch
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
out = {}
for inp in m["inputs"]:
    dt = getattr(torch, inp["dtype"])
    x, y = [torch.from_numpy(np.fromfile(f"{d}/in_{inp['dtype']}/{k}.memmap", dtype=np.uint8)).view(dt)
            for k in ("x", "y")]
    for op in m["ops"]:
        key = f"{op}_{inp['dtype']}"
        try:
            r = getattr(torch, op)(x) if m["arity"][op] == 1 else getattr(torch, op)(x, y)
        except Exception as e:
            out[key] = {"error": str(e).splitlines()[0]}
            continue
        r.contiguous().view(torch.uint8).numpy().tofile(f"{d}/out_{key}.bin")
        out[key] = {"dtype": str(r.dtype).replace("torch.", "")}
json.dump(out, open(d + "/results.json", "w"))
print("ok")
]])
    local got = helpers.output_lines(("%s %s/run.py %s 2>&1"):format(py, dir, dir))
    assert.are.same({ "ok" }, got)
    local results = json.decode(helpers.read(dir .. "/results.json"))
    local checked, problems = 0, {}
    for _, dtype in ipairs(DTYPES) do
      for _, op in ipairs(names) do
        local key = op .. "_" .. dtype
        local want = results[key]
        local x, y = xs[dtype], ys[dtype]
        local ok, r = pcall(function()
          if arity[op] == 1 then return x[op](x) end
          return x[op](x, y)
        end)
        if want.error then
          if ok then
            problems[#problems + 1] = ("%s: torch refuses (%s), we give %s"):format(key, want.error, r:dtype())
          end
        elseif not ok then
          problems[#problems + 1] = ("%s: torch gives %s, we refuse: %s"):format(key, want.dtype, tostring(r))
        elseif r:dtype() ~= want.dtype then
          problems[#problems + 1] = ("%s: dtype %s, torch's %s"):format(key, r:dtype(), want.dtype)
        else
          local theirs = T.from_file(("%s/out_%s.bin"):format(dir, key), { r:numel() }, want.dtype):totable()
          local ours = r:totable()
          for i = 1, #ours do
            local a, b = ours[i], theirs[i]
            local same
            if type(a) == "boolean" or not RTOL[want.dtype] then
              same = a == b
            elseif a ~= a or b ~= b then
              same = a ~= a and b ~= b
            elseif a == b then
              same = true
            else
              local rtol = (OP_RTOL[op] or RTOL)[want.dtype]
              same = math.abs(a - b) <= rtol * math.max(math.abs(a), math.abs(b), 1e-300)
                or math.abs(a - b) <= (OP_ATOL[op] and OP_ATOL[op][want.dtype] or 1e-30)
            end
            if not same then
              local xv, yv = x:to("float64"):totable()[i], y:to("float64"):totable()[i]
              problems[#problems + 1] = ("%s: element %d (x = %.17g, y = %.17g): ours %s, torch's %s"):format(
                key, i, xv, yv, tostring(a), tostring(b))
              break
            end
          end
          checked = checked + 1
        end
      end
    end
    assert.are.same({}, problems)
    assert.truthy(checked > 350, "cases compared: " .. checked)
    helpers.rmtree(dir)
  end)
end)
