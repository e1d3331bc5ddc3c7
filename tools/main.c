/* main.c - the sparsecp program: dispatches to one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"

static const sc_cmd k_cmds[] = {
    {"run", "run a request stream on a local cluster and summarize (the main job)", sc_cmd_run},
    {"plan", "plan one step of a global batch (SPEC.md §3-6) and print it", sc_cmd_plan},
    {"bench", "run a benchmark and print or record its results", sc_cmd_bench},
    {"submit", "send a request to a running cluster and stream its tokens", sc_cmd_submit},
    {"node", "run one node of a cluster (--cluster FILE --rank R)", sc_cmd_node},
    {"launch", "start a local cluster as child processes and supervise it", sc_cmd_launch},
    {"tap", "watch, filter, record or trace the messages of a running cluster", sc_cmd_tap},
    {"keygen", "make a CURVE key pair for the client endpoint", sc_cmd_keygen},
    {"checkpoint", "check a DeepSeek-V3.2 checkpoint directory (validation only)",
     sc_cmd_checkpoint},
    {"mkmodel", "write a small DeepSeek-V3.2 checkpoint directory (real layout, seeded)",
     sc_cmd_mkmodel},
};
#define NUM_CMDS (sizeof k_cmds / sizeof k_cmds[0])

static void usage(FILE *f) {
  fprintf(f,
          "usage: sparsecp COMMAND [OPTIONS]\n"
          "\n"
          "sparsecp plans and runs sparse-attention inference with prefill and decode\n"
          "context parallelism. Commands:\n\n");
  for (size_t i = 0; i < NUM_CMDS; i++)
    fprintf(f, "  %-10s %s\n", k_cmds[i].name, k_cmds[i].summary);
  fprintf(f,
          "\n'sparsecp COMMAND --help' describes a command. Exit status: 0 success,\n"
          "1 runtime failure, 2 bad usage or input. SPARSECP_LOG=error|warn|info|debug|trace\n"
          "sets the log level (default warn).\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return SC_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
    if (argc >= 3 && strcmp(name, "help") == 0) {
      for (size_t i = 0; i < NUM_CMDS; i++)
        if (strcmp(argv[2], k_cmds[i].name) == 0) {
          char *sub[] = {(char *)k_cmds[i].name, "--help", NULL};
          return k_cmds[i].run(2, sub);
        }
    }
    usage(stdout);
    return SC_EXIT_OK;
  }
  sc_cli_setup_logging();
  for (size_t i = 0; i < NUM_CMDS; i++)
    if (strcmp(name, k_cmds[i].name) == 0) return k_cmds[i].run(argc - 1, argv + 1);
  fprintf(stderr, "sparsecp: unknown command '%s'\n\n", name);
  usage(stderr);
  return SC_EXIT_USAGE;
}
