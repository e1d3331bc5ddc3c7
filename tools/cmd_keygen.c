/* cmd_keygen.c - `sparsecp keygen`: a new CURVE key pair for authenticated endpoints
 * (DESIGN.md §7). The gateway's client endpoint uses one when the cluster file names the
 * secret half (listen_key_file, docs/cluster-file.md); clients pass the public half
 * (`sparsecp submit --server-key`). `keygen --cluster FILE` gives every node of a cluster
 * file its own pair: the secrets in files of their own, the public keys in the file. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/runtime/sc_cluster.h"
#include "base/curve_key.h"
#include "tools/cli.h"

/* Node r (nd) gets a new key pair: the secret in DIR/node-R.key, "public_key" and
 * "key_file" (relative to the cluster file's folder) in the file. */
static int key_node(json_t *nd, int r, const char *keydir, const char *keydir_rel) {
  char path[PATH_MAX + 32], rel[PATH_MAX + 32], pub[SC_CURVE_Z85_LEN + 1];
  uint8_t key[32];
  snprintf(path, sizeof path, "%s/node-%d.key", keydir, r);
  snprintf(rel, sizeof rel, "%s/node-%d.key", keydir_rel, r);
  sc_diag d = {0};
  if (sc_curve_new_key_file(path, key, &d) != 0) {
    sc_cli_error("keygen", "%s", sc_diag_message(&d));
    return SC_EXIT_FAILURE;
  }
  zmq_z85_encode(pub, key, 32);
  json_object_set_new(nd, "public_key", json_string(pub));
  json_object_set_new(nd, "key_file", json_string(rel));
  return SC_EXIT_OK;
}

/* Removes what a failed `keygen --cluster` wrote: the key files of the first n nodes
 * and their folder (it made the folder, so nothing else is in it). */
static void remove_keys(json_t *nodes, size_t n, const char *keydir) {
  for (size_t i = 0; i < n; i++) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/node-%d.key", keydir,
             (int)json_integer_value(json_object_get(json_array_get(nodes, i), "rank")));
    unlink(path);
  }
  rmdir(keydir);
}

/* `keygen --cluster FILE`: refuses a file whose nodes have keys already (replacing them
 * would lock out nodes started with the old ones), writes the secrets into the folder
 * FILE.keys (0700), checks that the keyed file is a valid cluster file (a tcp tap also
 * needs tap_keys_file, say), then replaces FILE through a temporary file and a rename:
 * a failure leaves the old file whole and no key behind. */
static int keygen_cluster(const char *file) {
  json_error_t err;
  json_t *root = json_load_file(file, JSON_PRESERVE_ORDER, &err);
  json_t *nodes = root ? json_object_get(root, "nodes") : NULL;
  if (!json_is_array(nodes)) {
    sc_cli_error("keygen", "%s: not a cluster file (%s)", file,
                 root ? "no \"nodes\" list" : err.text);
    json_decref(root);
    return SC_EXIT_USAGE;
  }
  for (size_t i = 0; i < json_array_size(nodes); i++)
    if (json_object_get(json_array_get(nodes, i), "public_key")) {
      sc_cli_error("keygen", "%s: nodes[%zu] has a key already; to replace the keys, remove "
                             "every node's public_key and key_file and the folder %s.keys "
                             "first (and restart every node)", file, i, file);
      json_decref(root);
      return SC_EXIT_USAGE;
    }
  char copy[PATH_MAX], keydir[PATH_MAX + 8], keydir_rel[PATH_MAX + 8], tmp[PATH_MAX + 8];
  snprintf(copy, sizeof copy, "%s", file);
  snprintf(keydir, sizeof keydir, "%s.keys", file);
  snprintf(keydir_rel, sizeof keydir_rel, "%s.keys", basename(copy));
  snprintf(tmp, sizeof tmp, "%s.tmp", file);
  if (mkdir(keydir, 0700) != 0) {
    sc_cli_error("keygen", "cannot make %s: %s%s", keydir, strerror(errno),
                 errno == EEXIST ? " (the keys of an earlier keygen? move it away first)" : "");
    json_decref(root);
    return SC_EXIT_FAILURE;
  }
  int rc = SC_EXIT_OK;
  size_t keyed = 0;
  for (; rc == SC_EXIT_OK && keyed < json_array_size(nodes); keyed++) {
    json_t *nd = json_array_get(nodes, keyed);
    rc = key_node(nd, (int)json_integer_value(json_object_get(nd, "rank")), keydir, keydir_rel);
  }
  char *text = rc == SC_EXIT_OK ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  sc_cluster check;
  sc_diag d = {0};
  if (rc == SC_EXIT_OK && (text == NULL || sc_cluster_parse(text, &check, &d) != 0)) {
    sc_cli_error("keygen", "%s: %s", file, text ? sc_diag_message(&d) : "out of memory");
    rc = SC_EXIT_USAGE;
  } else if (rc == SC_EXIT_OK) {
    sc_cluster_free(&check);
  }
  FILE *f = rc == SC_EXIT_OK ? fopen(tmp, "w") : NULL;
  bool written = f != NULL && fputs(text, f) >= 0 && fputc('\n', f) >= 0;
  if (f != NULL && fclose(f) != 0) written = false;
  if (rc == SC_EXIT_OK && (!written || rename(tmp, file) != 0)) {
    sc_cli_error("keygen", "cannot rewrite %s: %s", file, strerror(errno));
    unlink(tmp);
    rc = SC_EXIT_FAILURE;
  }
  free(text);
  if (rc != SC_EXIT_OK) remove_keys(nodes, keyed, keydir);
  const size_t n = json_array_size(nodes);
  json_decref(root);
  if (rc == SC_EXIT_OK)
    printf("keyed %zu nodes of %s; their secret keys are in %s (copy node-R.key to node R's "
           "host only)\n", n, file, keydir);
  return rc;
}

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp keygen [--json]\n"
          "       sparsecp keygen --cluster FILE\n"
          "\n"
          "Prints a new CURVE key pair in Z85 (40 characters each): \"public KEY\" and\n"
          "\"secret KEY\" lines, or with --json {\"public\": ..., \"secret\": ...}. Keep the\n"
          "secret in a file only the head's user can read and name it in the cluster file\n"
          "(\"listen_key_file\") or with `sparsecp launch --listen-key-file`; clients connect\n"
          "with `sparsecp submit --server-key PUBLIC`.\n"
          "\n"
          "--cluster FILE gives every node of the cluster file a key pair: the secret keys\n"
          "go to FILE.keys/node-R.key (mode 0600 in a 0700 folder), and FILE gets each\n"
          "node's \"public_key\" and \"key_file\" (docs/cluster-file.md). Copy node-R.key to\n"
          "node R's host only. A file whose nodes have keys already is refused.\n");
}

int sc_cmd_keygen(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"cluster", required_argument, NULL, 'c'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  bool json = false;
  const char *cluster = NULL;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'j': json = true; break;
    case 'c': cluster = optarg; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (optind != argc || (cluster && json)) {
    help(stderr);
    return SC_EXIT_USAGE;
  }
  if (cluster) return keygen_cluster(cluster);
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
  sc_wipe(sec, sizeof sec);
  return fflush(stdout) == 0 ? SC_EXIT_OK : SC_EXIT_FAILURE;
}
