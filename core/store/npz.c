/*
 * npz.c: NumPy's .npz archives, a zip file (PKWARE's APPNOTE) of .npy members, one per
 * array, named "<key>.npy": np.savez stores them, np.savez_compressed deflates them.
 *
 * Reading walks the central directory (found from the end-of-central-directory record,
 * and its ZIP64 form for archives or members past 4 GiB), reads a member's local header
 * for where its data starts, inflates it with zlib when deflated, checks its CRC-32 and
 * parses the .npy inside (npy.c). Writing streams each member into a temporary: a local
 * header with ZIP64 sizes, the .npy bytes (deflated through zlib, level 6, when
 * compressed), the header patched with the CRC and sizes once known; then the central
 * directory and the ZIP64 end records, and the rename over the path. Python's zipfile
 * (and so numpy) reads ZIP64 records whatever the sizes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fs.h"
#include "npy.h"

enum {
  SIG_LOCAL = 0x04034b50,
  SIG_CENTRAL = 0x02014b50,
  SIG_END = 0x06054b50,
  SIG_END64 = 0x06064b50,
  SIG_LOCATOR64 = 0x07064b50,
  METHOD_STORED = 0,
  METHOD_DEFLATED = 8,
  ZIP64_EXTRA = 0x0001,
  MAX_NAME = 4096
};

static uint64_t le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void put(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++, v >>= 8) p[i] = (unsigned char)(v & 0xff);
}

/* ------------------------------------------------------------------ reading */

typedef struct member {
  char name[MAX_NAME];
  int32_t method;
  uint32_t crc;
  uint64_t csize, usize, local;
} member;

typedef struct archive {
  int fd;
  int64_t size;
  uint64_t cd_offset, cd_size, entries;
  const char *path;
} archive;

static bool zfail(const char *call, const archive *a, const char *why) {
  td_fail(TD_EIO, "%s: '%s' is not a readable .npz: %s", call, a->path, why);
  return false;
}

/* Opens path and finds its central directory. */
static bool open_archive(const char *call, const char *path, archive *a) {
  memset(a, 0, sizeof *a);
  a->path = path;
  a->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (a->fd < 0) {
    td_fail(TD_EIO, "%s: cannot open '%s': %s", call, path, strerror(errno));
    return false;
  }
  struct stat st;
  if (fstat(a->fd, &st) != 0 || !S_ISREG(st.st_mode)) return zfail(call, a, "not a regular file");
  a->size = st.st_size;
  /* the end record is the last 22 bytes, before a comment of at most 65535 */
  const int64_t tail = a->size < 65557 ? a->size : 65557;
  unsigned char *buf = malloc((size_t)(tail ? tail : 1));
  if (!buf) return zfail(call, a, "out of memory");
  int64_t at = -1;
  if (td_fs_read_at(a->fd, buf, tail, a->size - tail))
    for (int64_t i = tail - 22; i >= 0; i--)
      if (le(buf + i, 4) == SIG_END) {
        at = i;
        break;
      }
  if (at < 0) {
    free(buf);
    return zfail(call, a, "no end of central directory record (truncated, or not a zip file)");
  }
  const unsigned char *end = buf + at;
  a->entries = le(end + 10, 2);
  a->cd_size = le(end + 12, 4);
  a->cd_offset = le(end + 16, 4);
  const int64_t end_pos = a->size - tail + at;
  free(buf);
  if (a->entries == 0xffff || a->cd_size == 0xffffffff || a->cd_offset == 0xffffffff) {
    unsigned char loc[20], rec[56];
    if (end_pos < 20 || !td_fs_read_at(a->fd, loc, 20, end_pos - 20) || le(loc, 4) != SIG_LOCATOR64)
      return zfail(call, a, "a ZIP64 archive without its locator");
    const uint64_t rec_at = le(loc + 8, 8);
    if (rec_at > (uint64_t)a->size - 56 || !td_fs_read_at(a->fd, rec, 56, (int64_t)rec_at) || le(rec, 4) != SIG_END64)
      return zfail(call, a, "a ZIP64 archive without its end record");
    a->entries = le(rec + 32, 8);
    a->cd_size = le(rec + 40, 8);
    a->cd_offset = le(rec + 48, 8);
  }
  if (a->cd_offset > (uint64_t)a->size || a->cd_size > (uint64_t)a->size - a->cd_offset)
    return zfail(call, a, "its central directory lies outside the file");
  return true;
}

