/* schema_desc.h - field descriptors generated from schema.def, the data the generic
 * codec (codec.c), body functions (body.c), JSON rendering (render.c) and the tests'
 * random message generator walk. Read-only static tables; any thread.
 */
#ifndef SC_SCHEMA_DESC_H
#define SC_SCHEMA_DESC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "messages/messages.h"

/* Field kinds. The scalar kinds come first (kind <= SC_FK_F64 means "scalar"). */
typedef enum sc_msg_kind {
  SC_FK_U8, SC_FK_U16, SC_FK_U32, SC_FK_U64,
  SC_FK_I8, SC_FK_I16, SC_FK_I32, SC_FK_I64,
  SC_FK_BOOL, SC_FK_F32, SC_FK_F64,
  SC_FK_STR, SC_FK_BIN, SC_FK_ACTOR,
  SC_FK_ARRAY,  /* array of scalars of kind `elem`: {T *v; uint32_t n;} */
  SC_FK_STRUCT, /* nested struct `sub`, by value */
  SC_FK_SARRAY, /* array of nested structs `sub`: {T *v; uint32_t n;} */
  SC_FK_COUNT
} sc_msg_kind;

static inline bool sc_msg_kind_is_scalar(int k) { return k <= SC_FK_F64; }
static inline bool sc_msg_kind_is_int(int k) { return k <= SC_FK_I64; }
static inline bool sc_msg_kind_is_signed(int k) { return k >= SC_FK_I8 && k <= SC_FK_I64; }

struct sc_msg_desc;

typedef int (*sc_msg_check_fn)(const void *body, const sc_msg_limits *lim, sc_diag *d);

typedef struct sc_msg_field {
  const char *name;
  uint8_t kind;      /* sc_msg_kind */
  uint8_t elem;      /* SC_FK_ARRAY: scalar kind of the elements */
  bool has_range;    /* integers: value (or each element) within [lo, hi] */
  size_t offset;
  int64_t lo, hi;
  const struct sc_msg_desc *sub; /* SC_FK_STRUCT, SC_FK_SARRAY */
} sc_msg_field;

typedef struct sc_msg_desc {
  const char *name;
  size_t size;                 /* sizeof the C struct */
  const sc_msg_field *fields;
  uint32_t num_fields;
  sc_msg_check_fn check;       /* rules beyond ranges, or NULL */
} sc_msg_desc;

/* Descriptor of a message type, or NULL if unknown. */
const sc_msg_desc *sc_msg_desc_of(int type);

/* Size in bytes of a scalar kind. */
size_t sc_msg_kind_size(int kind);
/* "u8", ..., "struct[]" */
const char *sc_msg_kind_name(int kind);

/* The header of every array-valued field ({T *v; uint32_t n;} for any T has this
 * layout). */
typedef struct sc_msg_arr_any {
  void *v;
  uint32_t n;
} sc_msg_arr_any;

/* Loads an integer or bool scalar of kind k as 64 bits (signed kinds sign-extended). */
static inline uint64_t sc_msg_load_int(int k, const void *p) {
  switch (k) {
  case SC_FK_U8: return *(const uint8_t *)p;
  case SC_FK_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
  case SC_FK_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
  case SC_FK_U64: { uint64_t v; memcpy(&v, p, 8); return v; }
  case SC_FK_I8: return (uint64_t)(int64_t)*(const int8_t *)p;
  case SC_FK_I16: { int16_t v; memcpy(&v, p, 2); return (uint64_t)(int64_t)v; }
  case SC_FK_I32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
  case SC_FK_I64: { int64_t v; memcpy(&v, p, 8); return (uint64_t)v; }
  case SC_FK_BOOL: return *(const bool *)p ? 1 : 0;
  default: return 0;
  }
}

/* Stores the low bits of v into an integer or bool scalar of kind k. */
static inline void sc_msg_store_int(int k, void *p, uint64_t v) {
  switch (k) {
  case SC_FK_U8: case SC_FK_I8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
  case SC_FK_U16: case SC_FK_I16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
  case SC_FK_U32: case SC_FK_I32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
  case SC_FK_U64: case SC_FK_I64: memcpy(p, &v, 8); break;
  case SC_FK_BOOL: *(bool *)p = v != 0; break;
  default: break;
  }
}

/* sc_msg_peek_envelope that also says where the body starts (the 9th top-level element,
 * at byte *body_at) and how many top-level elements there are (at least 9), so that
 * the decoder does not read the envelope twice. */
int sc_msg_peek_envelope_body(const uint8_t *p, size_t n, sc_envelope *env, size_t *body_at,
                              uint64_t *elements);

/* Type-specific checks named in schema.def (check.c). */
int sc_msg_check_client_submit(const void *body, const sc_msg_limits *lim, sc_diag *d);
int sc_msg_check_client_token(const void *body, const sc_msg_limits *lim, sc_diag *d);
int sc_msg_check_global_batch(const void *body, const sc_msg_limits *lim, sc_diag *d);

#endif
