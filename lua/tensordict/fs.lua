-- fs.lua: the few file-system questions the Lua side asks (a folder's entries, does a
-- path exist, is it a folder), answered through libc with the FFI: LuaJIT has no
-- library for them and the host should not depend on one for three calls. Files the
-- Lua side writes whole go through the library's commit (write_atomic).
local ffi = require("ffi")
local once = require("tensordict.once")
local lib = require("tensordict.lib")

once("fs_cdefs", function()
  ffi.cdef [[
    typedef struct td_lua_dir td_lua_dir;
    struct td_lua_dirent {
      uint64_t d_ino;
      int64_t d_off;
      uint16_t d_reclen;
      uint8_t d_type;
      char d_name[256];
    };
    td_lua_dir *opendir(const char *name);
    struct td_lua_dirent *readdir(td_lua_dir *dirp);
    int closedir(td_lua_dir *dirp);
    int access(const char *path, int mode);
    int isatty(int fd);
    int rmdir(const char *path);
    int mkdir(const char *path, uint32_t mode);
    char *strerror(int errnum);
  ]]
  return true
end)

local M = {}

-- The names in folder path (without . and ..), sorted; nil when it cannot be opened.
function M.list(path)
  local dir = ffi.C.opendir(path)
  if dir == nil then return nil end
  local names = {}
  while true do
    local e = ffi.C.readdir(dir)
    if e == nil then break end
    local name = ffi.string(e.d_name)
    if name ~= "." and name ~= ".." then names[#names + 1] = name end
  end
  ffi.C.closedir(dir)
  table.sort(names)
  return names
end

function M.exists(path) return ffi.C.access(path, 0) == 0 end

-- Whether this process may write in path (a folder: make and rename files in it).
function M.is_writable(path) return ffi.C.access(path, 2) == 0 end

function M.is_dir(path)
  local dir = ffi.C.opendir(path)
  if dir == nil then return false end
  ffi.C.closedir(dir)
  return true
end

-- True when file descriptor fd (2: stderr) is a terminal.
function M.isatty(fd) return ffi.C.isatty(fd) == 1 end

-- Removes a folder and everything in it (symbolic links are removed, not followed);
-- true when path is gone. For the host's own scratch folders (MemmapSink's parts).
function M.remove_tree(path)
  local names = M.list(path)
  if names then
    for _, name in ipairs(names) do
      local child = path .. "/" .. name
      if not os.remove(child) then M.remove_tree(child) end
    end
    ffi.C.rmdir(path)
  else
    os.remove(path)
  end
  return not M.exists(path)
end

-- Writes text as the whole new content of the file at path, through the commit every
-- save uses (td_fs_write_file, core/store/fs.c): a temporary sibling, fsync (unless
-- fsync is false), rename over path. Readers see the old file or the whole new one, and
-- a failure or a crash leaves path as it was. true, or nil and the library's message
-- ("cannot replace 'out.csv': Is a directory").
function M.write_atomic(path, text, fsync)
  local C = lib.C
  if C.td_fs_write_file(path, text, #text, fsync == false and C.TD_MEMMAP_NO_FSYNC or 0) ~= 0 then
    return nil, (ffi.string(C.td_last_error()):gsub("^write_file: ", ""))
  end
  return true
end

-- Makes folder path and the folders above it that are missing (mkdir -p); true, or nil
-- and why.
function M.make_dirs(path)
  if M.is_dir(path) then return true end
  local parent = M.dirname(path)
  if parent ~= path and parent ~= "." and parent ~= "" and not M.is_dir(parent) then
    local ok, why = M.make_dirs(parent)
    if not ok then return nil, why end
  end
  if ffi.C.mkdir(path, 493) ~= 0 and not M.is_dir(path) then -- 0755; a racing maker is fine
    return nil, ("cannot make the folder '%s': %s"):format(path, ffi.string(ffi.C.strerror(ffi.errno())))
  end
  return true
end

-- The folder holding a file path ("." for a bare name).
function M.dirname(path) return path:match("^(.*)/[^/]*$") or "." end

return M
