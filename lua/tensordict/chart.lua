-- chart.lua: horizontal bar charts for the terminal, drawn with Unicode block characters
-- (eighths of a cell, so a bar's length is exact to 1/8 of a character): T.hist's
-- histogram, and `tdflow report`'s time shares and sweep metrics.
local M = {}

-- U+2588 FULL BLOCK and the partial blocks of 1/8 .. 7/8 of a cell, left-aligned.
M.FULL = "\u{2588}"
local EIGHTHS = { "\u{258F}", "\u{258E}", "\u{258D}", "\u{258C}", "\u{258B}", "\u{258A}", "\u{2589}" }

M.WIDTH = 40 -- cells of the longest bar

-- A bar of value / top of width cells (rounded to the nearest eighth; a value > 0 shows
-- at least an eighth, so that it is told apart from 0).
function M.bar(value, top, width)
  width = width or M.WIDTH
  if not (value > 0) or not (top > 0) then return "" end
  local eighths = math.floor(math.min(value / top, 1) * width * 8 + 0.5)
  if eighths == 0 then eighths = 1 end
  local full, part = math.floor(eighths / 8), eighths % 8
  return M.FULL:rep(full) .. (part > 0 and EIGHTHS[part] or "")
end

-- The width of s in terminal cells (its UTF-8 characters: the blocks are one cell each).
local function cells(s)
  local _, n = s:gsub("[^\128-\191]", "")
  return n
end

-- Lines of a chart: for each i, labels[i] left-aligned, a bar of values[i] (scaled to the
-- largest value) and texts[i] after it. Negative and NaN values draw no bar.
-- opts: width (cells of the longest bar).
function M.bars(labels, values, texts, opts)
  local width = opts and opts.width or M.WIDTH
  local top, label_w = 0, 0
  for i, v in ipairs(values) do
    if v > top then top = v end
    label_w = math.max(label_w, cells(labels[i]))
  end
  local lines = {}
  for i, v in ipairs(values) do
    local b = M.bar(v, top, width)
    lines[i] = ("%s%s  %s%s  %s"):format(labels[i], (" "):rep(label_w - cells(labels[i])), b,
      (" "):rep(width - cells(b)), texts[i])
  end
  return lines
end

return M
