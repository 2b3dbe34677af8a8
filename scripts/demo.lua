#!/usr/bin/env luajit
-- demo.lua: the main job until the pipeline host exists. It runs a small pipeline on
-- its embedded data (30 rows of Fisher's iris measurements, 10 per species): build a
-- batch, split it by species with views and summarise each with reductions,
-- standardise the features, project them with a seeded random matrix, select rows by
-- a mask, cast to half precision and measure the rounding, round-trip the batch
-- through a file mapping, then run the same data as a TensorDict pipeline: a batch of
-- 30 flowers with nested fields, shuffled, split into minibatches, transformed with
-- apply, filtered by a mask, and collected back into a preallocated buffer.
-- Usage: luajit scripts/demo.lua [output-folder]
local here = (arg and arg[0] or ""):match("^(.*)/scripts/[^/]*$") or "."
package.path = here .. "/lua/?.lua;" .. here .. "/lua/?/init.lua;" .. package.path
local T = require("tensordict")

-- sepal length, sepal width, petal length, petal width (cm); species 1..3
local IRIS = {
  { 5.1, 3.5, 1.4, 0.2 }, { 4.9, 3.0, 1.4, 0.2 }, { 4.7, 3.2, 1.3, 0.2 }, { 4.6, 3.1, 1.5, 0.2 },
  { 5.0, 3.6, 1.4, 0.2 }, { 5.4, 3.9, 1.7, 0.4 }, { 4.6, 3.4, 1.4, 0.3 }, { 5.0, 3.4, 1.5, 0.2 },
  { 4.4, 2.9, 1.4, 0.2 }, { 4.9, 3.1, 1.5, 0.1 },
  { 7.0, 3.2, 4.7, 1.4 }, { 6.4, 3.2, 4.5, 1.5 }, { 6.9, 3.1, 4.9, 1.5 }, { 5.5, 2.3, 4.0, 1.3 },
  { 6.5, 2.8, 4.6, 1.5 }, { 5.7, 2.8, 4.5, 1.3 }, { 6.3, 3.3, 4.7, 1.6 }, { 4.9, 2.4, 3.3, 1.0 },
  { 6.6, 2.9, 4.6, 1.3 }, { 5.2, 2.7, 3.9, 1.4 },
  { 6.3, 3.3, 6.0, 2.5 }, { 5.8, 2.7, 5.1, 1.9 }, { 7.1, 3.0, 5.9, 2.1 }, { 6.3, 2.9, 5.6, 1.8 },
  { 6.5, 3.0, 5.8, 2.2 }, { 7.6, 3.0, 6.6, 2.1 }, { 4.9, 2.5, 4.5, 1.7 }, { 7.3, 2.9, 6.3, 1.8 },
  { 6.7, 2.5, 5.8, 1.8 }, { 7.2, 3.6, 6.1, 2.5 },
}
local SPECIES = { "setosa", "versicolor", "virginica" }

local features = T.tensor(IRIS) -- [30, 4] float32
print(("tensordict %s (ABI %d), library %s"):format(T.version, T.abi_version, T.library_path))
print("features:", table.concat(features:shape(), "x"), features:dtype())

-- Split by species: one view per block of 10 rows, no copy; reductions summarise them.
local by_species = features:view(3, 10, 4)
for s = 1, 3 do
  local petal = by_species[s][{ {}, 3 }]
  print(("%-10s petal length %.1f..%.1f cm, mean %.2f, std %.2f over %d rows"):format(
    SPECIES[s], petal:min(), petal:max(), petal:mean(), petal:std(), petal:size(1)))
end

-- Standardise each feature (broadcasting the column means and stds over the rows).
local standard = (features - features:mean(1)) / features:std(1)
local means, stds = {}, {}
for j, v in ipairs(standard:mean(1):totable()) do means[j] = ("%.0e"):format(v) end
for j, v in ipairs(standard:std(1):totable()) do stds[j] = ("%.3f"):format(v) end
print(("standardised columns: means %s, stds %s"):format(table.concat(means, " "), table.concat(stds, " ")))

-- A seeded random projection to 2 dims (Philox: the same numbers on any machine).
local projection = standard:matmul(T.randn({ 4, 2 }, T.Generator(2024)))
local centroids = projection:view(3, 10, 2):mean(2)
print("projected species centroids:")
print(centroids)

-- Rows selected by a mask: the flowers with petals longer than 5 cm.
local long = features[features[{ {}, 3 }]:gt(5)]
print(("%d flowers have petals longer than 5 cm; their mean sepal length is %.2f cm")
  :format(long:size(1), long[{ {}, 1 }]:mean()))

-- Half precision: what storing the batch in float16 / bfloat16 would cost in accuracy.
local exact = features:to("float64")
for _, dtype in ipairs({ "float16", "bfloat16" }) do
  local worst = ((features:to(dtype):to("float64") - exact):abs() / exact):max()
  print(("%-8s worst relative rounding error %.2e"):format(dtype, worst))
end

-- Column-major layout (one row per feature), as a contiguous copy.
local columns = features:transpose(1, 2):contiguous()
print("column-major:", table.concat(columns:shape(), "x"), "contiguous:", tostring(columns:is_contiguous()))

-- Round-trip through a file mapping: raw little-endian float32, Python tensordict's leaf format.
local folder = arg and arg[1] or os.getenv("TMPDIR") or "/tmp"
local path = folder .. "/iris-features.memmap"
T.from_file(path, features:shape(), "float32", "w+"):copy_(features):free()
local mapped = T.from_file(path, { 30, 4 }, "float32", "r")
local same = mapped:eq(features):all()
print(("file mapping %s: %d bytes, read back %s"):format(path, 30 * 4 * 4, same and "identical" or "DIFFERENT"))
print(mapped[{ { 1, 2 } }])
os.remove(path)
if not same then os.exit(1) end

-- The same flowers as a TensorDict: every field shares the batch dim of 30 rows.
local species = T.arange(1, 3):view(3, 1):expand(3, 10):reshape(30)
local batch = T.TensorDict({
  sepal = features[{ {}, { 1, 2 } }],
  petal = features[{ {}, { 3, 4 } }],
  label = { species = species, is_setosa = species:eq(1) },
  source = "Fisher 1936, 10 flowers per species",
}, { 30 }, { names = { "flower" } })
print(batch)

-- Shuffle (a seeded permutation gathers every field at once), then minibatches of 8.
local order = T.randperm(30, "int64", T.Generator(7))
local shuffled = batch[order]
local minibatches = shuffled:split(8)
print(("%d minibatches of %s flowers"):format(#minibatches,
  table.concat((function()
    local sizes = {}
    for i, mb in ipairs(minibatches) do sizes[i] = #mb end
    return sizes
  end)(), ", ")))

-- A preprocessing step: standardise the float fields of each minibatch with the batch
-- statistics (apply runs the function over every tensor leaf), keep long petals only.
local mean, std = batch:select("sepal", "petal"):mean(1), batch:select("sepal", "petal"):std(1)
local kept = {}
for _, mb in ipairs(minibatches) do
  local scaled = mb:select("sepal", "petal"):apply(function(x, m, s) return (x - m) / s end, mean, std)
  local step = mb:clone()
  step:update(scaled)
  local long_petal = mb.petal[{ {}, 1 }]:gt(5)
  kept[#kept + 1] = step[long_petal]
end
local out = T.cat(kept)
print(("kept %d of 30 flowers with petals longer than 5 cm; labels %s"):format(#out,
  table.concat(out.label.species:totable(), " ")))
print(("their standardised petal length: min %.2f, max %.2f; source field: %s"):format(
  out.petal[{ {}, 1 }]:min(), out.petal[{ {}, 1 }]:max(), out.source))

-- Collect per-species summaries into a preallocated buffer with index assignment.
local summary = T.TensorDict({ sepal = T.zeros(3, 2), petal = T.zeros(3, 2) }, { 3 })
for s = 1, 3 do
  summary[s] = batch:select("sepal", "petal")[batch.label.species:eq(s)]:mean(1)
end
print("per-species means (sepal length, width | petal length, width):")
for s = 1, 3 do
  local row = summary[s]
  print(("  %-10s %.2f %.2f | %.2f %.2f"):format(SPECIES[s], row.sepal[1], row.sepal[2],
    row.petal[1], row.petal[2]))
end
if #out ~= long:size(1) then os.exit(1) end

-- A memmap sink: the shuffled batch saved in Python tensordict's folder layout (atomic:
-- a temporary sibling, fsync, rename), mapped back lazily, and the summaries collected
-- into a preallocated buffer on disk.
local store = folder .. "/iris-tensordict"
shuffled:memmap(store)
local mapped_td = T.load_memmap(store)
local intact = mapped_td:equal(shuffled)
print(("memmap folder %s: %d flowers, %d fields, read back %s"):format(store, #mapped_td,
  #mapped_td:keys({ include_nested = true, leaves_only = true }), intact and "identical" or "DIFFERENT"))
local buffer = summary:memmap_like(folder .. "/iris-summary")
for s = 1, 3 do buffer[s] = summary[s] end
buffer:sync()
summary:consolidate(folder .. "/iris-summary.td") -- tensordict's single-file layout
print(("summary buffer on disk equals the one in memory: %s; as one consolidated file: %s"):format(
  tostring(T.load_memmap(folder .. "/iris-summary"):equal(summary)),
  tostring(T.from_consolidated(folder .. "/iris-summary.td"):equal(summary))))
os.execute(("rm -rf '%s' '%s' '%s'"):format(store, folder .. "/iris-summary", folder .. "/iris-summary.td"))
if not intact then os.exit(1) end
