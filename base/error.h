/* error.h - error codes shared by every sparsecp module.
 *
 * Functions return 0 on success or a negative SC_E* code (libuv style), never rely on
 * errno. Where input can cause the failure, the function also takes an optional
 * sc_diag that receives a sentence a user can act on ("pcp=3 with dcp=2: ..."), because
 * a bare code cannot name the broken rule.
 */
#ifndef SC_ERROR_H
#define SC_ERROR_H

#include <stddef.h>

/* X-macro: name, value, default description. Values are stable (they cross the wire). */
#define SC_ERRNO_MAP(X)                                                      \
  X(EINVAL,    -1,  "invalid argument")                                     \
  X(ENOMEM,    -2,  "out of memory")                                        \
  X(ERANGE,    -3,  "value out of range")                                   \
  X(ENOTSUP,   -4,  "not supported")                                        \
  X(EPROTO,    -5,  "protocol error (malformed message)")                   \
  X(ETOOBIG,   -6,  "message or input too large")                           \
  X(ETIMEDOUT, -7,  "timed out")                                            \
  X(EIO,       -8,  "input/output error")                                   \
  X(ENOENT,    -9,  "not found")                                            \
  X(EAGAIN,    -10, "resource temporarily unavailable")                     \
  X(ECLOSED,   -11, "closed")                                               \
  X(EDESYNC,   -12, "collective does not match the plan")                   \
  X(EABORTED,  -13, "step aborted")                                         \
  X(EDOWN,     -14, "peer is down")                                         \
  X(EVERSION,  -15, "unsupported schema version")                           \
  X(EFULL,     -16, "queue or cache full")                                  \
  X(ECANCELED, -17, "canceled")                                             \
  X(ESYS,      -18, "system call failed")                                  \
  X(EDEVICE,   -19, "the device failed (its context is unusable)")      \
  X(EPERM,     -20, "not permitted")

enum {
  SC_OK = 0,
#define SC_ERRNO_ENUM(name, val, desc) SC_##name = (val),
  SC_ERRNO_MAP(SC_ERRNO_ENUM)
#undef SC_ERRNO_ENUM
};

/* Static description of an error code; unknown codes give "unknown error". Any thread. */
const char *sc_strerror(int err);
/* Symbolic name ("EINVAL") of an error code, or "UNKNOWN". Any thread. */
const char *sc_errname(int err);

/* A human-readable reason attached to a failure. Callers may pass NULL when they only
 * want the code. The message is always NUL-terminated and truncated to fit. */
typedef struct sc_diag {
  int code;
  char msg[320];
} sc_diag;

/* Records code and a printf-style message in d (if d is not NULL); returns code, so a
 * failing function can write `return sc_fail(d, SC_EINVAL, "...", ...);`. */
int sc_fail(sc_diag *d, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The message of d, or sc_strerror(d->code) when no message was recorded. */
const char *sc_diag_message(const sc_diag *d);

#endif
