/*
 * test_cuda_storage.c: the core's side of the CUDA backend, which runs on any machine:
 * external storages (device memory and pinned host memory handed over with their free
 * callback), CPU kernels refusing device tensors without touching their memory, the
 * dtype plans the device reuses (td_binary_dtypes, td_unary_dtypes), the generator's
 * block reservation; then libtensordict_cuda.so, when it was built next to the library:
 * it loads, and without a device reports so cleanly (no crash, CUDA's message); with
 * one, a host -> device -> host round trip and an add give the CPU's values.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static int frees;
static void count_free(void *data, void *ctx) {
  frees++;
  CHECK(ctx == (void *)&frees);
  free(data);
}

/* A float32 tensor of n elements over external storage of the given kind. */
static td_tensor *external(int32_t kind, int32_t device_type, int64_t n) {
  float *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = (float)i;
  td_storage *s = td_storage_new_external(kind, p, n * 4, device_type, 0, count_free, &frees);
  if (!s) {
    free(p);
    return NULL;
  }
  td_tensor *t = td_tensor_from_storage(s, 0, 1, &n, NULL, TD_FLOAT32);
  td_storage_release(s);
  return t;
}

static void test_external_storage(void) {
  /* device memory: the CPU kernels refuse it, and release calls the free callback */
  td_tensor *d = external(TD_STORAGE_DEVICE, TD_DEVICE_CUDA, 4);
  CHECK(d != NULL);
  CHECK_EQ_I(td_tensor_device_type(d), TD_DEVICE_CUDA);
  CHECK_EQ_I(td_storage_kind(d->storage), TD_STORAGE_DEVICE);
  td_tensor *host = td_tensor_full(1, (int64_t[]){4}, TD_FLOAT32, 1);
  CHECK(td_binary(TD_BINARY_ADD, host, d) == NULL);
  CHECK_ERROR("add: the second tensor is in device memory");
  double v;
  const int64_t at = 0;
  CHECK(td_tensor_read_f64(d, &at, &v) != TD_OK);
  CHECK_ERROR("in device memory");
  CHECK(td_reduce(TD_RED_SUM, d, NULL, 0, 0, 0) == NULL);
  CHECK_ERROR("in device memory");
  CHECK(td_tensor_clone(d) == NULL);
  td_tensor_release(d);
  CHECK_EQ_I(frees, 1);

  /* pinned host memory: an ordinary host tensor to the CPU kernels */
  td_tensor *p = external(TD_STORAGE_PINNED, TD_DEVICE_CPU, 4);
  CHECK(p != NULL);
  td_tensor *sum = td_binary(TD_BINARY_ADD, host, p);
  CHECK(sum != NULL);
  if (sum) {
    const int64_t i3 = 3;
    CHECK(td_tensor_read_f64(sum, &i3, &v) == TD_OK && v == 4.0);
  }
  td_tensor_release(sum);
  td_tensor_release(p);
  CHECK_EQ_I(frees, 2);
  td_tensor_release(host);

  /* refused combinations leave the memory with the caller */
  char buf[8];
  CHECK(td_storage_new_external(TD_STORAGE_DEVICE, buf, 8, TD_DEVICE_CPU, 0, count_free, NULL) == NULL);
  CHECK_ERROR("external storage");
  CHECK(td_storage_new_external(TD_STORAGE_HEAP, buf, 8, TD_DEVICE_CPU, 0, count_free, NULL) == NULL);
  CHECK(td_storage_new_external(TD_STORAGE_PINNED, buf, 8, TD_DEVICE_CPU, 0, NULL, NULL) == NULL);
  CHECK_EQ_I(frees, 2);
}

static void test_plans(void) {
  td_tensor *i = td_tensor_full(1, (int64_t[]){2}, TD_INT32, 1);
  td_tensor *b = td_tensor_full(1, (int64_t[]){2}, TD_BOOL, 1);
  int32_t c = -1, o = -1;
  CHECK(td_binary_dtypes(TD_BINARY_DIV, i, i, 0, 0, 0, &c, &o) == TD_OK);
  CHECK_EQ_I(c, TD_FLOAT32);
  CHECK(td_binary_dtypes(TD_BINARY_ADD, i, NULL, 1.5, TD_SCALAR_FLOAT, 0, &c, &o) == TD_OK);
  CHECK_EQ_I(o, TD_FLOAT32);
  CHECK(td_binary_dtypes(TD_BINARY_LT, i, NULL, 2, TD_SCALAR_INT, 1, &c, &o) == TD_OK);
  CHECK_EQ_I(c, TD_INT32);
  CHECK_EQ_I(o, TD_BOOL);
  CHECK(td_binary_dtypes(TD_BINARY_SUB, b, b, 0, 0, 0, &c, &o) != TD_OK);
  CHECK_ERROR("subtraction with two bool tensors");
  CHECK(td_unary_dtypes(TD_UNARY_EXP, TD_INT64, &c, &o) == TD_OK);
  CHECK_EQ_I(c, TD_FLOAT32);
  CHECK(td_unary_dtypes(TD_UNARY_ISNAN, TD_FLOAT16, &c, &o) == TD_OK);
  CHECK_EQ_I(o, TD_BOOL);
  CHECK(td_unary_dtypes(TD_UNARY_NEG, TD_BOOL, &c, &o) != TD_OK);
  CHECK_ERROR("logical_not");
  td_tensor_release(i);
  td_tensor_release(b);
}

