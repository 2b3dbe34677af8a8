-- about.lua: what is running, and where, for provenance records (flow.run's provenance
-- option, tdflow): the library's version and ABI, the commit its tree was at, the host.
-- The commit is read without git, which a cluster node may lack: in a source tree from
-- .git (HEAD, the ref it names, packed-refs; a worktree's or submodule's .git file is
-- followed to its git folder), and for an installed library from install_info.lua,
-- which `make install` writes beside the modules. Whether the tree had uncommitted
-- changes needs git's index, so it is not claimed either way.
local ffi = require("ffi")
local once = require("tensordict.once")

once("about_cdefs", function()
  ffi.cdef [[
    int gethostname(char *name, size_t len);
    char *getcwd(char *buf, size_t size);
    int getpid(void);
  ]]
  return true
end)

local M = {}

-- The folder of the library's Lua modules (.../lua/tensordict, or the installed
-- share/lua/5.1/tensordict), absolute: a relative package.path would go stale after a
-- chdir.
local function module_dir()
  local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
  if dir:sub(1, 1) ~= "/" then
    local buf = ffi.new("char[4096]")
    if ffi.C.getcwd(buf, 4096) ~= nil then dir = ffi.string(buf) .. "/" .. dir end
  end
  return (dir:gsub("/%./", "/"):gsub("^(.-)/%.$", "%1"))
end
local HERE = module_dir()

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  return text
end

local function trim(s) return s and s:match("^%s*(.-)%s*$") end

-- The git folder of a tree (root/.git, or where a .git file points) and the common
-- folder that holds its refs (a linked worktree's is the main repository's).
local function git_dirs(root)
  local dot = root .. "/.git"
  if read(dot .. "/HEAD") then return dot, dot end
  local gitdir = trim((read(dot) or ""):match("^gitdir:(.*)$"))
  if not gitdir or gitdir == "" then return nil end
  if gitdir:sub(1, 1) ~= "/" then gitdir = root .. "/" .. gitdir end
  local common = trim(read(gitdir .. "/commondir"))
  if common and common:sub(1, 1) ~= "/" then common = gitdir .. "/" .. common end
  return gitdir, common or gitdir
end

-- The commit a ref ("refs/heads/main") names: its loose file, else packed-refs.
local function resolve(gitdir, common, ref)
  local loose = read(gitdir .. "/" .. ref) or read(common .. "/" .. ref)
  if loose then return loose:match("^(%x+)") end
  for line in (read(common .. "/packed-refs") or ""):gmatch("[^\n]+") do
    local hash, name = line:match("^(%x+) (%S+)$")
    if name == ref then return hash end
  end
  return nil
end

-- The commit the tree at root is at, and its branch (nil when detached), or nil when
-- root is no git tree.
function M.tree_commit(root)
  local gitdir, common = git_dirs(root)
  if not gitdir then return nil end
  local head = trim(read(gitdir .. "/HEAD"))
  if not head then return nil end
  local ref = head:match("^ref:%s*(%S+)$")
  if not ref then return head:match("^(%x+)$"), nil end
  return resolve(gitdir, common, ref), ref:match("^refs/heads/(.+)$")
end

local cached

-- {version =, abi =, commit =, branch =, commit_from =}: the library that runs. commit
-- is nil where neither a tree nor an install recorded it; commit_from says which.
function M.library()
  if cached then return cached end
  local C = require("tensordict.lib").C
  local info = { version = ffi.string(C.td_version_string()), abi = tonumber(C.td_abi_version()) }
  local ok, installed = pcall(dofile, HERE .. "/install_info.lua")
  if ok and type(installed) == "table" and installed.commit then
    info.commit, info.branch = installed.commit ~= "" and installed.commit or nil, installed.branch
    info.commit_from = "make install (" .. HERE .. ")"
  else
    local root = HERE:match("^(.*)/lua/tensordict$")
    if root then
      info.commit, info.branch = M.tree_commit(root)
      if info.commit then info.commit_from = "the source tree " .. root end
    end
  end
  cached = info
  return info
end

-- {name =, pid =}: the machine and the process.
function M.host()
  local buf = ffi.new("char[256]")
  local name = ffi.C.gethostname(buf, 256) == 0 and ffi.string(buf) or "?"
  return { name = name, pid = ffi.C.getpid() }
end

return M
