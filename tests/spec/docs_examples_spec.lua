-- docs_examples_spec.lua: every code block of README.md and docs/*.md runs and shows
-- what it says (docs/building.md, "The examples in the docs"):
--   ```lua         runs with scripts/tdlua in a fresh folder (recipes/, plugins/ and
--                  tests/ linked in); what it prints must be what its `-->` comments
--                  show, line by line, in order
--   ```json        a recipe: `tdflow check` says ok
--   ```sh, and     commands: each line runs in a fresh folder (scripts/ linked in too)
--   indented ones  with no input, and exits 0
--   `$ ` / `> `    a tdrepl session: the lines after `>` and `>>` are typed, the rest is
--                  what tdrepl prints
--   anything else  needs `<!-- output of: COMMAND -->`: COMMAND (from the root) prints it
-- An HTML comment on the line before a block (blank lines between allowed) changes it:
--   <!-- illustrative: REASON -->   not run, for the reason given
--   <!-- setup: LUA -->             LUA runs before the block (names the prose defines)
--   <!-- prelude -->                this Lua block also runs before each later one
-- In what a block shows, a line "..." stands for any lines, and a line ending in "..."
-- for any line starting with the rest; runs of spaces and tabs compare as one space.
local H = require("helpers")
local repl = require("tensordict.repl")

local root = H.pwd()

local DOCS = { "README.md" }
for _, name in ipairs(H.output_lines("ls docs/*.md")) do DOCS[#DOCS + 1] = name end

---------------------------------------------------------------------------- parsing

local function split_lines(text)
  local out = {}
  for line in (text .. "\n"):gmatch("(.-)\n") do out[#out + 1] = line end
  return out
end

-- The lines a command printed (none for no output).
local function printed(text)
  text = text:gsub("\n$", "")
  return text == "" and {} or split_lines(text)
end

-- The HTML comment above line i (blank lines skipped), as kind and text.
local function marker_above(lines, i)
  local j = i - 1
  while j >= 1 and lines[j]:match("^%s*$") do j = j - 1 end
  local c = j >= 1 and lines[j]:match("^%s*<!%-%-%s*(.-)%s*%-%->%s*$")
  if not c then return nil end
  local kind, text = c:match("^([%w ]+):%s*(.*)$")
  if kind then return { kind = kind, text = text } end
  return { kind = c, text = "" }
end

-- The blocks of a markdown text: {line =, info =, body = {lines}, indented =, marker =}.
local function blocks_of(text)
  local lines, blocks, i = split_lines(text), {}, 1
  while i <= #lines do
    local indent, info = lines[i]:match("^( *)```(%S*)%s*$")
    if info then
      local j = i + 1
      while j <= #lines and not lines[j]:match("^ *```%s*$") do j = j + 1 end
      local body = {}
      for k = i + 1, j - 1 do body[#body + 1] = lines[k]:sub(#indent + 1) end
      blocks[#blocks + 1] = { line = i, info = info, body = body, marker = marker_above(lines, i) }
      i = j + 1
    elseif lines[i]:match("^    %S") and (i == 1 or lines[i - 1]:match("^%s*$")) then
      local j, body = i, {}
      while j <= #lines and (lines[j]:match("^    ") or (lines[j]:match("^%s*$") and lines[j + 1]
        and lines[j + 1]:match("^    %S"))) do
        body[#body + 1] = lines[j]:sub(5)
        j = j + 1
      end
      blocks[#blocks + 1] = { line = i, info = "", body = body, indented = true, marker = marker_above(lines, i) }
      i = j
    else
      i = i + 1
    end
  end
  return blocks
end

------------------------------------------------------------------------- comparing

local function norm(s) return (s:gsub("[ \t]+", " "):gsub("^ ", ""):gsub(" $", "")) end

-- Whether actual (a list of lines) is what expected shows, "..." lines and line ends
-- matching as the header says.
local function lines_match(expected, actual, e, a)
  e, a = e or 1, a or 1
  if e > #expected then return a > #actual end
  local want = norm(expected[e])
  if want == "..." then
    for k = a, #actual + 1 do
      if lines_match(expected, actual, e + 1, k) then return true end
    end
    return false
  end
  if a > #actual then return false end
  local got = norm(actual[a])
  local prefix = want:match("^(.-)%s?%.%.%.$")
  local ok = got == want or (prefix and got:sub(1, #prefix) == prefix)
  return ok and lines_match(expected, actual, e + 1, a + 1)
end

local function assert_shows(expected, actual, what)
  if not lines_match(expected, actual) then
    error(("%s shows:\n  %s\nbut gives:\n  %s"):format(what, table.concat(expected, "\n  "),
      table.concat(actual, "\n  ")), 2)
  end
end

-------------------------------------------------------------------------- running

-- Output and exit code of a shell command; stderr with it unless split is set, when
-- it comes back third.
local function sh(cmd, split)
  local err = H.tmpname()
  local p = io.popen(("(%s) %s; echo \"<rc=$?>\""):format(cmd, split and ("2>" .. err) or "2>&1"))
  local out = p:read("*a")
  p:close()
  local body, code = out:match("^(.*)<rc=(%d+)>\n$")
  local errtext = split and (H.read(err) or "") or nil
  os.remove(err)
  return body, tonumber(code), errtext
end

-- A fresh folder for a block to run in, with the tree's recipes/, plugins/, scripts/
-- and tests/.
local function scratch()
  local dir = H.tmpdir()
  for _, name in ipairs({ "recipes", "plugins", "scripts", "tests" }) do
    assert(H.sh(("ln -s '%s/%s' '%s/%s'"):format(root, name, dir, name)))
  end
  return dir
end

-- What a Lua block shows: the text after `-->` on each line, in order.
local function shown_by(body)
  local out = {}
  for _, line in ipairs(body) do
    local text = line:match("%-%->%s?(.*)$")
    if text then out[#out + 1] = text end
  end
  return out
end

local function run_lua(block, prelude)
  local code = table.concat(block.body, "\n")
  local setup = block.marker and block.marker.kind == "setup" and block.marker.text or ""
  local head = table.concat(prelude, "\n") .. "\n" .. setup .. "\n"
  local chunk = head .. code
  if not loadstring(chunk) then
    local _, err = loadstring(chunk)
    chunk = head .. "return " .. code -- an expression shown on its own
    assert(loadstring(chunk), "does not compile: " .. tostring(err))
  end
  local dir = scratch()
  local file = H.write(dir .. "/example.lua", chunk .. "\n")
  local out, code_, err = sh(("cd '%s' && '%s/scripts/tdlua' example.lua < /dev/null"):format(dir, root), true)
  H.rmtree(dir)
  assert(code_ == 0 and err == "", ("exits %s:\n%s%s"):format(tostring(code_), out, err))
  assert_shows(shown_by(block.body), printed(out), "the block")
  return file
end

local function run_json(block)
  local dir = scratch()
  H.write(dir .. "/recipe.json", table.concat(block.body, "\n"))
  local out, code = sh(("cd '%s' && '%s/scripts/tdflow' check recipe.json"):format(dir, root))
  H.rmtree(dir)
  assert(code == 0 and out:find("tdflow: recipe.json: ok", 1, true), "tdflow check:\n" .. out)
end

local function run_commands(block)
  local dir = scratch()
  for _, line in ipairs(block.body) do
    local cmd = line:gsub("%s+#.*$", "")
    if not cmd:match("^%s*$") then
      local input = cmd:find("<", 1, true) and "" or " < /dev/null" -- its own input, or none
      local out, code = sh(("cd '%s' && %s%s"):format(dir, cmd, input))
      assert(code == 0, ("%s\nexits %d:\n%s"):format(cmd, code, out))
    end
  end
  H.rmtree(dir)
end

-- A tdrepl session: typed lines after "> " and ">> ", the rest what it prints (after
-- the banner when the block starts with `$ scripts/tdrepl`).
local function run_session(block)
  local st, body = repl.new(), block.body
  local got, want, from = {}, {}, 1
  if body[1]:match("^%$ ") then
    got[1] = (repl.banner():gsub("\n$", ""))
    from = 2
  end
  for i = from, #body do
    want[#want + 1] = body[i]
    local typed = body[i]:match("^>>? (.*)$")
    if typed then
      got[#got + 1] = repl.prompt(st) .. typed
      local text = repl.eval_line(st, typed)
      if text ~= "" then
        for _, l in ipairs(split_lines((text:gsub("\n$", "")))) do got[#got + 1] = l end
      end
    end
  end
  repl.close(st)
  assert_shows(want, got, "the session")
end

local function run_output(block)
  local out, code = sh(("cd '%s' && %s < /dev/null"):format(root, block.marker.text))
  assert(code == 0, ("%s\nexits %d:\n%s"):format(block.marker.text, code, out))
  assert_shows(block.body, printed(out), "the block")
end

local COMMAND = { "^scripts/", "^bash ", "^make ", "^make$", "^luajit ", "^luarocks ", "^[%u_]+=%S* " }

local function is_command(line)
  for _, p in ipairs(COMMAND) do
    if line:match(p) then return true end
  end
  return false
end

-- What to do with a block: "skip" with the reason, or a function that runs it.
local function plan(block, prelude)
  local m = block.marker
  if m and m.kind == "illustrative" then return "skip", m.text end
  if block.info == "lua" then return function() run_lua(block, prelude) end end
  if block.info == "json" then return function() run_json(block) end end
  local first = block.body[1] or ""
  if first:match("^%$ scripts/tdrepl") or first:match("^> ") then return function() run_session(block) end end
  if m and m.kind == "output of" then return function() run_output(block) end end
  if block.info == "sh" or (block.info == "" and is_command(first)) then
    return function() run_commands(block) end
  end
  return nil
end

describe("the examples in README.md and docs/", function()
  for _, doc in ipairs(DOCS) do
    local prelude = {}
    for _, block in ipairs(blocks_of(assert(H.read(doc)))) do
      local where = ("%s:%d"):format(doc, block.line)
      local check, why = plan(block, { unpack(prelude) })
      if check == "skip" then
        it(where .. " is marked illustrative, with a reason", function()
          assert.is_truthy(why:match("%S"), where .. ": <!-- illustrative: --> needs a reason")
        end)
      elseif check then
        it(where .. " runs and shows what it says", check)
      else
        it(where .. " is a block the spec can run, or is marked", function()
          error(where .. ": a block of neither Lua, JSON, commands nor a tdrepl session; give it "
            .. "<!-- output of: COMMAND --> or <!-- illustrative: REASON -->")
        end)
      end
      if block.info == "lua" and block.marker and block.marker.kind == "prelude" then
        prelude[#prelude + 1] = table.concat(block.body, "\n")
      end
    end
  end
end)