/* The i-th central directory entry from cd (the whole directory in memory) at *pos. */
static bool next_member(const char *call, const archive *a, const unsigned char *cd, uint64_t *pos, member *m) {
  if (*pos + 46 > a->cd_size || le(cd + *pos, 4) != SIG_CENTRAL) return zfail(call, a, "a damaged central directory");
  const unsigned char *e = cd + *pos;
  const uint64_t nlen = le(e + 28, 2), xlen = le(e + 30, 2), clen = le(e + 32, 2);
  if (*pos + 46 + nlen + xlen + clen > a->cd_size) return zfail(call, a, "a damaged central directory");
  if (nlen >= MAX_NAME) return zfail(call, a, "a member name longer than 4095 bytes");
  m->method = (int32_t)le(e + 10, 2);
  m->crc = (uint32_t)le(e + 16, 4);
  m->csize = le(e + 20, 4);
  m->usize = le(e + 24, 4);
  m->local = le(e + 42, 4);
  memcpy(m->name, e + 46, nlen);
  m->name[nlen] = '\0';
  /* ZIP64 extra: the fields that overflowed, in this order */
  const unsigned char *x = e + 46 + nlen, *xend = x + xlen;
  while (x + 4 <= xend) {
    const uint64_t id = le(x, 2), size = le(x + 2, 2);
    const unsigned char *v = x + 4;
    if (v + size > xend) break;
    if (id == ZIP64_EXTRA) {
      const unsigned char *f = v;
      if (m->usize == 0xffffffff && f + 8 <= v + size) m->usize = le(f, 8), f += 8;
      if (m->csize == 0xffffffff && f + 8 <= v + size) m->csize = le(f, 8), f += 8;
      if (m->local == 0xffffffff && f + 8 <= v + size) m->local = le(f, 8);
    }
    x = v + size;
  }
  *pos += 46 + nlen + xlen + clen;
  return true;
}

/* The central directory in memory (malloc'd), NULL after td_fail. */
static unsigned char *directory(const char *call, archive *a) {
  unsigned char *cd = malloc((size_t)(a->cd_size ? a->cd_size : 1));
  if (!cd) {
    zfail(call, a, "out of memory");
    return NULL;
  }
  if (!td_fs_read_at(a->fd, cd, (int64_t)a->cd_size, (int64_t)a->cd_offset)) {
    free(cd);
    zfail(call, a, "its central directory cannot be read");
    return NULL;
  }
  return cd;
}

/* A member name ending in ".npy" less that suffix (NumPy's key), or NULL for others. */
static const char *key_of(char *name) {
  const size_t n = strlen(name);
  if (n < 4 || strcmp(name + n - 4, ".npy") != 0) return NULL;
  name[n - 4] = '\0';
  return name;
}

TD_EXPORT int64_t td_npz_names(const char *path, char *buf, int64_t cap) {
  const char *call = "load_npz";
  if (!path) return td_fail(TD_EINVAL, "%s: path is NULL", call), -1;
  archive a;
  if (!open_archive(call, path, &a)) {
    if (a.fd >= 0) close(a.fd);
    return -1;
  }
  unsigned char *cd = directory(call, &a);
  int64_t need = 0;
  uint64_t pos = 0;
  member m;
  for (uint64_t i = 0; cd && i < a.entries; i++) {
    if (!next_member(call, &a, cd, &pos, &m)) {
      need = -1;
      break;
    }
    const char *key = key_of(m.name);
    if (!key) continue;
    const int64_t n = (int64_t)strlen(key);
    if (buf && need + n + 1 < cap) {
      memcpy(buf + need, key, (size_t)n);
      buf[need + n] = '\n';
      buf[need + n + 1] = '\0';
    }
    need += n + 1;
  }
  if (!cd) need = -1;
  if (buf && cap > 0 && need == 0) buf[0] = '\0';
  free(cd);
  close(a.fd);
  return need;
}

