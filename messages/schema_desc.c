/* schema_desc.c - the field descriptor tables, generated from schema.def by expanding
 * it once more. Also the compile-time checks that every field of an existing C struct
 * (the planner's types) really has the width its declared kind says. */
#include "messages/schema_desc.h"

#include <stddef.h>

/* Pass 1: compile-time width checks of the fields of existing structs. */
#define SC_XF(owner, K, f)                                                          \
  _Static_assert(sizeof(((sc_msgt_##owner *)0)->f) == sizeof(SC_MSG_CT_##K),         \
                 #owner "." #f " does not have the width of " #K);
#define SC_XFR(owner, K, f, lo, hi) SC_XF(owner, K, f)
#include "messages/schema.def" /* (it #undefs the SC_* macros) */

/* Pass 2: one field table and one descriptor per struct and message. */
#define FIELD(owner, K, ELEM, f, has, lo_, hi_, sub_)                              \
  {.name = #f, .kind = K, .elem = ELEM, .has_range = has,                          \
   .offset = offsetof(sc_msgt_##owner, f), .lo = (lo_), .hi = (hi_), .sub = sub_},
#define SC_XSTRUCT(name, ctype) static const sc_msg_field k_fields_##name[] = {
#define SC_END(nm, check_)                                                         \
  };                                                                               \
  static const sc_msg_desc k_desc_##nm = {                                         \
      .name = #nm, .size = sizeof(sc_msgt_##nm), .fields = k_fields_##nm,          \
      .num_fields = sizeof k_fields_##nm / sizeof k_fields_##nm[0],                \
      .check = check_};
#define SC_MSG(NAME, name) SC_XSTRUCT(name, sc_msg_##name)
#define SC_MSG_END(name, check_) SC_END(name, check_)
#define SC_XF(owner, K, f) FIELD(owner, SC_FK_##K, 0, f, false, 0, 0, NULL)
#define SC_XFR(owner, K, f, lo, hi) FIELD(owner, SC_FK_##K, 0, f, true, lo, hi, NULL)
#define SC_F(owner, K, f) SC_XF(owner, K, f)
#define SC_FR(owner, K, f, lo, hi) SC_XFR(owner, K, f, lo, hi)
#define SC_FA(owner, K, f) FIELD(owner, SC_FK_ARRAY, SC_FK_##K, f, false, 0, 0, NULL)
#define SC_FAR(owner, K, f, lo, hi) FIELD(owner, SC_FK_ARRAY, SC_FK_##K, f, true, lo, hi, NULL)
#define SC_FS(owner, sname, f) FIELD(owner, SC_FK_STRUCT, 0, f, false, 0, 0, &k_desc_##sname)
#define SC_FSA(owner, sname, f) FIELD(owner, SC_FK_SARRAY, 0, f, false, 0, 0, &k_desc_##sname)
#include "messages/schema.def"

/* Pass 3: the message table, indexed by type id. */
#define SC_MSG(NAME, name) [SC_MSG_##NAME] = &k_desc_##name,
static const sc_msg_desc *const k_msgs[SC_MSG_COUNT] = {
#include "messages/schema.def"
};

const sc_msg_desc *sc_msg_desc_of(int type) {
  return type >= 0 && type < SC_MSG_COUNT ? k_msgs[type] : NULL;
}

size_t sc_msg_kind_size(int kind) {
  static const size_t sizes[] = {
      [SC_FK_U8] = 1, [SC_FK_U16] = 2, [SC_FK_U32] = 4, [SC_FK_U64] = 8,
      [SC_FK_I8] = 1, [SC_FK_I16] = 2, [SC_FK_I32] = 4, [SC_FK_I64] = 8,
      [SC_FK_BOOL] = sizeof(bool), [SC_FK_F32] = 4, [SC_FK_F64] = 8,
      [SC_FK_STR] = sizeof(char *), [SC_FK_BIN] = sizeof(sc_msg_bin),
      [SC_FK_ACTOR] = sizeof(sc_actor_id), [SC_FK_ARRAY] = sizeof(sc_msg_arr_any),
      [SC_FK_STRUCT] = 0, [SC_FK_SARRAY] = sizeof(sc_msg_arr_any)};
  return kind >= 0 && kind < SC_FK_COUNT ? sizes[kind] : 0;
}

const char *sc_msg_kind_name(int kind) {
  static const char *const names[] = {
      "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "bool", "f32", "f64",
      "str", "bin", "actor", "array", "struct", "struct[]"};
  return kind >= 0 && kind < SC_FK_COUNT ? names[kind] : "?";
}

/* The generic array header must match the layout of every generated array type. */
_Static_assert(offsetof(sc_msg_arr_i32, n) == offsetof(sc_msg_arr_any, n), "array layout");
_Static_assert(sizeof(sc_msg_arr_f64) == sizeof(sc_msg_arr_any), "array layout");
