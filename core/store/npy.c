/*
 * npy.c: NumPy's .npy files (format versions 1.0, 2.0 and 3.0, as numpy.lib.format
 * documents them): a magic string, a version, the length of a header that is a Python
 * dict literal ({'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }), then the
 * raw bytes of the array.
 *
 * The header reader takes only what a plain array can say: a descr of a byte order
 * ('<' '>' '|' '='), a kind ('b' 'i' 'u' 'f') and a size that name one of our dtypes,
 * and anything else (complex, strings, objects, records) is refused naming it. The
 * NumPy kind of each dtype is derived from the dtype table (bfloat16 has none). A
 * Fortran-order array comes back as a transposed view (column-major strides); a
 * big-endian one is swapped as it is read (it cannot be mapped). Saves write C order,
 * version 1.0 (2.0 when the header needs more than 65535 bytes), the header padded to a
 * multiple of 64 bytes as numpy does, into a temporary that is renamed over the path.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype_table.h"
#include "fs.h"
#include "npy.h"

/* ------------------------------------------------------------------ dtypes */

#define NPY_KIND_B(lo) 'b'
#define NPY_KIND_I(lo) ((lo) < 0 ? 'i' : 'u')
#define NPY_KIND_H(lo) 'f'
#define NPY_KIND_F(lo) 'f'
#define NPY_KIND_BF(lo) 0 /* NumPy has no bfloat16 */
#define KIND_ENTRY(_, DN, ST, K, CT, FAM, NAME, AL, M, LO, ...) [TD_##DN] = NPY_KIND_##K(LO),
static const char npy_kinds[TD_NUM_DTYPES] = {TD_DTYPES_ALL(KIND_ENTRY, _)};

char td_npy_kind(int32_t dtype) { return dtype >= 0 && dtype < TD_NUM_DTYPES ? npy_kinds[dtype] : 0; }

/* The dtype of NumPy's kind and size, or -1. */
static int32_t dtype_of(char kind, int64_t size) {
  for (int32_t d = 0; d < TD_NUM_DTYPES; d++)
    if (npy_kinds[d] == kind && td_dtype_itemsize(d) == size) return d;
  return -1;
}

/* ------------------------------------------------------------------ the header dict */

typedef struct cursor {
  const char *p, *end;
} cursor;

static void skip_space(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool eat(cursor *c, char ch) {
  skip_space(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A quoted Python string (no escapes: the header's keys and descrs have none) into out. */
static bool read_string(cursor *c, char *out, size_t cap) {
  skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
  const char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || n + 1 >= cap) return false;
    out[n++] = *c->p++;
  }
  if (c->p >= c->end) return false;
  c->p++;
  out[n] = '\0';
  return true;
}

static bool read_word(cursor *c, const char *word) {
  skip_space(c);
  const size_t n = strlen(word);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return false;
  c->p += n;
  return true;
}

/* (d0, d1, ...) with a trailing comma allowed; "()" is 0-dim. */
static bool read_shape(cursor *c, td_npy_header *h) {
  if (!eat(c, '(')) return false;
  h->ndim = 0;
  for (;;) {
    skip_space(c);
    if (eat(c, ')')) return true;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9' || h->ndim >= TD_MAX_DIMS) return false;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l')) c->p++; /* Python 2's longs */
    h->shape[h->ndim++] = v;
    if (!eat(c, ',')) return eat(c, ')');
  }
}

static int32_t header_fail(const char *what, const char *why) {
  return td_fail(TD_EIO, "npy: %s: %s", what, why);
}

/* A descr string: byte order, kind, size. */
static int32_t read_descr(const char *what, const char *descr, td_npy_header *h) {
  const char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return td_fail(TD_EDTYPE, "npy: %s: dtype '%s' is not a plain array dtype (a byte order, a kind and a size)",
                   what, descr);
  const char kind = descr[1];
  if (kind && strchr("USOVMmca", kind)) /* strings, objects, records, dates, complex */
    return td_fail(TD_EDTYPE, "npy: %s: dtype '%s' (NumPy kind '%c') has no tensor dtype here", what, descr, kind);
  char *end = NULL;
  errno = 0;
  const long size = kind ? strtol(descr + 2, &end, 10) : 0;
  if (!kind || errno || !end || *end || size <= 0)
    return td_fail(TD_EDTYPE, "npy: %s: cannot read dtype '%s'", what, descr);
  const int32_t d = dtype_of(kind, size);
  if (d < 0)
    return td_fail(TD_EDTYPE, "npy: %s: dtype '%s' (NumPy kind '%c', %ld bytes) has no tensor dtype here", what,
                   descr, kind, size);
  h->dtype = d;
  h->swapped = order == '>' && size > 1;
  return TD_OK;
}

