-- raw_write.lua: the reference the write benchmarks measure against: n bytes from
-- memory written sequentially into a new file with write() in 64 MiB calls, then
-- fsynced when asked (the same policy as the save it is compared with).
local ffi = require("ffi")

pcall(ffi.cdef, [[
  int open(const char *path, int flags, int mode);
  long write(int fd, const void *buf, size_t n);
  int fsync(int fd);
  int close(int fd);
  int unlink(const char *path);
]])
local O_WRONLY, O_CREAT, O_TRUNC = 1, 64, 512

return function(path, p, bytes, fsync)
  local fd = ffi.C.open(path, O_WRONLY + O_CREAT + O_TRUNC, 420)
  assert(fd >= 0, "cannot create " .. path)
  p = ffi.cast("const char *", p)
  local left, off = bytes, 0
  while left > 0 do
    local n = tonumber(ffi.C.write(fd, p + off, math.min(left, 64 * 1024 * 1024)))
    assert(n > 0, "write failed")
    left, off = left - n, off + n
  end
  if fsync then ffi.C.fsync(fd) end
  ffi.C.close(fd)
end