/* The member's uncompressed bytes (malloc'd), NULL after td_fail. */
static char *member_bytes(const char *call, archive *a, const member *m) {
  unsigned char lh[30];
  if (m->local > (uint64_t)a->size - 30 || !td_fs_read_at(a->fd, lh, 30, (int64_t)m->local) || le(lh, 4) != SIG_LOCAL) {
    zfail(call, a, "a member's local header is missing");
    return NULL;
  }
  const uint64_t data = m->local + 30 + le(lh + 26, 2) + le(lh + 28, 2);
  if (data > (uint64_t)a->size || m->csize > (uint64_t)a->size - data) {
    zfail(call, a, "a member's data runs past the end of the file (truncated?)");
    return NULL;
  }
  if (m->method != METHOD_STORED && m->method != METHOD_DEFLATED) {
    td_fail(TD_EIO, "%s: '%s': member '%s' uses compression method %d (only stored and deflated are read)", call,
            a->path, m->name, (int)m->method);
    return NULL;
  }
  if (m->usize > (uint64_t)INT64_MAX / 2 || (m->method == METHOD_STORED && m->usize != m->csize)) {
    zfail(call, a, "a member's sizes disagree");
    return NULL;
  }
  char *out = malloc((size_t)(m->usize ? m->usize : 1));
  char *in = m->method == METHOD_STORED ? out : malloc((size_t)(m->csize ? m->csize : 1));
  if (!out || !in) {
    free(out);
    if (in != out) free(in);
    td_fail(TD_ENOMEM, "%s: out of memory for a member of %llu bytes", call, (unsigned long long)m->usize);
    return NULL;
  }
  bool ok = td_fs_read_at(a->fd, in, (int64_t)m->csize, (int64_t)data);
  if (ok && m->method == METHOD_DEFLATED) {
    z_stream z;
    memset(&z, 0, sizeof z);
    ok = inflateInit2(&z, -MAX_WBITS) == Z_OK;
    uint64_t done_in = 0, done_out = 0;
    int r = Z_OK;
    while (ok && r == Z_OK) {
      const uint64_t cin = m->csize - done_in, cout = m->usize - done_out;
      z.next_in = (Bytef *)in + done_in;
      z.avail_in = (uInt)(cin < (1u << 30) ? cin : (1u << 30));
      z.next_out = (Bytef *)out + done_out;
      z.avail_out = (uInt)(cout < (1u << 30) ? cout : (1u << 30));
      const uInt ai = z.avail_in, ao = z.avail_out;
      r = inflate(&z, Z_NO_FLUSH);
      done_in += ai - z.avail_in, done_out += ao - z.avail_out;
      if (r == Z_BUF_ERROR && done_out == m->usize) r = Z_STREAM_END;
      if (r == Z_OK && ai == z.avail_in && ao == z.avail_out) r = Z_DATA_ERROR; /* no progress */
    }
    ok = ok && r == Z_STREAM_END && done_out == m->usize;
    inflateEnd(&z);
  }
  if (in != out) free(in);
  if (ok) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint64_t at = 0; at < m->usize; at += 1u << 30) {
      const uint64_t n = m->usize - at < (1u << 30) ? m->usize - at : (1u << 30);
      crc = crc32(crc, (const Bytef *)out + at, (uInt)n);
    }
    if ((uint32_t)crc != m->crc) {
      free(out);
      td_fail(TD_EIO, "%s: '%s': member '%s' is damaged (its CRC-32 does not match)", call, a->path, m->name);
      return NULL;
    }
    return out;
  }
  free(out);
  td_fail(TD_EIO, "%s: '%s': member '%s' cannot be %s (damaged or truncated)", call, a->path, m->name,
          m->method == METHOD_DEFLATED ? "inflated" : "read");
  return NULL;
}

