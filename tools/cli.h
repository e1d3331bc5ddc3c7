/* cli.h - shared pieces of the sparsecp command-line program: the subcommand table,
 * option value parsing, and whole-stream reading. Exit codes follow DESIGN.md §7:
 * 0 success, 1 runtime failure, 2 bad usage or input. */
#ifndef SC_CLI_H
#define SC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { SC_EXIT_OK = 0, SC_EXIT_FAILURE = 1, SC_EXIT_USAGE = 2 };

typedef struct sc_cmd {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} sc_cmd;

/* Parses an integer option value in [lo, hi]; on failure prints
 * "sparsecp CMD: OPT: ..." to stderr and returns false. */
bool sc_cli_int(const char *cmd, const char *opt, const char *text, int64_t lo, int64_t hi,
                int64_t *out);

/* Reads a whole stream into a NUL-terminated malloc'd buffer (at most max bytes).
 * Returns 0, SC_ETOOBIG or SC_EIO / SC_ENOMEM. */
int sc_cli_read_all(FILE *f, size_t max, char **out, size_t *len);

/* Reads the text file at path (at most max bytes) into a NUL-terminated malloc'd buffer.
 * A NUL byte inside is an error (the text is then read as a C string, which would end
 * there silently). On failure prints "sparsecp CMD: ..." naming the file and returns
 * SC_EXIT_USAGE; else 0. */
int sc_cli_read_text_file(const char *cmd, const char *path, size_t max, char **out,
                          size_t *len);

/* The path of the example file `name`: examples/NAME when it is readable from here (a
 * checkout's top folder), else the source tree's, where the build found it. Writes buf
 * and returns it. */
const char *sc_cli_example_path(const char *name, char *buf, size_t len);

/* Prints "sparsecp CMD: error: MSG" to stderr (printf-style). */
void sc_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An input or run error of command cmd: with json, one line {"error": MSG} on stdout
 * (what --json promises), else "sparsecp CMD: error: MSG" on stderr. */
void sc_cli_report_error(const char *cmd, bool json, const char *msg);

/* Installs the stderr log sink at the level given by SPARSECP_LOG (default warn). */
void sc_cli_setup_logging(void);

/* Routes SIGINT and SIGTERM to handler (no SA_RESTART, so a blocking wait returns EINTR
 * and the command's loop sees its stop flag). Commands that talk to peers also ignore
 * SIGPIPE themselves: a vanished peer is an error return, not a death. */
void sc_cli_catch_stop_signals(void (*handler)(int sig));

int sc_cmd_plan(int argc, char **argv);
int sc_cmd_bench(int argc, char **argv);
int sc_cmd_submit(int argc, char **argv);
int sc_cmd_run(int argc, char **argv);
int sc_cmd_node(int argc, char **argv);
int sc_cmd_launch(int argc, char **argv);
int sc_cmd_tap(int argc, char **argv);
int sc_cmd_keygen(int argc, char **argv);
int sc_cmd_checkpoint(int argc, char **argv);
int sc_cmd_mkmodel(int argc, char **argv);

#endif