static void test_generator_reserve(void) {
  td_generator *g = td_generator_new(7);
  CHECK_EQ_I(td_generator_reserve(g, 9), 0);  /* blocks 0, 1, 2 */
  CHECK_EQ_I(td_generator_reserve(g, 4), 3);
  CHECK_EQ_I(td_generator_reserve(g, 0), 4);
  /* the CPU fill after it draws from block 4 on: the same as a fresh generator's
   * fill after reserving the same blocks */
  td_generator *h = td_generator_new(7);
  td_tensor *a = td_tensor_empty(1, (int64_t[]){13}, TD_FLOAT32);
  td_tensor *b = td_tensor_empty(1, (int64_t[]){13}, TD_FLOAT32);
  td_generator_reserve(h, 16);
  CHECK(td_uniform_(a, 0, 1, g) == TD_OK && td_uniform_(b, 0, 1, h) == TD_OK);
  td_tensor *eq = td_binary(TD_BINARY_EQ, a, b);
  td_tensor *all = eq ? td_reduce(TD_RED_ALL, eq, NULL, 0, 0, 0) : NULL;
  double v = 0;
  CHECK(all && td_tensor_read_f64(all, NULL, &v) == TD_OK && v == 1.0);
  td_tensor_release(all);
  td_tensor_release(eq);
  td_tensor_release(a);
  td_tensor_release(b);
  td_generator_release(g);
  td_generator_release(h);
}

typedef int32_t (*count_fn)(const char **);
typedef td_tensor *(*to_device_fn)(const td_tensor *, int32_t, int32_t);
typedef td_tensor *(*to_host_fn)(const td_tensor *, int32_t);
typedef td_tensor *(*empty_fn)(int32_t, int32_t, const int64_t *, int32_t);
typedef td_tensor *(*binary_fn)(int32_t, const td_tensor *, const td_tensor *);

/* libtensordict_cuda.so next to libtensordict.so (this binary is in $BUILD/tests). */
static void test_cuda_library(void) {
  char exe[PATH_MAX] = {0}, path[PATH_MAX + 64];
  if (readlink("/proc/self/exe", exe, sizeof exe - 1) <= 0) return;
  snprintf(path, sizeof path, "%s/../libtensordict_cuda.so", dirname(exe));
  if (access(path, F_OK) != 0) {
    printf("note: %s was not built (no nvcc): its load test is skipped\n", path);
    return;
  }
  /* under valgrind (scripts/run-valgrind.sh): ld.so's expansion of the library's
   * $ORIGIN rpath reads past a string memcheck tracks, and the CUDA runtime is not
   * memcheck-clean; neither is this project's code */
  if (getenv("TD_VALGRIND")) {
    printf("note: under valgrind: the load test of %s is skipped\n", path);
    return;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return;
  }
  count_fn count = (count_fn)dlsym(h, "td_cuda_device_count");
  to_device_fn to_device = (to_device_fn)dlsym(h, "td_cuda_to_device");
  to_host_fn to_host = (to_host_fn)dlsym(h, "td_cuda_to_host");
  empty_fn empty = (empty_fn)dlsym(h, "td_cuda_empty");
  binary_fn binary = (binary_fn)dlsym(h, "td_cuda_binary");
  CHECK(count && to_device && to_host && empty && binary);
  if (!count || !to_device || !to_host || !empty || !binary) return;
  const char *reason = NULL;
  const int32_t n = count(&reason);
  td_tensor *x = td_tensor_arange(0, 1, 5, TD_FLOAT32);
  if (n < 1) {
    /* no driver or no device: a clean refusal with CUDA's message, every time */
    CHECK(reason != NULL && reason[0] != '\0');
    printf("note: no CUDA device (%s): device round trips are skipped\n", reason);
    CHECK(empty(0, 1, (int64_t[]){4}, TD_FLOAT32) == NULL);
    CHECK_ERROR("CUDA error");
    CHECK(to_device(x, 0, 0) == NULL);
    CHECK_ERROR("CUDA error");
    CHECK(count(&reason) == n); /* still answers the same */
  } else {
    td_tensor *d = to_device(x, 0, 0);
    CHECK(d != NULL && td_tensor_device_type(d) == TD_DEVICE_CUDA);
    td_tensor *s = d ? binary(TD_BINARY_ADD, d, d) : NULL;
    td_tensor *back = s ? to_host(s, 0) : NULL;
    double v = 0;
    const int64_t i4 = 4;
    CHECK(back && td_tensor_read_f64(back, &i4, &v) == TD_OK && v == 8.0);
    td_tensor_release(back);
    td_tensor_release(s);
    td_tensor_release(d);
  }
  td_tensor_release(x);
  /* not dlclose'd: the CUDA runtime registers exit handlers */
}

int main(void) {
  test_external_storage();
  test_plans();
  test_generator_reserve();
  test_cuda_library();
  CHECK_SUMMARY();
}
