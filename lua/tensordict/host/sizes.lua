-- host/sizes.lua: sizes a recipe asks for against what the machine can hold (issue 28,
-- defect 4). A node whose parameters size its own memory checks them in preflight
-- (ParticleSource's n and steps, CsvSource's batch_size, Histogram's bins); a step that
-- holds rows of the batch at once declares those parameters with rows_held = true
-- (Rebatch's size, Batch's size, Shuffle's buffer), and is checked here with the row
-- size the source declares (source:row_bytes()). The steps between may make rows larger
-- or smaller: the source's row is the estimate, and the message says so.
local util = require("tensordict.util")
local core = require("tensordict.flow.core")

local M = {}

-- nodes may have holes (steps that could not be built): their places keep their numbers.
local function walk(nodes, prefix, row_bytes, problems)
  for i = 1, table.maxn(nodes) do
    local node, where = nodes[i], ("%s[%d]"):format(prefix, i)
    if node then
      if node.nodes and node.type_name == "Seq" then walk(node.nodes, where .. ".steps", row_bytes, problems) end
      for _, p in ipairs(node.params or {}) do
        local rows = p.rows_held and node.p[p[1]]
        if type(rows) == "number" then
          local pb = core.memory_problem(rows * row_bytes, ("%s = %.0f rows of about %s each (the source's rows)")
            :format(p[1], rows, util.bytes_text(row_bytes)))
          if pb then problems[#problems + 1] = ("%s (%s): %s"):format(where, node.type_name, pb) end
        end
      end
    end
  end
end

-- Appends the problems of the steps (built nodes; nil entries skipped) of a recipe whose
-- source may declare its row size.
function M.check(source, steps, problems)
  local ok, row_bytes = pcall(function() return source and source.row_bytes and source:row_bytes() end)
  if not ok or type(row_bytes) ~= "number" or row_bytes <= 0 then return end
  walk(steps, "steps", row_bytes, problems)
end

return M
