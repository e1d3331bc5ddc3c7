/* index.c - see index.h. */
#include "base/index.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* Fibonacci hashing: the multiply spreads sequential keys (request ids) over the table. */
static size_t home(const sc_index *x, uint64_t h) {
  return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 29) & x->mask;
}

static int32_t *empty_table(size_t slots) {
  int32_t *t = malloc(sizeof *t * slots);
  if (t) memset(t, 0xff, sizeof *t * slots); /* all -1 */
  return t;
}

int sc_index_init(sc_index *x, size_t expect) {
  size_t slots = 16;
  while (slots < 2 * expect) slots <<= 1;
  x->slot = empty_table(slots);
  x->mask = slots - 1;
  x->used = 0;
  return x->slot ? 0 : SC_ENOMEM;
}

void sc_index_free(sc_index *x) {
  free(x->slot);
  x->slot = NULL;
  x->mask = 0;
  x->used = 0;
}

static void insert(sc_index *x, uint64_t h, int32_t pos) {
  size_t i = home(x, h);
  while (x->slot[i] >= 0) i = (i + 1) & x->mask;
  x->slot[i] = pos;
  x->used++;
}

int sc_index_put(sc_index *x, uint64_t h, int32_t pos, sc_index_hash_fn hash_of,
                 const void *ctx) {
  if (x->slot == NULL) return SC_EINVAL; /* never initialised, or freed */
  if (2 * (x->used + 1) > x->mask + 1) {
    const size_t slots = 2 * (x->mask + 1);
    sc_index grown = {empty_table(slots), slots - 1, 0};
    if (grown.slot == NULL) return SC_ENOMEM;
    for (size_t i = 0; i <= x->mask; i++)
      if (x->slot[i] >= 0) insert(&grown, hash_of(ctx, x->slot[i]), x->slot[i]);
    free(x->slot);
    *x = grown;
  }
  insert(x, h, pos);
  return 0;
}

int32_t sc_index_find(const sc_index *x, uint64_t h, sc_index_eq_fn eq, const void *ctx,
                      const void *key) {
  for (size_t i = home(x, h); x->slot[i] >= 0; i = (i + 1) & x->mask)
    if (eq(ctx, x->slot[i], key)) return x->slot[i];
  return -1;
}

void sc_index_del(sc_index *x, uint64_t h, int32_t pos, sc_index_hash_fn hash_of,
                  const void *ctx) {
  size_t i = home(x, h);
  while (x->slot[i] != pos) {
    if (x->slot[i] < 0) return;
    i = (i + 1) & x->mask;
  }
  /* Backward shift: an entry further on may move into the hole when the hole lies on its
   * probe path, i.e. (cyclically) between its home and where it sits. */
  for (size_t j = (i + 1) & x->mask; x->slot[j] >= 0; j = (j + 1) & x->mask) {
    const size_t k = home(x, hash_of(ctx, x->slot[j]));
    const bool hole_on_path = i <= j ? (k <= i || k > j) : (k <= i && k > j);
    if (hole_on_path) {
      x->slot[i] = x->slot[j];
      i = j;
    }
  }
  x->slot[i] = -1;
  x->used--;
}
