-- host/rerun.lua: `tdflow rerun OUTPUT`: the run recorded in an output folder's
-- provenance record (host/provenance.lua) run again: the recipe as it was read, its
-- recorded overrides and options, then any new --set, into a new path. With --verify
-- the new output is compared with the recorded one byte for byte: every leaf file and
-- meta.json, and of the provenance records what made the run (recipe, seed, rows), not
-- the times, host or paths.
local util = require("tensordict.util")
local json = require("tensordict.json")
local fs = require("tensordict.fs")
local provenance = require("tensordict.host.provenance")
local progress = require("tensordict.host.progress")

local M = {}

function M.add_command(p, count_arg)
  local c = p:command("rerun", "Run the recipe recorded in an output folder again, with its recorded "
    .. "overrides; --verify says whether the bytes are identical.")
  c:argument("output", "A folder written by tdflow run (it holds " .. provenance.FILE .. ").")
  c:option("--into", "Where the new output goes (default: OUTPUT.rerun; with --verify, a temporary "
    .. "folder beside OUTPUT, removed when the bytes are identical)."):argname("PATH")
  c:option("--set", "Override a recorded value: PATH=VALUE, after the recorded ones; repeatable.")
    :count("*"):argname("PATH=VALUE")
  c:option("--workers", "Worker processes for Map steps (default: the recorded run's).")
    :convert(count_arg("--workers"))
  c:flag("--verify", "Compare the new output with OUTPUT: every leaf file and meta.json byte for byte, "
    .. "and what made them (the provenance records without times, host and paths); exit 1 when they differ.")
  c:flag("-q --quiet", "No progress and no report table.")
  c:option("--report", "Also write the rerun's report as JSON to FILE."):argname("FILE")
end

local function say(out, text)
  out:write(text, "\n")
  out:flush()
end


-- The first difference between files a and b (their sizes, or the first byte that
-- differs), or nil when they are equal; bytes compared in *total.
local function file_difference(a, b, total)
  local fa, fb = io.open(a, "rb"), io.open(b, "rb")
  if not fa or not fb then
    if fa then fa:close() end
    if fb then fb:close() end
    return "cannot be read"
  end
  local sa, sb = fa:seek("end"), fb:seek("end")
  fa:seek("set")
  fb:seek("set")
  local why
  if sa ~= sb then
    why = ("%d bytes there, %d here"):format(sa, sb)
  else
    local at = 0
    while true do
      local x, y = fa:read(1048576), fb:read(1048576)
      if x == nil then break end
      if x ~= y then
        local i = 1
        while x:byte(i) == y:byte(i) do i = i + 1 end
        why = ("the first difference is at byte %s of %s"):format(progress.grouped(at + i - 1),
          progress.grouped(sa))
        break
      end
      at = at + #x
    end
    total.bytes = total.bytes + sa
  end
  fa:close()
  fb:close()
  return why
end

-- What made a run, of its provenance record: what a rerun must repeat.
local function made_of(rec)
  local nodes = {}
  for i, n in ipairs(rec.nodes or {}) do
    nodes[i] = { n.where, n.type, n.batches_in, n.rows_in, n.batches_out, n.rows_out }
  end
  return json.encode({ recipe = rec.recipe or json.null, seed = rec.seed or json.null,
    rows_in = rec.rows_in or json.null, rows_out = rec.rows_out or json.null,
    batches_in = rec.batches_in or json.null, batches_out = rec.batches_out or json.null, nodes = nodes })
end

