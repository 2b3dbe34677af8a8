/*
 * sort_rows.h: the machinery sort.c, select.c and unique.c share (not ABI).
 *
 * Every dtype sorts by an order-preserving unsigned key of its own width (1, 2, 4 or 8
 * bytes): bool as 0/1, integers with the sign bit flipped, floats by their bits (negative
 * ones inverted, the sign bit set on the others), -0.0 keyed as 0.0 and every NaN as the
 * greatest key, so keys compare as torch.sort compares the values. Descending order
 * inverts the keys.
 *
 * A row of n elements becomes n items, each its key with its position beside it, so that
 * items are all different and their order is the stable order of the values:
 *   TD_ITEMS_K32I  uint64_t,    key << 32 | position  (keys of <= 4 bytes, n < 2^32)
 *   TD_ITEMS_K64I  td_u128,     key << 64 | position  (8-byte keys, or longer rows)
 *   TD_ITEMS_K32   uint32_t,    the key alone         (where positions are not needed)
 *   TD_ITEMS_K64   uint64_t,    the key alone
 * td_items_sort sorts items by their key bytes with an LSD radix sort (one pass per key
 * byte, passes where every key has the same byte skipped; rows longer than a few
 * thousand items are cut into fixed chunks whose histograms and scatters run on the
 * pool's threads) and short rows by insertion. Keys and positions make every item
 * different, so the sorted order, and every selection of it, is the one order there is:
 * the results never depend on the thread count.
 */
#ifndef TD_SORT_ROWS_H
#define TD_SORT_ROWS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tensordict.h"

typedef unsigned __int128 td_u128;

enum td_items_kind { TD_ITEMS_K32I = 0, TD_ITEMS_K64I = 1, TD_ITEMS_K32 = 2, TD_ITEMS_K64 = 3 };

/* Bytes of one item of kind. */
int64_t td_items_size(int kind);
/* The kind for a row of n elements of dtype, with or without positions. */
int td_items_kind(int32_t dtype, int64_t n, bool positions);
/* Key bytes of dtype (its itemsize). */
int td_key_bytes(int32_t dtype);

/* What td_items_build saw in the row: a NaN, a -0.0, a bool byte other than 0 and 1
 * (values a key does not give back exactly: read those from the source by position). */
enum { TD_ROW_NAN = 1, TD_ROW_NEGZERO = 2, TD_ROW_ODD = 4 };

/* n elements of dtype at src (contiguous) as items of kind (positions from 0), keys
 * inverted when desc; returns TD_ROW_* flags. Long rows are built on the pool. */
int td_items_build(const void *src, int32_t dtype, int64_t n, bool desc, int kind, void *items);
/* Sorts n items of kind by their keys (key_bytes of them); tmp holds n more. Returns
 * the buffer that holds the result (items or tmp); NULL when out of memory. */
void *td_items_sort(void *items, void *tmp, int64_t n, int kind, int key_bytes);
/* Sorts n items by all their bytes, positions included: the stable order again for
 * items no longer in the order of their positions (a selection's). */
void *td_items_sort_full(void *items, void *tmp, int64_t n, int kind);
/* Rearranges n items of kind so that the one of rank k (0-based) is at k, smaller ones
 * before it and larger ones after it (introselect; the items are all different). */
void td_items_select(void *items, int64_t n, int64_t k, int kind);
/* Item i's key and position. */
static inline uint64_t td_item_key(const void *items, int kind, int64_t i) {
  switch (kind) {
    case TD_ITEMS_K32I: return ((const uint64_t *)items)[i] >> 32;
    case TD_ITEMS_K64I: return (uint64_t)(((const td_u128 *)items)[i] >> 64);
    case TD_ITEMS_K32: return ((const uint32_t *)items)[i];
    default: return ((const uint64_t *)items)[i];
  }
}
static inline int64_t td_item_pos(const void *items, int kind, int64_t i) {
  if (kind == TD_ITEMS_K32I) return (int64_t)(((const uint64_t *)items)[i] & 0xffffffffu);
  return (int64_t)(uint64_t)((const td_u128 *)items)[i];
}
/* The key of dtype's greatest value class (every NaN), the all-ones key of its width. */
uint64_t td_key_all(int32_t dtype);
/* Writes the element whose key is key (not inverted) as dtype into dst. */
void td_key_store(int32_t dtype, uint64_t key, void *dst);
/* Reads element i of a contiguous dtype buffer as a double. */
double td_load_f64(int32_t dtype, const void *src, int64_t i);

