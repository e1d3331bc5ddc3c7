/* log.h - the one pluggable, leveled logger of the library.
 *
 * The library never prints. It calls the installed sink, which the program chooses
 * (the sparsecp tool installs a stderr sink; tests may capture). With no sink installed,
 * messages are dropped. The level check is a relaxed atomic load, so disabled levels cost
 * one comparison and no formatting.
 *
 * Threads: sc_log_write and the macros may be called from any thread. Install the sink
 * before starting threads; the sink itself must be thread-safe.
 */
#ifndef SC_LOG_H
#define SC_LOG_H

typedef enum sc_log_level {
  SC_LOG_ERROR = 0,
  SC_LOG_WARN = 1,
  SC_LOG_INFO = 2,
  SC_LOG_DEBUG = 3,
  SC_LOG_TRACE = 4,
} sc_log_level;

typedef void (*sc_log_sink)(void *ud, sc_log_level level, const char *component,
                            const char *msg);

void sc_log_set_sink(sc_log_sink sink, void *ud);
void sc_log_set_level(sc_log_level level);
sc_log_level sc_log_get_level(void);
int sc_log_enabled(sc_log_level level);
/* Parses "error", "warn", "info", "debug", "trace"; returns -1 when unknown. */
int sc_log_level_parse(const char *name);
const char *sc_log_level_name(sc_log_level level);

void sc_log_write(sc_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A ready-made sink: one line per message on stderr with a monotonic timestamp. */
void sc_log_stderr_sink(void *ud, sc_log_level level, const char *component,
                        const char *msg);

/* A warning whose rate someone else chooses (traffic from the network) goes through a
 * limiter: the first event of each interval is logged, with the count of the events held
 * back since the last line, and the rest only counted. One limiter per source that is to
 * be told apart (a peer, a domain). Zero-initialised; any thread. */
typedef struct sc_log_limit {
  _Atomic unsigned long long next_ns; /* no line before this */
  _Atomic unsigned long long held;    /* events not logged since the last line */
} sc_log_limit;

#define SC_LOG_LIMIT_INTERVAL_NS 10000000000ull /* 10 s */

/* Whether to log this event now; when true, *held receives how many earlier events were
 * held back (the line should say so). */
int sc_log_limit_pass(sc_log_limit *l, unsigned long long now_ns, unsigned long long *held);

#define SC_LOG(level, component, ...)                                      \
  do {                                                                     \
    if (sc_log_enabled(level)) sc_log_write(level, component, __VA_ARGS__); \
  } while (0)
#define SC_ERROR(c, ...) SC_LOG(SC_LOG_ERROR, c, __VA_ARGS__)
#define SC_WARN(c, ...)  SC_LOG(SC_LOG_WARN, c, __VA_ARGS__)
#define SC_INFO(c, ...)  SC_LOG(SC_LOG_INFO, c, __VA_ARGS__)
#define SC_DEBUG(c, ...) SC_LOG(SC_LOG_DEBUG, c, __VA_ARGS__)
#define SC_TRACE(c, ...) SC_LOG(SC_LOG_TRACE, c, __VA_ARGS__)

#endif