TD_EXPORT td_tensor *td_npz_read(const char *path, const char *key) {
  const char *call = "load_npz";
  if (!path || !key) return td_fail_null(TD_EINVAL, "%s: NULL argument", call);
  archive a;
  if (!open_archive(call, path, &a)) {
    if (a.fd >= 0) close(a.fd);
    return NULL;
  }
  unsigned char *cd = directory(call, &a);
  td_tensor *t = NULL;
  bool found = false;
  uint64_t pos = 0;
  member m;
  for (uint64_t i = 0; cd && i < a.entries && !found; i++) {
    if (!next_member(call, &a, cd, &pos, &m)) break;
    char name[MAX_NAME];
    memcpy(name, m.name, sizeof name);
    const char *k = key_of(name);
    if (!k || strcmp(k, key) != 0) continue;
    found = true;
    char *bytes = member_bytes(call, &a, &m);
    if (!bytes) break;
    td_npy_header h;
    if (td_npy_parse_header(bytes, (int64_t)m.usize, &h) != TD_OK) {
      char why[512]; /* the parser's message after its "npy: " (copied: td_fail rewrites it) */
      snprintf(why, sizeof why, "%s", td_last_error() + 5);
      td_fail(td_last_status(), "%s: '%s', member '%s': %s", call, path, m.name, why);
    } else if (h.data_offset + h.nbytes > (int64_t)m.usize) {
      td_fail(TD_EIO, "%s: '%s', member '%s' is truncated: its header says %lld bytes of data, it holds %lld", call,
              path, m.name, (long long)h.nbytes, (long long)((int64_t)m.usize - h.data_offset));
    } else {
      t = td_npy_from_bytes(&h, bytes + h.data_offset);
    }
    free(bytes);
  }
  if (cd && !found && td_last_status() == TD_OK)
    td_fail(TD_EINDEX, "%s: '%s' has no array '%s'", call, path, key);
  free(cd);
  close(a.fd);
  return t;
}

/* ------------------------------------------------------------------ writing */

typedef struct written {
  uint32_t crc;
  uint64_t csize, usize, local;
} written;

/* A local header (ZIP64 sizes in its extra field) for name at the file's position. */
static void local_header(unsigned char *h, int32_t method, const written *w, size_t nlen) {
  put(h, SIG_LOCAL, 4);
  put(h + 4, 45, 2); /* version needed: ZIP64 */
  put(h + 6, 0, 2);
  put(h + 8, (uint64_t)method, 2);
  put(h + 10, 0, 2); /* time */
  put(h + 12, (1 << 5) | 1, 2); /* date: 1980-01-01, as zipfile writes for no date */
  put(h + 14, w->crc, 4);
  put(h + 18, 0xffffffff, 4);
  put(h + 22, 0xffffffff, 4);
  put(h + 26, nlen, 2);
  put(h + 28, 20, 2);
  /* the extra field follows the name: id, size 16, usize, csize */
}

