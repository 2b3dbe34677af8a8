-- torch_sorting_spec.lua: sorting, selection and counting against torch on the same
-- inputs: every function of tensor/sorting.lua, several dtypes, NaN, ties, the long rows'
-- paths. The inputs and our results go to one memmap folder; a Python script reads both,
-- calls torch (0-based on its side: our indices are compared with torch's plus one) and
-- names every result that differs: exactly for integers and indices, within 1e-6 relative
-- for floats. Pending where TD_TORCH_PYTHON (else TD_PYTHON, python3) has no torch.
-- Cases where torch leaves an index unspecified (ties in topk and kthvalue, a row of NaN
-- in nanmedian, mode's ties past 16 elements) are kept out or compared by value.
local T = require("tensordict")
local H = require("helpers")

local nan = 0 / 0

describe("against torch", function()
  local py = os.getenv("TD_TORCH_PYTHON") or os.getenv("TD_PYTHON") or "python3"
  it("gives torch's results for the same calls on the same inputs", function()
    if not H.sh(py .. " -c 'import torch' >/dev/null 2>&1") then
      pending("torch not installed (TD_TORCH_PYTHON): these functions are not cross-checked")
      return
    end
    T.manual_seed(30)
    -- inputs: ties (values rounded), NaN and -0.0 where they matter
    local ties = (T.randn(1000) * 3):round()
    ties[5], ties[500], ties[77] = nan, nan, -0.0
    local long = (T.randn(70000) * 100):round()
    long[3], long[69000] = nan, nan
    local grid = T.randint(-20, 20, { 50, 40 })
    local small = T.randint(0, 5, { 30, 7 })
    local distinct = T.randperm(2000):to("float32"):view(20, 100):mul(0.5)
    local long_distinct = T.randperm(100000):to("float32"):sub(50000)
    local med = (T.randn(9, 11) * 2):round()
    med[2][3], med[4][1], med[4][7] = nan, nan, nan
    local modes = T.randint(0, 3, { 10, 12 })
    local qx = T.randn(5, 13, "float64")
    qx[3][4] = nan
    local qx32 = T.randn(6, 9)
    local uf = (T.randn(500) * 2):round()
    uf[10], uf[11], uf[300], uf[301] = nan, nan, -0.0, 0
    local uwide = T.randint(-3e9, 3e9, { 300 }):view(-1)
    uwide[{ { 1, 100 } }] = uwide[{ { 101, 200 } }]
    local udim = T.randint(0, 2, { 10, 3 })
    local runs = T.arange(1, 60):div(7):floor()
    runs[20] = nan
    local hx = T.randn(10000)
    local hx64 = T.randn(3000, "float64")
    local hx16 = T.randn(1000):to("float16")
    local bins = T.randint(0, 50, { 1000 })
    local weights = T.rand(1000)
    local seq = T.randn(1000):sort()
    local seq2 = T.randn(4, 50):sort(2)
    local svals = T.randn(5000)
    local svals2 = T.randn(4, 30)
    local unsorted = T.randn(200)
    local inputs = {
      ties = ties, long = long, grid = grid, small = small, distinct = distinct,
      long_distinct = long_distinct, med = med, modes = modes, qx = qx, qx32 = qx32, uf = uf,
      uwide = uwide, udim = udim, runs = runs, hx = hx, hx64 = hx64, hx16 = hx16, bins = bins,
      weights = weights, seq = seq, seq2 = seq2, svals = svals, svals2 = svals2, unsorted = unsorted,
    }
    local q = T.tensor({ 0, 0.1, 0.25, 0.5, 0.6, 1 }, "float64")
    local ours = {}
    local function put(name, ...)
      local results = { ... }
      for i, r in ipairs(results) do ours[i == 1 and name or (name .. "_" .. i)] = r end
    end
    put("sort_ties", ties:sort())
    put("sort_ties_desc", ties:sort(1, true))
    put("sort_long", long:sort())
    put("sort_long_desc", long:sort(1, true))
    put("sort_grid", grid:sort(2, true))
    put("sort_grid0", grid:sort(1))
    for _, dtype in ipairs({ "bool", "uint8", "int8", "int16", "int32", "float16", "bfloat16", "float64" }) do
      put("sort_" .. dtype, small:to(dtype):sort(1))
      put("sortd_" .. dtype, small:to(dtype):sort(2, true))
    end
    ours.argsort = grid:argsort(2)
    put("topk", distinct:topk(5))
    put("topk_small", distinct:topk(7, 2, false))
    put("topk_dim1", distinct:topk(3, 1))
    put("topk_heap", long_distinct:topk(10))
    put("topk_select", long_distinct:topk(3000, 1, false))
    put("kth", distinct:kthvalue(17, 2))
    put("kth_dim1", distinct:kthvalue(4, 1, true))
    put("median", med:median(2))
    put("median0", med:median(1, true))
    ours.median_all = T.tensor(med:median())
    ours.median_clean = T.tensor(med:nan_to_num():median())
    put("nanmedian", med:nanmedian(2))
    ours.nanmedian_all = T.tensor(med:nanmedian())
    put("mode", modes:mode(2))
    put("mode0", modes:mode(1, true))
    for _, how in ipairs({ "linear", "lower", "higher", "midpoint", "nearest" }) do
      ours["q_" .. how] = qx:quantile(q, 2, false, how)
      ours["nq_" .. how] = qx:nanquantile(q, 2, false, how)
    end
    ours.q_dim0 = qx:quantile(q, 1, true)
    ours.q_all = qx:quantile(q)
    ours.q_scalar = qx32:quantile(0.3, 2)
    ours.q_keep = qx32:quantile(T.tensor({ 0.2, 0.7 }), 1, true)
    put("unique_f", uf:unique(true, true, true))
    put("unique_wide", uwide:unique(true, true, true))
    put("unique_grid", grid:unique(true, true, true))
    put("unique_bool", small:gt(2):unique(true, true, true))
    put("unique_dim0", udim:unique(true, true, true, 1))
    put("unique_dim1", udim:t():contiguous():unique(true, true, true, 2))
    put("consec", runs:unique_consecutive(true, true))
    put("consec_dim", udim:unique_consecutive(true, true, 1))
    ours.histc = hx:histc(30)
    ours.histc64 = hx64:histc(17, -1, 2.5)
    ours.histc16 = hx16:histc(20)
    ours.bincount = bins:bincount()
    ours.bincount_min = bins:to("uint8"):bincount(nil, 80)
    ours.bincount_w = bins:bincount(weights)
    ours.bincount_w64 = bins:bincount(weights:to("float64"), 3)
    ours.ss_left = seq:searchsorted(svals)
    ours.ss_right = seq:searchsorted(svals, { right = true })
    ours.ss_rows = seq2:searchsorted(svals2, { side = "right" })
    ours.ss_sorter = unsorted:searchsorted(svals, { sorter = unsorted:argsort() })
    ours.ss_int32 = seq:searchsorted(svals, { out_int32 = true })
    ours.ss_int = grid:view(-1):sort():searchsorted(T.tensor({ -3.5, 0, 7.25, 100 }))
    ours.bucketize = svals:bucketize(seq)
    ours.bucketize_r = svals2:bucketize(seq, true)
    local all = {}
    for k, v in pairs(inputs) do all["in_" .. k] = v end
    for k, v in pairs(ours) do all[k] = v end
    local dir = H.tmpdir()
    T.TensorDict(all, {}):memmap(dir .. "/ours")
    H.write(dir .. "/check.py", [==[
import json, sys, numpy as np, torch
d = sys.argv[1]
meta = json.load(open(d + "/ours/meta.json"))
meta = {k: m for k, m in meta.items() if isinstance(m, dict) and "dtype" in m}  # the leaves
def load(k):
    m = meta[k]
    dt = getattr(torch, m["dtype"].split(".")[-1])
    raw = np.fromfile(f"{d}/ours/{k}.memmap", dtype=np.uint8)
    return torch.from_numpy(raw.copy()).view(dt).view(m["shape"])
I = {k[3:]: load(k) for k in meta if k.startswith("in_")}
q = torch.tensor([0, 0.1, 0.25, 0.5, 0.6, 1], dtype=torch.float64)
theirs = {}
def put(name, r, plus=()):
    if isinstance(r, torch.Tensor):
        r = (r,)
    for i, x in enumerate(r):
        key = name if i == 0 else f"{name}_{i + 1}"
        theirs[key] = x + 1 if i in plus else x
S = dict(stable=True)
put("sort_ties", torch.sort(I["ties"], **S), (1,))
put("sort_ties_desc", torch.sort(I["ties"], descending=True, **S), (1,))
put("sort_long", torch.sort(I["long"], **S), (1,))
put("sort_long_desc", torch.sort(I["long"], descending=True, **S), (1,))
put("sort_grid", torch.sort(I["grid"], dim=1, descending=True, **S), (1,))
put("sort_grid0", torch.sort(I["grid"], dim=0, **S), (1,))
for dt in ["bool", "uint8", "int8", "int16", "int32", "float16", "bfloat16", "float64"]:
    x = I["small"].to(getattr(torch, dt))
    put("sort_" + dt, torch.sort(x, dim=0, **S), (1,))
    put("sortd_" + dt, torch.sort(x, dim=1, descending=True, **S), (1,))
theirs["argsort"] = torch.argsort(I["grid"], dim=1, stable=True) + 1
put("topk", torch.topk(I["distinct"], 5), (1,))
put("topk_small", torch.topk(I["distinct"], 7, dim=1, largest=False), (1,))
put("topk_dim1", torch.topk(I["distinct"], 3, dim=0), (1,))
put("topk_heap", torch.topk(I["long_distinct"], 10), (1,))
put("topk_select", torch.topk(I["long_distinct"], 3000, largest=False), (1,))
put("kth", torch.kthvalue(I["distinct"], 17, dim=1), (1,))
put("kth_dim1", torch.kthvalue(I["distinct"], 4, dim=0, keepdim=True), (1,))
put("median", torch.median(I["med"], dim=1), (1,))
put("median0", torch.median(I["med"], dim=0, keepdim=True), (1,))
theirs["median_all"] = torch.median(I["med"])
theirs["median_clean"] = torch.median(torch.nan_to_num(I["med"]))
nm = torch.nanmedian(I["med"], dim=1)
theirs["nanmedian"], theirs["nanmedian_2"] = nm.values, nm.indices + 1
theirs["nanmedian_all"] = torch.nanmedian(I["med"])
put("mode", torch.mode(I["modes"], dim=1), (1,))
put("mode0", torch.mode(I["modes"], dim=0, keepdim=True), (1,))
for how in ["linear", "lower", "higher", "midpoint", "nearest"]:
    theirs["q_" + how] = torch.quantile(I["qx"], q, dim=1, interpolation=how)
    theirs["nq_" + how] = torch.nanquantile(I["qx"], q, dim=1, interpolation=how)
theirs["q_dim0"] = torch.quantile(I["qx"], q, dim=0, keepdim=True)
theirs["q_all"] = torch.quantile(I["qx"], q)
theirs["q_scalar"] = torch.quantile(I["qx32"], 0.3, dim=1)
theirs["q_keep"] = torch.quantile(I["qx32"], torch.tensor([0.2, 0.7]), dim=0, keepdim=True)
U = dict(sorted=True, return_inverse=True, return_counts=True)
put("unique_f", torch.unique(I["uf"], **U), (1,))
put("unique_wide", torch.unique(I["uwide"], **U), (1,))
put("unique_grid", torch.unique(I["grid"], **U), (1,))
put("unique_bool", torch.unique(I["small"] > 2, **U), (1,))
put("unique_dim0", torch.unique(I["udim"], dim=0, **U), (1,))
put("unique_dim1", torch.unique(I["udim"].t().contiguous(), dim=1, **U), (1,))
put("consec", torch.unique_consecutive(I["runs"], return_inverse=True, return_counts=True), (1,))
put("consec_dim", torch.unique_consecutive(I["udim"], return_inverse=True, return_counts=True, dim=0), (1,))
theirs["histc"] = torch.histc(I["hx"], 30)
theirs["histc64"] = torch.histc(I["hx64"], 17, -1, 2.5)
theirs["histc16"] = torch.histc(I["hx16"], 20)
theirs["bincount"] = torch.bincount(I["bins"])
theirs["bincount_min"] = torch.bincount(I["bins"].to(torch.uint8), minlength=80)
theirs["bincount_w"] = torch.bincount(I["bins"], I["weights"])
theirs["bincount_w64"] = torch.bincount(I["bins"], I["weights"].double(), 3)
theirs["ss_left"] = torch.searchsorted(I["seq"], I["svals"]) + 1
theirs["ss_right"] = torch.searchsorted(I["seq"], I["svals"], right=True) + 1
theirs["ss_rows"] = torch.searchsorted(I["seq2"], I["svals2"], side="right") + 1
theirs["ss_sorter"] = torch.searchsorted(I["unsorted"], I["svals"], sorter=torch.argsort(I["unsorted"])) + 1
theirs["ss_int32"] = torch.searchsorted(I["seq"], I["svals"], out_int32=True) + 1
theirs["ss_int"] = torch.searchsorted(torch.sort(I["grid"].reshape(-1)).values, torch.tensor([-3.5, 0, 7.25, 100])) + 1
theirs["bucketize"] = torch.bucketize(I["svals"], I["seq"]) + 1
theirs["bucketize_r"] = torch.bucketize(I["svals2"], I["seq"], right=True) + 1
bad = []
for k in sorted(set(theirs) | set(k for k in meta if not k.startswith("in_"))):
    if k not in theirs or k not in meta:
        bad.append(f"{k}: on one side only")
        continue
    t, m = theirs[k], meta[k]
    if m["dtype"] != str(t.dtype) or m["shape"] != list(t.shape):
        bad.append(f"{k}: ours {m['dtype']} {m['shape']}, torch's {t.dtype} {list(t.shape)}")
        continue
    o = load(k)
    if t.dtype.is_floating_point:
        same = torch.allclose(o.double(), t.double(), rtol=1e-6, atol=1e-12, equal_nan=True)
    else:
        same = torch.equal(o, t)
    if not same:
        diff = (o != t).nonzero()[:3].tolist() if o.shape == t.shape else "?"
        bad.append(f"{k}: differs at {diff}")
print(json.dumps(bad))
]==])
    local out = H.output_lines(("%s %s/check.py %s 2>&1"):format(py, dir, dir))
    assert.are.equal(1, #out, table.concat(out, "\n"))
    assert.are.same({}, require("tensordict.json").decode(out[1]))
    H.rmtree(dir)
  end)
end)