-- The first difference between the output folders a (recorded) and b (the rerun), or
-- nil; total counts the files and bytes compared. rel: the folder inside both.
local function tree_difference(a, b, total, rel)
  local la, lb = fs.list(a) or {}, fs.list(b) or {}
  local in_b = {}
  for _, name in ipairs(lb) do in_b[name] = true end
  for _, name in ipairs(la) do
    if not in_b[name] then return ("%s%s is only in the recorded output"):format(rel, name) end
    in_b[name] = nil
  end
  local extra = next(in_b)
  if extra then return ("%s%s is only in the rerun's output"):format(rel, extra) end
  local record = rel == "" and provenance.FILE or nil
  for _, name in ipairs(la) do
    local pa, pb = a .. "/" .. name, b .. "/" .. name
    local why
    if name == record then -- compared last: the data's difference says more
      why = nil
    elseif fs.is_dir(pa) ~= fs.is_dir(pb) then
      why = "a folder in one, a file in the other"
    elseif fs.is_dir(pa) then
      local inner = tree_difference(pa, pb, total, rel .. name .. "/")
      if inner then return inner end
    else
      total.files = total.files + 1
      why = file_difference(pa, pb, total)
    end
    if why then return rel .. name .. ": " .. why end
  end
  if record and fs.exists(a .. "/" .. record) then
    local ra, rb = provenance.read(a), provenance.read(b)
    if not ra or not rb or made_of(ra) ~= made_of(rb) then
      return record .. ": the provenance records differ in what made the runs (recipe, seed or rows)"
    end
  end
  return nil
end
M.tree_difference = tree_difference

local function strip(path) return (path:gsub("/+$", "")) end

-- `tdflow rerun`: tdflow is the host module (prepare_run, run_prepared, exit codes).
function M.command(tdflow, args, out, err)
  local output = strip(args.output)
  local rec, why = provenance.read(output)
  if not rec then
    say(err, "tdflow: rerun: " .. why)
    return tdflow.EXIT_USAGE
  end
  if type(rec.recipe) ~= "table" then
    say(err, ("tdflow: rerun: %s/%s records no recipe"):format(output, provenance.FILE))
    return tdflow.EXIT_USAGE
  end
  if rec.unplain then
    say(err, ("tdflow: rerun: the recorded recipe holds values with no plain form at %s (a function "
      .. "given without a name, a TensorDict): register functions with flow.register_function and "
      .. "refer to them by name, or save TensorDicts and read them with MemmapSource")
      :format(table.concat(rec.unplain, ", ")))
    return tdflow.EXIT_USAGE
  end
  local sets = {}
  for _, s in ipairs(rec.overrides or {}) do sets[#sets + 1] = s end
  local path_given = false
  for _, s in ipairs(args.set or {}) do
    sets[#sets + 1] = s
    path_given = path_given or s:match("^sink%.path=") ~= nil
  end
  local into, temporary = args.into, false
  if not into and not path_given then
    if args.verify then
      local dir, name = output:match("^(.*)/([^/]+)$")
      into = ("%s/.%s.rerun-%d"):format(dir or ".", name or output, require("tensordict.about").host().pid)
      temporary = true
    else
      into = output .. ".rerun"
    end
  end
  if into then sets[#sets + 1] = "sink.path=" .. json.encode(into) end
  local options = rec.options or {}
  local run_args = { set = sets, seed = options.seed, checkpoint = options.checkpoint,
    workers = args.workers or options.workers, quiet = args.quiet, report = args.report }
  local r = tdflow.prepare_run(rec.recipe, run_args, err, { name = output .. "/" .. provenance.FILE,
    rerun_of = output })
  if not r then return tdflow.EXIT_USAGE end
  r.provenance.recipe_file = rec.recipe_file
  local target = r.sink.p and r.sink.p.path
  local code = tdflow.run_prepared(r, run_args, out, err)
  if code ~= tdflow.EXIT_OK or not args.verify then
    if code ~= tdflow.EXIT_OK and temporary then fs.remove_tree(into) end
    return code
  end
  local total = { files = 0, bytes = 0 }
  local diff = tree_difference(output, target, total, "")
  if diff then
    say(err, ("tdflow: rerun of %s: the bytes differ: %s (the rerun's output is at %s)"):format(output, diff, target))
    return tdflow.EXIT_RUNTIME
  end
  if temporary then fs.remove_tree(into) end
  say(out, ("tdflow: rerun of %s: identical (%d files, %s compared byte for byte)"):format(output, total.files,
    util.bytes_text(total.bytes)))
  return tdflow.EXIT_OK
end

return M
