/* messages.h - typed sparsecp messages: envelope, bodies, msgpack codec, validation,
 * JSON rendering (DESIGN.md §5, docs/messages.md).
 *
 * Every type is declared once, in messages/schema.def. From that table come the body
 * structs below (sc_msg_<name>), the type ids (enum sc_msg_type), and the field
 * descriptors (schema_desc.h) that one generic codec walks to encode, decode, validate,
 * deep-free, compare and render. There are no per-type encoders.
 *
 * Wire format: one msgpack array of 9 elements,
 *   [major, minor, type, step, seq, [src.node, src.slot, src.gen],
 *    [dst.node, dst.slot, dst.gen], trace_id, body]
 * where body is an array of the type's fields in declaration order (nested structs are
 * arrays too). The encoder always writes SC_MSG_MAJOR.SC_MSG_MINOR.
 *
 * Two decode paths:
 *   - sc_msg_decode: input from inside the cluster. Structural pre-check (depth, declared
 *     lengths), exact schema match and the declared field ranges.
 *   - sc_msg_decode_untrusted: input from outside (clients). First the total size limit,
 *     then the same non-allocating pre-walk of the raw bytes (nesting depth, every
 *     array/map/str/bin length against the bytes that remain) before the decoder
 *     reads them, then decoding with per-array/string bounds and field validation against
 *     sc_msg_limits (token ids below the vocabulary, prompt and generation lengths).
 *   Every rejection returns a negative SC_E* code and, in the optional sc_diag, a
 *   sentence naming the field ("client_submit.prompt[3]: token id 40000 is not below
 *   the vocabulary size 32768").
 *
 * Ownership: a decoded body is allocated by the decoder and owned by the caller, who
 * releases it with sc_msg_body_destroy(type, body). Bodies own their strings, binaries
 * and arrays (malloc'd); sc_msg_body_destroy frees them all. Encoding borrows.
 * Threads: every function is reentrant; no global mutable state.
 */
#ifndef SC_MESSAGES_H
#define SC_MESSAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/jsonw.h"
#include "messages/buf.h"
#include "plan/plan_types.h"

/* Schema version. Major: incompatible change (decoders reject other majors with
 * SC_EVERSION). Minor: fields appended; a decoder accepts a newer minor and ignores the
 * trailing fields it does not know. */
#define SC_MSG_MAJOR 1
#define SC_MSG_MINOR 10

/* Hard bound on msgpack nesting accepted anywhere. */
#define SC_MSG_MAX_DEPTH 32

typedef struct sc_actor_id {
  uint16_t node;
  uint16_t slot;
  uint32_t gen;
} sc_actor_id;

typedef struct sc_envelope {
  uint8_t major, minor; /* schema version; unknown major -> SC_EVERSION */
  uint16_t type;        /* sc_msg_type */
  uint64_t step, seq;
  sc_actor_id src, dst;
  uint64_t trace_id;
} sc_envelope;

/* The vocabulary bound of sc_msg_limits_default: the embedded model's
 * (SC_MODEL_DEFAULT_VOCAB, which the pipeline's configuration checks against this), so
 * that a decoder with the defaults accepts what `sparsecp run`'s model reads. */
#define SC_MSG_DEFAULT_VOCAB 32768

/* Limits of the untrusted path (sc_msg_limits_default gives the defaults in brackets). */
typedef struct sc_msg_limits {
  size_t max_bytes;       /* whole encoded message [1 MiB]; transient memory of one
                           * decode stays under 24x this plus the body */
  int32_t max_depth;      /* msgpack nesting, top-level array = 1 [8]; values outside
                           * [1, SC_MSG_MAX_DEPTH] mean SC_MSG_MAX_DEPTH */
  uint32_t max_array;     /* elements of any one array [1 Mi] */
  uint32_t max_str;       /* bytes of any one string [4096] */
  uint32_t max_bin;       /* bytes of any one binary [256 KiB] */
  int32_t vocab_size;     /* token ids must be below this [SC_MSG_DEFAULT_VOCAB] */
  int32_t max_prompt_len; /* client_submit prompt tokens [131072] */
  int32_t max_new_tokens; /* client_submit max_tokens [16384] */
} sc_msg_limits;

void sc_msg_limits_default(sc_msg_limits *lim);

/* ---- field types used by the generated bodies ---- */

typedef struct sc_msg_bin {
  uint8_t *data; /* malloc'd, NULL when len == 0 */
  uint32_t len;
} sc_msg_bin;

