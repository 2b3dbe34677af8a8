-- recipe_check.lua: the Lua half of the recipe fuzz target (tests/fuzz/fuzz_recipe.c),
-- loaded once by the harness's embedded LuaJIT. It returns check(path): the recipe at
-- path (JSON text the fuzzer wrote) goes through recipe.check, what `tdflow check` runs:
-- reading (the JSON reader, duplicate keys, UTF-8), --set-free validation of every field
-- and parameter, $vars, building every node (their own checks), preflight and the key
-- flow (input: the text at path). The oracle is the tdflow contract: check returns a list of problems, each a
-- plain message; it never raises, and no problem is a Lua error from inside the library
-- (an "attempt to ..." or a position in one of its files). check returns nil when the
-- input keeps the contract, else the finding's text.
local recipe = require("tensordict.host.recipe")

-- What only a Lua error from inside the library says: Lua's own wording, and a position
-- in one of the library's files (patterns).
local INTERNAL = { "attempt to ", "stack traceback", "bad argument #", "lua/tensordict/[%w_/]+%.lua:%d+:",
  "plugins/[%w_]+%.lua:%d+:" }

-- Whether a problem says what only an internal error says. Problems quote the recipe's
-- own text ("line 2, column 5: invalid JSON near '...'", a key's name), so wording the
-- input itself holds proves nothing.
local function internal(problem, input)
  for i, pattern in ipairs(INTERNAL) do
    if problem:find(pattern, 1, i <= 3) and not input:find(pattern, 1, i <= 3) then return true end
  end
  return false
end

return function(path, input)
  local ok, problems = pcall(recipe.check, path)
  if not ok then return "recipe.check raised: " .. tostring(problems) end
  if type(problems) ~= "table" then return "recipe.check returned " .. type(problems) end
  for i, pb in ipairs(problems) do
    if type(pb) ~= "string" then return ("problem %d is a %s"):format(i, type(pb)) end
    if internal(pb, input) then return ("problem %d is an internal error: %s"):format(i, pb) end
  end
  return nil
end
