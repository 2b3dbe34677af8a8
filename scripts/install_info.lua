-- install_info.lua: prints the install_info.lua module `make install` puts beside the
-- installed Lua modules: the commit the source tree was at, so that an installed
-- library's provenance records name it (lua/tensordict/about.lua reads it; git is not
-- needed, here or there). Usage, from the tree's root: luajit scripts/install_info.lua
package.path = "lua/?.lua;" .. package.path
local about = require("tensordict.about")
local commit, branch = about.tree_commit(".")
local function quoted(s) return s and ("%q"):format(s) or "nil" end
io.write(("-- Written by make install (scripts/install_info.lua): the tree this was installed from.\n"
  .. "return { commit = %s, branch = %s, installed = %q }\n"):format(quoted(commit), quoted(branch),
  os.date("!%Y-%m-%dT%H:%M:%SZ")))
