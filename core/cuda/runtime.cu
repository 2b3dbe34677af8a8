/*
 * runtime.cu: errors, devices and streams of the CUDA backend.
 *
 * Errors go into libtensordict's thread-local error (td_set_error), so callers read
 * CUDA failures exactly as they read the CPU library's. Every kernel and copy of this
 * library runs on one non-blocking stream per device: work stays in order, and a block
 * freed into the allocator's cache may be handed out again at once (later work on the
 * same stream runs after the work that used it).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "cuda_internal.h"

int32_t tdc_fail(int32_t status, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  td_set_error(status, msg);
  return status;
}

bool tdc_check(cudaError_t e, const char *call) {
  if (e == cudaSuccess) return true;
  const int32_t status = e == cudaErrorMemoryAllocation ? TD_ENOMEM : TD_EINVAL;
  /* A sticky error stays on the context; later calls fail with it too. */
  const bool sticky = e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure ||
                      e == cudaErrorAssert || e == cudaErrorIllegalInstruction ||
                      e == cudaErrorMisalignedAddress;
  tdc_fail(status, "%s: CUDA error: %s (%s)%s", call, cudaGetErrorString(e), cudaGetErrorName(e),
           sticky ? "; the CUDA context is unusable until the process restarts" : "");
  if (!sticky) cudaGetLastError(); /* clears a non-sticky error so later calls work */
  return false;
}

bool tdc_launched(const char *call) { return tdc_check(cudaGetLastError(), call); }

TDC_EXPORT int32_t td_cuda_abi_version(void) { return TD_CUDA_ABI_VERSION; }

TDC_EXPORT int32_t td_cuda_device_count(const char **reason) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (reason) *reason = cudaGetErrorString(e);
    return -1;
  }
  if (n == 0) {
    if (reason) *reason = "no CUDA device was found";
    return -1;
  }
  if (reason) *reason = "";
  return n;
}

TDC_EXPORT int32_t td_cuda_set_device(int32_t device) {
  return tdc_use_device("set_device", device) ? TD_OK : td_last_status();
}

TDC_EXPORT int32_t td_cuda_current_device(void) {
  int d = 0;
  if (!tdc_check(cudaGetDevice(&d), "current_device")) return td_last_status();
  return d;
}

bool tdc_use_device(const char *call, int32_t device) {
  int n = 0;
  if (!tdc_check(cudaGetDeviceCount(&n), call)) return false;
  if (device < 0 || device >= n) {
    tdc_fail(TD_EINVAL, "%s: device cuda:%d does not exist (%d device%s)", call, (int)device, n,
             n == 1 ? "" : "s");
    return false;
  }
  int cur = -1;
  if (cudaGetDevice(&cur) == cudaSuccess && cur == device) return true;
  return tdc_check(cudaSetDevice(device), call);
}

enum { TDC_MAX_DEVICES = 64 };
static cudaStream_t streams[TDC_MAX_DEVICES];
static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;

cudaStream_t tdc_stream(void) {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess || d < 0 || d >= TDC_MAX_DEVICES) return 0;
  pthread_mutex_lock(&stream_lock);
  if (!streams[d] && cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking) != cudaSuccess)
    streams[d] = 0; /* the legacy stream: still in order */
  cudaStream_t s = streams[d];
  pthread_mutex_unlock(&stream_lock);
  return s;
}

TDC_EXPORT int32_t td_cuda_synchronize(void) {
  if (!tdc_check(cudaStreamSynchronize(tdc_stream()), "synchronize")) return td_last_status();
  return tdc_check(cudaDeviceSynchronize(), "synchronize") ? TD_OK : td_last_status();
}

bool tdc_read_flag(const char *call, const int32_t *dflag, int32_t *out) {
  cudaStream_t s = tdc_stream();
  return tdc_check(cudaMemcpyAsync(out, dflag, sizeof *out, cudaMemcpyDeviceToHost, s), call) &&
         tdc_check(cudaStreamSynchronize(s), call);
}