TD_EXPORT int32_t td_npy_parse_header(const char *bytes, int64_t n, td_npy_header *h) {
  const char *what = "header";
  if (!bytes || !h) return td_fail(TD_EINVAL, "npy: NULL argument");
  memset(h, 0, sizeof *h);
  if (n < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0)
    return header_fail(what, "not a .npy file (no \\x93NUMPY magic)");
  const unsigned major = (unsigned char)bytes[6];
  int64_t len, start;
  if (major == 1) {
    len = (unsigned char)bytes[8] | (int64_t)(unsigned char)bytes[9] << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (n < 12) return header_fail(what, "truncated before the header length");
    len = (unsigned char)bytes[8] | (int64_t)(unsigned char)bytes[9] << 8 |
          (int64_t)(unsigned char)bytes[10] << 16 | (int64_t)(unsigned char)bytes[11] << 24;
    start = 12;
  } else {
    char why[64];
    snprintf(why, sizeof why, "format version %u.%u is not one of 1.0, 2.0, 3.0", major,
             (unsigned char)bytes[7]);
    return header_fail(what, why);
  }
  if (len > TD_NPY_MAX_HEADER) return header_fail(what, "the header is longer than 1 MiB");
  if (start + len > n) return header_fail(what, "truncated inside the header");
  h->data_offset = start + len;
  cursor c = {bytes + start, bytes + start + len};
  bool seen_descr = false, seen_order = false, seen_shape = false;
  if (!eat(&c, '{')) return header_fail(what, "the header is not a dict");
  for (;;) {
    if (eat(&c, '}')) break;
    char key[32], descr[64];
    if (!read_string(&c, key, sizeof key) || !eat(&c, ':')) return header_fail(what, "cannot read a key of the header dict");
    if (strcmp(key, "descr") == 0) {
      if (!read_string(&c, descr, sizeof descr)) {
        skip_space(&c);
        if (c.p < c.end && *c.p == '[')
          return td_fail(TD_EDTYPE, "npy: %s: a structured dtype (fields) has no tensor dtype here", what);
        return header_fail(what, "descr is not a string");
      }
      const int32_t st = read_descr(what, descr, h);
      if (st != TD_OK) return st;
      seen_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (read_word(&c, "True")) h->fortran = 1;
      else if (read_word(&c, "False")) h->fortran = 0;
      else return header_fail(what, "fortran_order is not True or False");
      seen_order = true;
    } else if (strcmp(key, "shape") == 0) {
      if (!read_shape(&c, h)) return header_fail(what, "shape is not a tuple of at most 16 non-negative integers");
      seen_shape = true;
    } else {
      char why[96];
      snprintf(why, sizeof why, "unknown key '%s' in the header", key);
      return header_fail(what, why);
    }
    if (!eat(&c, ',')) {
      if (!eat(&c, '}')) return header_fail(what, "the header dict does not end with '}'");
      break;
    }
  }
  if (!seen_descr || !seen_order || !seen_shape)
    return header_fail(what, !seen_descr ? "no 'descr' in the header" : !seen_order ? "no 'fortran_order' in the header"
                                                                                    : "no 'shape' in the header");
  int64_t numel = 1;
  for (int32_t k = 0; k < h->ndim; k++) {
    if (h->shape[k] != 0 && numel > INT64_MAX / 16 / h->shape[k]) return header_fail(what, "the shape is too large");
    numel *= h->shape[k];
  }
  h->nbytes = numel * td_dtype_itemsize(h->dtype);
  return TD_OK;
}

/* The header text for t's dtype and shape, version 1.0 (2.0 past 65535 bytes), padded
 * with spaces and a newline so that the data starts at a multiple of 64. Its length
 * into *n; malloc'd, NULL after td_fail. */
