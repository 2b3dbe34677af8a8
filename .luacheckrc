-- luacheck settings: 'luacheck .' from the repo root.
std = "luajit"
max_line_length = 120
exclude_files = { "lua/tensordict/cdefs.lua", "build/" }
files["tests/spec"] = { std = "+busted" }
