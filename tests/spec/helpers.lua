-- helpers.lua: shared assertions for the specs.
local M = {}

-- Calls fn, which must raise; the message must contain every given text (plain find)
-- and blame a line of the spec file that called, not one inside the library.
function M.raises(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error, got none")
  err = tostring(err)
  for _, text in ipairs({ ... }) do
    if not err:find(text, 1, true) then
      error(("error message %q does not contain %q"):format(err, text), 2)
    end
  end
  if not err:find("_spec.lua:%d+: tensordict: ") then
    error(("error %q is not raised at the caller's line with the 'tensordict: ' prefix"):format(err), 2)
  end
  return err
end

-- Element-wise comparison of nested tables of numbers with a tolerance (NaN == NaN).
function M.near(a, b, tol, path)
  path = path or ""
  tol = tol or 0
  if type(a) == "table" and type(b) == "table" then
    if #a ~= #b then return false, ("length %d vs %d at %s"):format(#a, #b, path) end
    for i = 1, #a do
      local ok, why = M.near(a[i], b[i], tol, path .. "[" .. i .. "]")
      if not ok then return false, why end
    end
    return true
  end
  if a ~= a and b ~= b then return true end
  if type(a) == "number" and type(b) == "number" and math.abs(a - b) <= tol then return true end
  if a == b then return true end
  return false, ("%s vs %s at %s"):format(tostring(a), tostring(b), path)
end

function M.assert_near(a, b, tol)
  local ok, why = M.near(a, b, tol)
  if not ok then error("values differ: " .. why, 2) end
end

return M