static char *format_header(int32_t dtype, int32_t ndim, const int64_t *shape, int64_t *n) {
  const char kind = td_npy_kind(dtype);
  if (!kind)
    return td_fail_null(TD_EDTYPE, "save_npy: %s has no NumPy dtype (save it as float32)", td_dtype_name(dtype));
  const int64_t size = td_dtype_itemsize(dtype);
  /* numpy's spelling: "()", "(3,)", "(3, 4)" */
  char dict[96 + TD_MAX_DIMS * 24];
  int m = snprintf(dict, sizeof dict, "{'descr': '%c%c%lld', 'fortran_order': False, 'shape': (",
                   size == 1 ? '|' : '<', kind, (long long)size);
  for (int32_t k = 0; k < ndim; k++)
    m += snprintf(dict + m, sizeof dict - (size_t)m, "%s%lld", k ? ", " : "", (long long)shape[k]);
  m += snprintf(dict + m, sizeof dict - (size_t)m, "%s), }", ndim == 1 ? "," : "");
  const int64_t body = m + 1; /* + '\n' */
  int64_t start = 10, total = (start + body + 63) / 64 * 64;
  if (total - start > 65535) start = 12, total = (start + body + 63) / 64 * 64;
  char *out = malloc((size_t)total);
  if (!out) return td_fail_null(TD_ENOMEM, "save_npy: out of memory");
  memcpy(out, "\x93NUMPY", 6);
  const int64_t len = total - start;
  out[6] = start == 10 ? 1 : 2;
  out[7] = 0;
  for (int64_t b = 0; b < start - 8; b++) out[8 + b] = (char)(len >> (8 * b) & 0xff);
  memcpy(out + start, dict, (size_t)m);
  memset(out + start + m, ' ', (size_t)(total - start - m - 1));
  out[total - 1] = '\n';
  *n = total;
  return out;
}

/* ------------------------------------------------------------------ load and save */

/* The strides of a Fortran-order array (column-major), in elements. */
static void fortran_strides(const td_npy_header *h, int64_t *strides) {
  int64_t s = 1;
  for (int32_t k = 0; k < h->ndim; k++) {
    strides[k] = s;
    s *= h->shape[k] ? h->shape[k] : 1;
  }
}