static bool write_at(int fd, const void *p, int64_t n, int64_t at) {
  const char *q = p;
  while (n > 0) {
    const ssize_t r = pwrite(fd, q, (size_t)(n < (1 << 30) ? n : (1 << 30)), (off_t)at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    q += r, n -= r, at += r;
  }
  return true;
}

/* t's bytes in C order, through fn(ctx, bytes, n) a piece at a time (contiguous: one). */
typedef bool (*sink_fn)(void *ctx, const char *p, int64_t n);
static bool each_piece(const td_tensor *t, sink_fn fn, void *ctx, int32_t *status) {
  const int64_t bytes = td_tensor_numel(t) * t->itemsize;
  if (bytes == 0) return true;
  if (td_tensor_is_contiguous(t) == 1) return fn(ctx, td_tensor_ptr(t), bytes);
  td_tensor *c = td_tensor_contiguous(t);
  if (!c) {
    *status = td_last_status();
    return false;
  }
  const bool ok = fn(ctx, td_tensor_ptr(c), bytes);
  td_tensor_release(c);
  return ok;
}

typedef struct out_ctx {
  int fd;
  int64_t at;
  uint32_t crc;
  uint64_t usize;
  bool deflating;
  z_stream z;
  unsigned char buf[1 << 16];
} out_ctx;

static bool emit(out_ctx *o, const void *p, int64_t n) {
  if (!write_at(o->fd, p, n, o->at)) return false;
  o->at += n;
  return true;
}

static bool feed(void *vctx, const char *p, int64_t n) {
  out_ctx *o = vctx;
  for (int64_t at = 0; at < n; at += 1 << 30) {
    const uInt k = (uInt)(n - at < (1 << 30) ? n - at : (1 << 30));
    o->crc = (uint32_t)crc32(o->crc, (const Bytef *)p + at, k);
    if (!o->deflating) {
      if (!emit(o, p + at, k)) return false;
      continue;
    }
    o->z.next_in = (Bytef *)(p + at);
    o->z.avail_in = k;
    while (o->z.avail_in > 0) {
      o->z.next_out = o->buf;
      o->z.avail_out = sizeof o->buf;
      if (deflate(&o->z, Z_NO_FLUSH) == Z_STREAM_ERROR) return false;
      if (!emit(o, o->buf, (int64_t)(sizeof o->buf - o->z.avail_out))) return false;
    }
  }
  o->usize += (uint64_t)n;
  return true;
}

static bool finish_deflate(out_ctx *o) {
  int r;
  do {
    o->z.next_out = o->buf;
    o->z.avail_out = sizeof o->buf;
    r = deflate(&o->z, Z_FINISH);
    if (r == Z_STREAM_ERROR) return false;
    if (!emit(o, o->buf, (int64_t)(sizeof o->buf - o->z.avail_out))) return false;
  } while (r != Z_STREAM_END);
  return true;
}

/* One member: local header, data, the header patched with the CRC and sizes. */
static bool write_member(out_ctx *o, const char *name, const td_tensor *t, bool compressed, written *w,
                         int32_t *status) {
  int64_t hn;
  char *head = td_npy_header_bytes(t, &hn);
  if (!head) {
    *status = td_last_status();
    return false;
  }
  const size_t nlen = strlen(name);
  unsigned char lh[30];
  memset(w, 0, sizeof *w);
  w->local = (uint64_t)o->at;
  local_header(lh, compressed ? METHOD_DEFLATED : METHOD_STORED, w, nlen);
  bool ok = emit(o, lh, 30) && emit(o, name, (int64_t)nlen);
  unsigned char extra[20];
  put(extra, ZIP64_EXTRA, 2), put(extra + 2, 16, 2), put(extra + 4, 0, 8), put(extra + 12, 0, 8);
  ok = ok && emit(o, extra, 20);
  const int64_t data = o->at;
  o->crc = (uint32_t)crc32(0L, Z_NULL, 0);
  o->usize = 0;
  o->deflating = compressed;
  if (compressed) {
    memset(&o->z, 0, sizeof o->z);
    ok = ok && deflateInit2(&o->z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ok = ok && feed(o, head, hn) && each_piece(t, feed, o, status) && (!compressed || finish_deflate(o));
  if (compressed) deflateEnd(&o->z);
  free(head);
  if (!ok) return false;
  w->crc = o->crc, w->usize = o->usize, w->csize = (uint64_t)(o->at - data);
  local_header(lh, compressed ? METHOD_DEFLATED : METHOD_STORED, w, nlen);
  put(extra + 4, w->usize, 8), put(extra + 12, w->csize, 8);
  return write_at(o->fd, lh, 30, (int64_t)w->local) &&
         write_at(o->fd, extra, 20, (int64_t)w->local + 30 + (int64_t)nlen);
}

static bool write_directory(out_ctx *o, char *const *names, const written *w, const int32_t *methods, int32_t n) {
  const int64_t cd_at = o->at;
  for (int32_t i = 0; i < n; i++) {
    unsigned char c[46], extra[28];
    const size_t nlen = strlen(names[i]);
    put(c, SIG_CENTRAL, 4);
    put(c + 4, 45 | (3 << 8), 2); /* made by: UNIX, ZIP64 */
    put(c + 6, 45, 2);
    put(c + 8, 0, 2);
    put(c + 10, (uint64_t)methods[i], 2);
    put(c + 12, 0, 2);
    put(c + 14, (1 << 5) | 1, 2);
    put(c + 16, w[i].crc, 4);
    put(c + 20, 0xffffffff, 4);
    put(c + 24, 0xffffffff, 4);
    put(c + 28, nlen, 2);
    put(c + 30, 28, 2);
    put(c + 32, 0, 2);
    put(c + 34, 0, 2);
    put(c + 36, 0, 2);
    put(c + 38, (uint64_t)0644 << 16, 4);
    put(c + 42, 0xffffffff, 4);
    put(extra, ZIP64_EXTRA, 2), put(extra + 2, 24, 2);
    put(extra + 4, w[i].usize, 8), put(extra + 12, w[i].csize, 8), put(extra + 20, w[i].local, 8);
    if (!emit(o, c, 46) || !emit(o, names[i], (int64_t)nlen) || !emit(o, extra, 28)) return false;
  }
  const int64_t cd_size = o->at - cd_at, end64_at = o->at;
  unsigned char e64[56], loc[20], end[22];
  put(e64, SIG_END64, 4);
  put(e64 + 4, 44, 8);
  put(e64 + 12, 45 | (3 << 8), 2);
  put(e64 + 14, 45, 2);
  put(e64 + 16, 0, 4), put(e64 + 20, 0, 4);
  put(e64 + 24, (uint64_t)n, 8), put(e64 + 32, (uint64_t)n, 8);
  put(e64 + 40, (uint64_t)cd_size, 8), put(e64 + 48, (uint64_t)cd_at, 8);
  put(loc, SIG_LOCATOR64, 4), put(loc + 4, 0, 4), put(loc + 8, (uint64_t)end64_at, 8), put(loc + 16, 1, 4);
  put(end, SIG_END, 4);
  put(end + 4, 0, 2), put(end + 6, 0, 2);
  put(end + 8, 0xffff, 2), put(end + 10, 0xffff, 2);
  put(end + 12, 0xffffffff, 4), put(end + 16, 0xffffffff, 4);
  put(end + 20, 0, 2);
  return emit(o, e64, 56) && emit(o, loc, 20) && emit(o, end, 22);
}

TD_EXPORT int32_t td_npz_save(const char *path, const char *const *keys, const td_tensor *const *arrays, int32_t n,
                              int32_t compressed, int32_t flags) {
  const char *call = "save_npz";
  if (!path || n < 0 || (n > 0 && (!keys || !arrays))) return td_fail(TD_EINVAL, "%s: NULL argument", call);
  for (int32_t i = 0; i < n; i++) {
    if (!keys[i] || !arrays[i]) return td_fail(TD_EINVAL, "%s: NULL key or array %d", call, (int)i);
    if (!td_check_cpu(call, arrays[i], "array")) return td_last_status();
    if (strlen(keys[i]) + 5 >= MAX_NAME) return td_fail(TD_EINVAL, "%s: key %d is longer than 4090 bytes", call, (int)i);
  }
  char **names = calloc((size_t)(n ? n : 1), sizeof *names);
  written *w = calloc((size_t)(n ? n : 1), sizeof *w);
  int32_t *methods = calloc((size_t)(n ? n : 1), sizeof *methods);
  out_ctx *o = malloc(sizeof *o);
  char *tmp = NULL;
  int32_t status = TD_OK;
  if (!names || !w || !methods || !o) {
    status = td_fail(TD_ENOMEM, "%s: out of memory", call);
    goto done;
  }
  o->fd = td_fs_open_temp(path, &tmp);
  o->at = 0;
  if (o->fd < 0) {
    status = td_fail(TD_EIO, "%s: cannot create a temporary beside '%s': %s", call, path, strerror(errno));
    goto done;
  }
  bool ok = true;
  for (int32_t i = 0; ok && i < n; i++) {
    const size_t len = strlen(keys[i]) + 5;
    names[i] = malloc(len);
    if (!names[i]) {
      status = td_fail(TD_ENOMEM, "%s: out of memory", call);
      ok = false;
      break;
    }
    snprintf(names[i], len, "%s.npy", keys[i]);
    methods[i] = compressed ? METHOD_DEFLATED : METHOD_STORED;
    ok = write_member(o, names[i], arrays[i], compressed != 0, &w[i], &status);
  }
  ok = ok && write_directory(o, names, w, methods, n);
  if (!ok) {
    if (status == TD_OK) status = td_fail(TD_EIO, "%s: cannot write '%s': %s", call, path, strerror(errno));
    close(o->fd);
    unlink(tmp);
  } else if (td_fs_publish(o->fd, tmp, path, flags) != 0) {
    status = td_fail(TD_EIO, "%s: cannot commit '%s': %s", call, path, strerror(errno));
  }
done:
  for (int32_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  free(w);
  free(methods);
  free(o);
  free(tmp);
  return status;
}
