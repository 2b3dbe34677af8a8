-- luacheck settings; `make lint` (run by `make test`) checks the whole tree with them.
std = "luajit"
max_line_length = 120
-- Methods keep the colon of their interface even when they do not read self
-- (function Node:abort() end).
self = false
-- `not (x < y)` is how a NaN-safe comparison reads here: NaN must fail the check.
ignore = { "581" }
exclude_files = { "lua/tensordict/cdefs.lua", "lua/tensordict/cdefs_mpi.lua", "build/" }
files["tests/spec"] = { std = "+busted" }
