#include "tools/bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double sc_bench_median(const double *samples, int n) {
  if (n <= 0) return 0;
  double *tmp = malloc(sizeof *tmp * (size_t)n);
  if (tmp == NULL) return samples[0];
  memcpy(tmp, samples, sizeof *tmp * (size_t)n);
  qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
  const double m = n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
  free(tmp);
  return m;
}

double sc_bench_percentile(double *v, int n, double p) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  const int k = (int)ceil(p / 100.0 * n) - 1;
  return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

void sc_bench_add(sc_bench *b, const char *name, const char *params, const char *unit,
                  const double *samples, int n, const char *extra) {
  double lo = samples[0], hi = samples[0];
  for (int i = 1; i < n; i++) {
    if (samples[i] < lo) lo = samples[i];
    if (samples[i] > hi) hi = samples[i];
  }
  const double med = sc_bench_median(samples, n);
  sc_jsonw *w = &b->results;
  sc_jsonw_obj_begin(w);
  sc_jsonw_kv_str(w, "name", name);
  sc_jsonw_key(w, "params");
  char obj[1024];
  int len = snprintf(obj, sizeof obj, "{%s}", params ? params : "");
  sc_jsonw_raw(w, obj, (size_t)len);
  sc_jsonw_kv_str(w, "unit", unit);
  sc_jsonw_kv_double(w, "median", med);
  sc_jsonw_kv_double(w, "min", lo);
  sc_jsonw_kv_double(w, "max", hi);
  sc_jsonw_kv_int(w, "runs", n);
  if (extra && extra[0]) {
    /* extra members are spliced in as raw text after a comma */
    sc_jsonw_raw(w, extra, strlen(extra));
  }
  sc_jsonw_obj_end(w);
  b->num_results++;
  if (!b->json) {
    printf("%-28s %-58s %12.4g %-8s (min %.4g, max %.4g, %d runs)%s%s\n", name,
           params ? params : "", med, unit, lo, hi, n, extra && extra[0] ? " " : "",
           extra ? extra : "");
    fflush(stdout);
  }
}

void sc_bench_time(void (*fn)(void *ctx), void *ctx, int runs, double min_seconds,
                   double *samples) {
  /* Calibrate the inner repetition count so one sample lasts about min_seconds. */
  int64_t reps = 1;
  for (;;) {
    const uint64_t t0 = sc_now_ns();
    for (int64_t i = 0; i < reps; i++) fn(ctx);
    const double dt = (double)(sc_now_ns() - t0) * 1e-9;
    if (dt >= min_seconds || reps >= (1ll << 30)) break;
    reps = dt <= 0 ? reps * 10 : (int64_t)(reps * (min_seconds * 1.2 / dt)) + 1;
  }
  for (int r = 0; r < runs; r++) {
    const uint64_t t0 = sc_now_ns();
    for (int64_t i = 0; i < reps; i++) fn(ctx);
    samples[r] = (double)(sc_now_ns() - t0) * 1e-9 / (double)reps;
  }
}

/* Defined when jemalloc is the process's malloc (linked in, or preloaded). */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
    __attribute__((weak));

void sc_bench_machine(char *buf, int len) {
  char model[256] = "unknown cpu";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0) {
        const char *p = strchr(line, ':');
        if (p) {
          p++;
          while (*p == ' ') p++;
          snprintf(model, sizeof model, "%s", p);
          model[strcspn(model, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(f);
  }
  struct utsname u;
  uname(&u);
  snprintf(buf, (size_t)len, "%s, %ld cores, %s %s %s, %s", model,
           sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, u.machine,
           mallctl != NULL ? "jemalloc" : "libc malloc");
}

int sc_bench_run(sc_bench *b, const char *label, sc_bench_fn fn) {
  char machine[512], date[32];
  sc_bench_machine(machine, sizeof machine);
  const time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  if (!b->json) printf("bench %s on %s, %s\n", label, machine, date);

  sc_jsonw_init(&b->results);
  sc_jsonw_arr_begin(&b->results);
  const int rc = fn(b);
  sc_jsonw_arr_end(&b->results);
  if (rc == 0 && b->json) {
    sc_jsonw w;
    sc_jsonw_init(&w);
    sc_jsonw_obj_begin(&w);
    sc_jsonw_kv_str(&w, "bench", b->kind);
    sc_jsonw_kv_str(&w, "machine", machine);
    sc_jsonw_kv_str(&w, "date", date);
    sc_jsonw_key(&w, "results");
    sc_jsonw_raw(&w, sc_jsonw_str(&b->results), b->results.len);
    sc_jsonw_obj_end(&w);
    puts(sc_jsonw_str(&w));
    sc_jsonw_free(&w);
  }
  sc_jsonw_free(&b->results);
  return rc;
}

int sc_bench_pick(const char *list, int n, const char *(*name_of)(int i), bool *on) {
  char copy[128], *save = NULL;
  const int len = snprintf(copy, sizeof copy, "%s", list);
  if (len < 0 || (size_t)len >= sizeof copy) return -1;
  int read = 0;
  for (char *it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save), read++) {
    int i = 0;
    while (i < n && strcmp(it, name_of(i)) != 0) i++;
    if (i == n) return -1;
    on[i] = true;
  }
  return read;
}
