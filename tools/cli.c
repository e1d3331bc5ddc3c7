#include "tools/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/jsonw.h"
#include "base/log.h"

#ifndef SC_EXAMPLES_DIR
#define SC_EXAMPLES_DIR "examples"
#endif

bool sc_cli_int(const char *cmd, const char *opt, const char *text, int64_t lo, int64_t hi,
                int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    sc_cli_error(cmd, "%s: '%s' is not an integer", opt, text);
    return false;
  }
  if (v < lo || v > hi) {
    sc_cli_error(cmd, "%s: %lld is out of range [%lld, %lld]", opt, v, (long long)lo,
                 (long long)hi);
    return false;
  }
  *out = v;
  return true;
}

int sc_cli_read_all(FILE *f, size_t max, char **out, size_t *len) {
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (buf == NULL) return SC_ENOMEM;
  for (;;) {
    if (n + 1 >= cap) {
      if (cap >= max + 1) {
        free(buf);
        return SC_ETOOBIG;
      }
      cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
      char *nb = realloc(buf, cap);
      if (nb == NULL) {
        free(buf);
        return SC_ENOMEM;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - 1 - n, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    free(buf);
    return SC_EIO;
  }
  if (n > max) {
    free(buf);
    return SC_ETOOBIG;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

int sc_cli_read_text_file(const char *cmd, const char *path, size_t max, char **out,
                          size_t *len) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    sc_cli_error(cmd, "cannot open %s: %s", path, strerror(errno));
    return SC_EXIT_USAGE;
  }
  const int rc = sc_cli_read_all(f, max, out, len);
  fclose(f);
  if (rc) {
    sc_cli_error(cmd, "cannot read %s: %s", path, sc_strerror(rc));
    return SC_EXIT_USAGE;
  }
  const char *nul = memchr(*out, '\0', *len);
  if (nul != NULL) {
    sc_cli_error(cmd, "%s: a NUL byte at offset %zu (not a text file?)", path,
                 (size_t)(nul - *out));
    free(*out);
    *out = NULL;
    return SC_EXIT_USAGE;
  }
  return 0;
}

void sc_cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "sparsecp %s: error: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void sc_cli_setup_logging(void) {
  const char *lv = getenv("SPARSECP_LOG");
  int level = lv ? sc_log_level_parse(lv) : SC_LOG_WARN;
  sc_log_set_level(level >= 0 ? (sc_log_level)level : SC_LOG_WARN);
  sc_log_set_sink(sc_log_stderr_sink, NULL);
}

void sc_cli_catch_stop_signals(void (*handler)(int sig)) {
  struct sigaction sa = {.sa_handler = handler};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

const char *sc_cli_example_path(const char *name, char *buf, size_t len) {
  snprintf(buf, len, "examples/%s", name);
  if (access(buf, R_OK) != 0) snprintf(buf, len, "%s/%s", SC_EXAMPLES_DIR, name);
  return buf;
}

void sc_cli_report_error(const char *cmd, bool json, const char *msg) {
  if (!json) {
    sc_cli_error(cmd, "%s", msg);
    return;
  }
  sc_jsonw w;
  sc_jsonw_init(&w);
  sc_jsonw_obj_begin(&w);
  sc_jsonw_kv_str(&w, "error", msg);
  sc_jsonw_obj_end(&w);
  printf("%s\n", sc_jsonw_str(&w));
  sc_jsonw_free(&w);
}
