/* widest.h: WIDEST compiles a function for AVX-512, AVX2 and the baseline, the loader
 * picking the widest the CPU runs (GCC's and clang's target_clones). For simple loops
 * that the compiler vectorises: the order of operations stays the one written, so every
 * version gives the same bits. Off under sanitizers (their runtimes and ifuncs clash). */
#ifndef TD_KERNELS_WIDEST_H
#define TD_KERNELS_WIDEST_H

#if defined(__has_feature) /* clang says it this way */
#if __has_feature(address_sanitizer)
#define __SANITIZE_ADDRESS__ 1
#endif
#endif

#if defined(__x86_64__) && defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
/* clang 14's backend fails on some int64 compares of the avx512f clone: AVX2 at most */
#define WIDEST __attribute__((target_clones("avx2", "default")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WIDEST
#endif

#endif