/* Swaps each element's bytes (big-endian data read on a little-endian machine). */
static void byteswap(char *p, int64_t numel, int64_t size) {
  for (int64_t i = 0; i < numel; i++, p += size)
    for (int64_t a = 0, b = size - 1; a < b; a++, b--) {
      const char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

td_tensor *td_npy_from_bytes(const td_npy_header *h, const char *data) {
  int64_t strides[TD_MAX_DIMS];
  if (h->fortran) fortran_strides(h, strides);
  const int64_t numel = h->nbytes / td_dtype_itemsize(h->dtype);
  td_storage *s = td_storage_new_heap(h->nbytes);
  if (!s) return NULL;
  memcpy(td_storage_data_borrow(s), data, (size_t)h->nbytes);
  if (h->swapped) byteswap(td_storage_data_borrow(s), numel, td_dtype_itemsize(h->dtype));
  td_tensor *t = td_tensor_from_storage(s, 0, h->ndim, h->shape, h->fortran ? strides : NULL, h->dtype);
  td_storage_release(s);
  return t;
}

TD_EXPORT td_tensor *td_npy_load(const char *path, int32_t mmap) {
  if (!path) return td_fail_null(TD_EINVAL, "load_npy: path is NULL");
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return td_fail_null(TD_EIO, "load_npy: cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  td_tensor *t = NULL;
  char *head = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    td_fail(TD_EIO, "load_npy: '%s' is not a regular file", path);
    goto done;
  }
  char first[12];
  const int64_t got = st.st_size < 12 ? st.st_size : 12;
  if (!td_fs_read_at(fd, first, got, 0)) {
    td_fail(TD_EIO, "load_npy: cannot read '%s': %s", path, strerror(errno));
    goto done;
  }
  int64_t hlen = got;
  if (got >= 10 && memcmp(first, "\x93NUMPY", 6) == 0) {
    const bool v1 = first[6] == 1;
    hlen = (v1 ? 10 : 12) + ((unsigned char)first[8] | (int64_t)(unsigned char)first[9] << 8 |
                             (v1 || got < 12 ? 0 : (int64_t)(unsigned char)first[10] << 16 |
                                                      (int64_t)(unsigned char)first[11] << 24));
    if (hlen > TD_NPY_MAX_HEADER + 12) hlen = TD_NPY_MAX_HEADER + 13; /* the parser says why */
    if (hlen > st.st_size) hlen = st.st_size;
  }
  head = malloc((size_t)(hlen ? hlen : 1));
  if (!head || !td_fs_read_at(fd, head, hlen, 0)) {
    td_fail(head ? TD_EIO : TD_ENOMEM, "load_npy: cannot read '%s'", path);
    goto done;
  }
  td_npy_header h;
  if (td_npy_parse_header(head, hlen, &h) != TD_OK) {
    char why[512]; /* the parser's message after its "npy: " (copied: td_fail rewrites it) */
    snprintf(why, sizeof why, "%s", td_last_error() + 5);
    td_fail(td_last_status(), "load_npy: '%s': %s", path, why);
    goto done;
  }
  if (h.data_offset + h.nbytes > st.st_size) {
    td_fail(TD_EIO, "load_npy: '%s' is truncated: its header says %lld bytes of data, the file holds %lld", path,
            (long long)h.nbytes, (long long)(st.st_size - h.data_offset));
    goto done;
  }
  const int64_t size = td_dtype_itemsize(h.dtype);
  if (mmap) {
    if (h.swapped) {
      td_fail(TD_EINVAL, "load_npy: '%s' is big-endian: it cannot be mapped (load it without mmap: the bytes are "
              "swapped as they are read)", path);
      goto done;
    }
    if (h.data_offset % size != 0) {
      td_fail(TD_EINVAL, "load_npy: the data of '%s' starts at byte %lld, not a multiple of %lld: it cannot be "
              "mapped (load it without mmap)", path, (long long)h.data_offset, (long long)size);
      goto done;
    }
    td_storage *s = td_storage_map_file(path, h.data_offset + h.nbytes, TD_MAP_READ);
    if (s) {
      int64_t strides[TD_MAX_DIMS];
      if (h.fortran) fortran_strides(&h, strides);
      t = td_tensor_from_storage(s, h.data_offset / size, h.ndim, h.shape, h.fortran ? strides : NULL, h.dtype);
      td_storage_release(s);
    }
    goto done;
  }
  td_storage *s = td_storage_new_heap(h.nbytes);
  if (!s) goto done;
  if (!td_fs_read_at(fd, td_storage_data_borrow(s), h.nbytes, h.data_offset)) {
    td_fail(TD_EIO, "load_npy: cannot read the data of '%s': %s", path, strerror(errno));
    td_storage_release(s);
    goto done;
  }
  if (h.swapped) byteswap(td_storage_data_borrow(s), h.nbytes / size, size);
  int64_t strides[TD_MAX_DIMS];
  if (h.fortran) fortran_strides(&h, strides);
  t = td_tensor_from_storage(s, 0, h.ndim, h.shape, h.fortran ? strides : NULL, h.dtype);
  td_storage_release(s);
done:
  free(head);
  close(fd);
  return t;
}

char *td_npy_header_bytes(const td_tensor *t, int64_t *n) { return format_header(t->dtype, t->ndim, t->shape, n); }

TD_EXPORT int32_t td_npy_save(const td_tensor *t, const char *path, int32_t flags) {
  if (!t || !path) return td_fail(TD_EINVAL, "save_npy: NULL argument");
  if (!td_check_cpu("save_npy", t, "tensor")) return td_last_status();
  int64_t n;
  char *head = format_header(t->dtype, t->ndim, t->shape, &n);
  if (!head) return td_last_status();
  char *tmp = NULL;
  int fd = td_fs_open_temp(path, &tmp);
  int32_t status = TD_OK;
  if (fd < 0) {
    status = td_fail(TD_EIO, "save_npy: cannot create a temporary beside '%s': %s", path, strerror(errno));
  } else {
    td_storage *buf = NULL;
    int32_t kst = TD_OK;
    if (!td_fs_write_all(fd, head, n) || !td_fs_write_tensor(fd, t, &buf, &kst)) {
      status = kst != TD_OK ? kst : td_fail(TD_EIO, "save_npy: cannot write '%s': %s", path, strerror(errno));
      close(fd);
      unlink(tmp);
    } else if (td_fs_publish(fd, tmp, path, flags) != 0) {
      status = td_fail(TD_EIO, "save_npy: cannot commit '%s': %s", path, strerror(errno));
    }
    td_storage_release(buf);
  }
  free(tmp);
  free(head);
  return status;
}
