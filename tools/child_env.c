/* child_env.c - the environment of a child process, built before the fork (child_env.h). */
#include "tools/child_env.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* Whether entry "NAME=..." is variable name. */
static bool is_var(const char *entry, const char *name) {
  const size_t len = strlen(name);
  return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

char **sc_child_env_new(const char *const *names, const char *const *values, size_t n) {
  char *const none[] = {NULL};
  char *const *env = environ ? environ : none; /* (after clearenv) */
  size_t count = 0, bytes = 0;
  for (char *const *e = env; *e; e++) count++;
  for (size_t i = 0; i < n; i++)
    if (values[i]) bytes += strlen(names[i]) + 1 + strlen(values[i]) + 1;
  char **out = malloc((count + n + 1) * sizeof *out + bytes);
  if (out == NULL) return NULL;
  char *s = (char *)(out + count + n + 1);
  size_t k = 0;
  for (char *const *e = env; *e; e++) {
    bool set = false;
    for (size_t i = 0; i < n && !set; i++) set = values[i] && is_var(*e, names[i]);
    if (!set) out[k++] = *e;
  }
  for (size_t i = 0; i < n; i++)
    if (values[i]) {
      out[k++] = s;
      s += sprintf(s, "%s=%s", names[i], values[i]) + 1;
    }
  out[k] = NULL;
  return out;
}
