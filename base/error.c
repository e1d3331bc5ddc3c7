#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *sc_strerror(int err) {
  switch (err) {
  case SC_OK: return "success";
#define SC_ERRNO_DESC(name, val, desc) case SC_##name: return desc;
  SC_ERRNO_MAP(SC_ERRNO_DESC)
#undef SC_ERRNO_DESC
  default: return "unknown error";
  }
}

const char *sc_errname(int err) {
  switch (err) {
  case SC_OK: return "OK";
#define SC_ERRNO_NAME(name, val, desc) case SC_##name: return #name;
  SC_ERRNO_MAP(SC_ERRNO_NAME)
#undef SC_ERRNO_NAME
  default: return "UNKNOWN";
  }
}

int sc_fail(sc_diag *d, int code, const char *fmt, ...) {
  if (d != NULL) {
    va_list ap;
    va_start(ap, fmt);
    d->code = code;
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

const char *sc_diag_message(const sc_diag *d) {
  if (d == NULL) return "";
  return d->msg[0] != '\0' ? d->msg : sc_strerror(d->code);
}
