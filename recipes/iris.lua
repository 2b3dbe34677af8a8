-- iris.lua: a recipe kept as Lua, so its steps may hold functions. Fisher's iris
-- measurements (recipes/data/iris.csv, 10 flowers per species) are read in batches,
-- standardised with running statistics, the flowers with petals longer than 5 cm kept,
-- and the result written to a memmap folder.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
return {
  name = "iris",
  seed = 0,
  batch_size = 8,
  vars = { out = "/tmp/tdflow-demo" },
  source = {
    use = "CsvSource", path = here .. "/data/iris.csv",
    columns = { sepal = { "sepal_length", "sepal_width" }, petal = { "petal_length", "petal_width" },
                species = "int64" },
  },
  steps = {
    { use = "Module", in_keys = { "petal" }, out_keys = { "long_petal" },
      fn = function(petal) return petal[{ {}, 1 }]:gt(5) end },
    { use = "Normalize", keys = { "sepal", "petal" }, out_keys = { "sepal_z", "petal_z" } },
    { use = "Filter", where = "long_petal" },
    { use = "Rebatch", size = 16 },
  },
  sink = { use = "MemmapSink", path = "${vars.out}/iris", existsok = true },
}