#define SC_MSG_ARRAY_TYPES(X)                                                    \
  X(u8, uint8_t) X(u16, uint16_t) X(u32, uint32_t) X(u64, uint64_t) X(i8, int8_t) \
  X(i16, int16_t) X(i32, int32_t) X(i64, int64_t) X(bool, bool) X(f32, float)    \
  X(f64, double)
#define SC_MSG_ARR_TYPEDEF(k, T) \
  typedef struct sc_msg_arr_##k { T *v; uint32_t n; } sc_msg_arr_##k;
SC_MSG_ARRAY_TYPES(SC_MSG_ARR_TYPEDEF)
#undef SC_MSG_ARR_TYPEDEF

/* C types of the schema kinds (scalar and array). Strings are NUL-terminated, owned,
 * valid UTF-8 (the decoders reject anything else) and never contain a NUL byte; a NULL
 * string encodes as "". */
#define SC_MSG_CT_U8 uint8_t
#define SC_MSG_CT_U16 uint16_t
#define SC_MSG_CT_U32 uint32_t
#define SC_MSG_CT_U64 uint64_t
#define SC_MSG_CT_I8 int8_t
#define SC_MSG_CT_I16 int16_t
#define SC_MSG_CT_I32 int32_t
#define SC_MSG_CT_I64 int64_t
#define SC_MSG_CT_BOOL bool
#define SC_MSG_CT_F32 float
#define SC_MSG_CT_F64 double
#define SC_MSG_CT_STR char *
#define SC_MSG_CT_BIN sc_msg_bin
#define SC_MSG_CT_ACTOR sc_actor_id
#define SC_MSG_AT_U8 sc_msg_arr_u8
#define SC_MSG_AT_U16 sc_msg_arr_u16
#define SC_MSG_AT_U32 sc_msg_arr_u32
#define SC_MSG_AT_U64 sc_msg_arr_u64
#define SC_MSG_AT_I8 sc_msg_arr_i8
#define SC_MSG_AT_I16 sc_msg_arr_i16
#define SC_MSG_AT_I32 sc_msg_arr_i32
#define SC_MSG_AT_I64 sc_msg_arr_i64
#define SC_MSG_AT_BOOL sc_msg_arr_bool
#define SC_MSG_AT_F32 sc_msg_arr_f32
#define SC_MSG_AT_F64 sc_msg_arr_f64

/* ---- generated: body structs ---- */

#define SC_XSTRUCT(name, ctype) typedef ctype sc_msgt_##name;
#define SC_MSG(NAME, name)                              \
  typedef struct sc_msg_##name sc_msg_##name;           \
  typedef struct sc_msg_##name sc_msgt_##name;          \
  struct sc_msg_##name {
#define SC_MSG_END(name, check) };
#define SC_F(owner, K, f) SC_MSG_CT_##K f;
#define SC_FR(owner, K, f, lo, hi) SC_MSG_CT_##K f;
#define SC_FA(owner, K, f) SC_MSG_AT_##K f;
#define SC_FAR(owner, K, f, lo, hi) SC_MSG_AT_##K f;
#define SC_FS(owner, sname, f) sc_msgt_##sname f;
#define SC_FSA(owner, sname, f) struct { sc_msgt_##sname *v; uint32_t n; } f;
#include "messages/schema.def" /* (it #undefs the SC_* macros) */

/* ---- generated: type ids (position in schema.def) ---- */

typedef enum sc_msg_type {
#define SC_MSG(NAME, name) SC_MSG_##NAME,
#include "messages/schema.def" /* (it #undefs the SC_* macros) */
  SC_MSG_COUNT
} sc_msg_type;

/* ---- bodies ---- */

/* "ping", "step_plan", ...; NULL if the type is unknown. Any thread. */
const char *sc_msg_type_name(int type);
/* Type id of a name, or -1. */
int sc_msg_type_from_name(const char *name);
/* Whether the type never crosses a process (schema.def's SC_IN_PROCESS): its body holds
 * an address in the sender's memory, or only a callback of the receiver's own process
 * sends it. A node refuses such a message from another node. Any thread. */
bool sc_msg_in_process_only(int type);
/* A zeroed body of the type (malloc'd); NULL if the type is unknown or out of memory. */
void *sc_msg_body_new(int type);
/* Frees everything the body owns, then the body. body may be NULL. */
void sc_msg_body_destroy(int type, void *body);
/* Frees everything the body owns and zeroes it; the body itself stays (for reuse, or for
 * bodies that live on the stack or inside another struct). */
