/* cmd_keygen.c - `sparsecp keygen`: a new CURVE key pair for authenticated endpoints
 * (DESIGN.md §7). The gateway's client endpoint uses one when the cluster file names the
 * secret half (listen_key_file, docs/cluster-file.md); clients pass the public half
 * (`sparsecp submit --server-key`). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "client/curve_key.h"
#include "tools/cli.h"

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp keygen [--json]\n"
          "\n"
          "Prints a new CURVE key pair in Z85 (40 characters each): \"public KEY\" and\n"
          "\"secret KEY\" lines, or with --json {\"public\": ..., \"secret\": ...}. Keep the\n"
          "secret in a file only the head's user can read and name it in the cluster file\n"
          "(\"listen_key_file\") or with `sparsecp launch --listen-key-file`; clients connect\n"
          "with `sparsecp submit --server-key PUBLIC`.\n");
}

int sc_cmd_keygen(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  bool json = false;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'j': json = true; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (optind != argc) {
    help(stderr);
    return SC_EXIT_USAGE;
  }
  char pub[SC_CURVE_Z85_LEN + 1], sec[SC_CURVE_Z85_LEN + 1];
  if (!zmq_has("curve") || zmq_curve_keypair(pub, sec) != 0) {
    sc_cli_error("keygen", "this libzmq has no CURVE security");
    return SC_EXIT_FAILURE;
  }
  /* Z85's alphabet has no quote or backslash, so the keys go into JSON as they are */
  if (json)
    printf("{\"public\":\"%s\",\"secret\":\"%s\"}\n", pub, sec);
  else
    printf("public %s\nsecret %s\n", pub, sec);
  memset(sec, 0, sizeof sec);
  return fflush(stdout) == 0 ? SC_EXIT_OK : SC_EXIT_FAILURE;
}