/* ---- keys ------------------------------------------------------------------------------
 * KEY_<kind>(DT, LO, x): the key of stored value x (DT the stored type, LO its lowest value,
 * from the dtype table's columns); UNKEY_<kind>(DT, LO, k) the value back; ODD_<kind>(x)
 * the TD_ROW_* flags of a value its key does not give back. Inline for the loops that
 * compute keys element by element (sort.c's items, select.c's topk scan). */

/* The all-ones mask of DT's width. */
#define TD_KMASK(DT) (~(uint64_t)0 >> (64 - 8 * sizeof(DT)))

static inline uint64_t td_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
static inline uint64_t td_f64_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}
static inline float td_f32_of(uint64_t u) {
  uint32_t v = (uint32_t)u;
  float x;
  memcpy(&x, &v, 4);
  return x;
}
static inline double td_f64_of(uint64_t u) {
  double x;
  memcpy(&x, &u, 8);
  return x;
}

/* The key of a float's bits u (bits wide, inf: the bits of +inf): NaN greatest, -0.0 as
 * 0.0, negative values inverted, the sign bit set on the others (no branch on the sign). */
static inline uint64_t td_fkey(uint64_t u, unsigned bits, uint64_t inf) {
  const uint64_t sign = (uint64_t)1 << (bits - 1), all = ~(uint64_t)0 >> (64 - bits);
  const uint64_t a = u & (sign - 1);
  uint64_t k = u ^ ((((uint64_t)0 - (u >> (bits - 1))) & all) | sign);
  k = a == 0 ? sign : k;
  return a > inf ? all : k;
}
/* The bits of a float key (a NaN for the NaN key, +0.0 for the zero key). */
static inline uint64_t td_funkey(uint64_t k, unsigned bits) {
  const uint64_t sign = (uint64_t)1 << (bits - 1), all = ~(uint64_t)0 >> (64 - bits);
  return k ^ ((((k >> (bits - 1)) - 1) & all) | sign);
}

#define TD_SIGN_FLIP(DT, LO) ((LO) < 0 ? (uint64_t)1 << (8 * sizeof(DT) - 1) : 0)
#define KEY_B(DT, LO, x) ((uint64_t)((x) != 0))
#define KEY_I(DT, LO, x) (((uint64_t)(x) ^ TD_SIGN_FLIP(DT, LO)) & TD_KMASK(DT))
#define KEY_H(DT, LO, x) td_fkey((x), 16, 0x7c00)
#define KEY_BF(DT, LO, x) td_fkey((x), 16, 0x7f80)
#define KEY_F(DT, LO, x)                                                         \
  (sizeof(DT) == 4 ? td_fkey(td_f32_bits((float)(x)), 32, 0x7f800000u)          \
                   : td_fkey(td_f64_bits((double)(x)), 64, 0x7ff0000000000000u))
#define UNKEY_B(DT, LO, k) ((DT)(k))
#define UNKEY_I(DT, LO, k) ((DT)((k) ^ TD_SIGN_FLIP(DT, LO)))
#define UNKEY_H(DT, LO, k) ((DT)td_funkey((k), 16))
#define UNKEY_BF(DT, LO, k) ((DT)td_funkey((k), 16))
#define UNKEY_F(DT, LO, k) \
  ((DT)(sizeof(DT) == 4 ? (double)td_f32_of(td_funkey((k), 32)) : td_f64_of(td_funkey((k), 64))))
/* TD_ROW_NAN and TD_ROW_NEGZERO of a float's bits, without branches (the loops vectorise). */
static inline int td_fodd(uint64_t u, unsigned bits, uint64_t inf) {
  const uint64_t sign = (uint64_t)1 << (bits - 1);
  return ((u & (sign - 1)) > inf ? TD_ROW_NAN : 0) | (u == sign ? TD_ROW_NEGZERO : 0);
}
#define ODD_B(DT, x) ((x) > 1 ? TD_ROW_ODD : 0)
#define ODD_I(DT, x) 0
#define ODD_H(DT, x) td_fodd((x), 16, 0x7c00)
#define ODD_BF(DT, x) td_fodd((x), 16, 0x7f80)
#define ODD_F(DT, x)                                                   \
  (sizeof(DT) == 4 ? td_fodd(td_f32_bits((float)(x)), 32, 0x7f800000u) \
                   : td_fodd(td_f64_bits((double)(x)), 64, 0x7ff0000000000000u))

/* t with dim moved last, contiguous (t itself retained when it already is); a 0-dim t
 * is one row of one element. NULL on failure (the error set). */
td_tensor *td_rows_of(const td_tensor *t, int32_t dim, const char *call);
/* Permutes a tensor laid out as td_rows_of's (dim last) back to t's order of dims,
 * contiguous; releases moved. NULL on failure. */
td_tensor *td_rows_back(td_tensor *moved, const td_tensor *t, int32_t dim);

#endif