void sc_msg_body_clear(int type, void *body);
/* Deep, field-by-field equality (padding is ignored; NaN equals NaN; a NULL string
 * equals ""). For tests and for checking echoes. */
bool sc_msg_body_equal(int type, const void *a, const void *b);

/* ---- codec ---- */

/* Encodes envelope + body into out, replacing its contents. env->type selects the body
 * type; env->major/minor are ignored (the current version is written). Returns 0,
 * SC_EINVAL (unknown type) or SC_ENOMEM. */
int sc_msg_encode(const sc_envelope *env, const void *body, sc_buf *out);
/* The same, appended to out's contents (which it leaves as they were on failure): the
 * tap encodes records straight into its batches this way. */
int sc_msg_encode_append(const sc_envelope *env, const void *body, sc_buf *out);

/* Decodes a message from inside the cluster. On success fills env, sets *body to a new
 * body of env->type (caller destroys it) and returns 0. On failure *body is NULL, env is
 * zeroed or holds what was read of the envelope, d (if given) says why, and the code is
 * SC_EPROTO (malformed, or not this schema),
 * SC_EVERSION (other major version), SC_ENOTSUP (unknown type id: a newer sender),
 * SC_ERANGE (a field outside its declared range) or SC_ENOMEM. */
int sc_msg_decode(const uint8_t *p, size_t n, sc_envelope *env, void **body, sc_diag *d);

/* The untrusted path (see the file comment). lim NULL means sc_msg_limits_default.
 * Additional codes: SC_ETOOBIG (total size, or an array/string/binary over its limit),
 * SC_EINVAL (a field that breaks a rule of sc_msg_limits or of the type, e.g. an
 * empty prompt). */
int sc_msg_decode_untrusted(const uint8_t *p, size_t n, const sc_msg_limits *lim,
                            sc_envelope *env, void **body, sc_diag *d);

/* Reads the envelope only (no allocation, no body validation), e.g. for routing and
 * tap topics. Returns 0, SC_EPROTO or SC_EVERSION; an unknown type id is NOT an error
 * here (a router may forward it). */
int sc_msg_peek_envelope(const uint8_t *p, size_t n, sc_envelope *env);

/* The request id of a client message that did not decode, so that its error reply can
 * name the request: when the n bytes are within lim (NULL: the defaults) and pass the
 * pre-walk, the message is an array of at least 9 elements whose third (the type) says
 * client_submit or client_cancel, and whose ninth (the body) is an array that starts
 * with an unsigned integer (the request id in both). The other envelope fields are not
 * looked at: a client of another version still learns which request failed. 0 otherwise.
 * Allocates nothing. */
uint64_t sc_msg_peek_client_request_id(const uint8_t *p, size_t n, const sc_msg_limits *lim);

/* The non-allocating structural pre-walk the decoders run first: exactly one msgpack
 * object spanning all n bytes, nesting at most max_depth (top-level container = 1),
 * every declared array/map/str/bin/ext length within the bytes that remain, no reserved
 * byte 0xc1. Returns 0 or SC_EPROTO with a message naming the offset. */
int sc_msg_prewalk(const uint8_t *p, size_t n, int max_depth, sc_diag *d);

/* Renders {"type", "version", "step", "seq", "src", "dst", "trace_id", "body": {...}}
 * as one JSON value into w (binary fields as {"len", "hex"} of their first 64 bytes,
 * actor ids as "node.slot.gen"). Returns 0, SC_EINVAL (unknown type) or SC_ENOMEM. */
int sc_msg_render_json(const sc_envelope *env, const void *body, sc_jsonw *w);
/* Renders only the body object of the given type. */
int sc_msg_render_body_json(int type, const void *body, sc_jsonw *w);

/* ---- the step plan ---- */

/* Fills m (clearing what it owned) with a copy of the plan in its wire form
 * (sc_plan_wire_of, plan/plan_wire.h); req_ids NULL there gives zeros. Returns 0 or
 * SC_ENOMEM. */
int sc_msg_step_plan_from_wire(const sc_plan_wire *w, sc_msg_step_plan *m);

/* Views a received step plan in the planner's wire form (w borrows m's arrays), for the
 * receiving rank's check, sc_plan_from_wire. */
void sc_msg_step_plan_wire(const sc_msg_step_plan *m, sc_plan_wire *w);

#endif
