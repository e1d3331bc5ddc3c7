/* cmd_submit.c - `sparsecp submit`: send one request to a running cluster and stream its
 * tokens as they arrive (DESIGN.md §7). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "client/client.h"
#include "base/curve_key.h"
#include "model/model_defaults.h"
#include "tools/cli.h"
#include "tools/requests_file.h"

#define MAX_PROMPT_FILE (64u << 20)

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp submit --connect ENDPOINT (--prompt-len L | --prompt-file F)\n"
          "                       --max-tokens M [--temperature T] [--seed S] [--json]\n"
          "                       [--ignore-eos]\n"
          "                       [--timeout SECONDS] [--vocab V] [--server-key KEY]\n"
          "                       [--client-key-file F]\n"
          "\n"
          "Sends one request to the gateway at ENDPOINT and prints the generated tokens as\n"
          "they arrive. --prompt-file holds token ids (a JSON array, or integers separated\n"
          "by white space); --prompt-len L sends L pseudo-random token ids (seeded by\n"
          "--seed) below --vocab (default 32768, the embedded model's). Sampling is\n"
          "greedy unless --temperature is given. The request ends at the model's\n"
          "end-of-sequence token (finish_reason \"stop\"), if it has one, unless --ignore-eos\n"
          "is given. --json prints one JSON object\n"
          "{\"tokens\": [...], ...} at the end, with \"error\" when it failed.\n"
          "--server-key KEY: the gateway's public CURVE key (Z85, from `sparsecp keygen` or\n"
          "launch's \"launched\" line) when its endpoint uses CURVE; with a wrong key, or\n"
          "none, the connection is never made and the request times out.\n"
          "--client-key-file F: this client's CURVE secret key (a file with the secret line\n"
          "of `sparsecp keygen`, as for --listen-key-file), for a gateway that serves only\n"
          "the clients on its list (launch --client-keys): their public keys. Without it the\n"
          "client uses a key made for the connection, which such a gateway never serves\n"
          "(the request times out). Needs --server-key.\n"
          "Exit status 1 when the cluster answered with an error or did not answer within\n"
          "--timeout (default 120 s); 2 for bad usage or input (also a prompt too large\n"
          "for the gateway to accept).\n");
}

/* Token ids from a file: a JSON array or white-space separated integers. */
static int read_prompt_file(const char *path, int32_t **out, int32_t *n) {
  char *text = NULL;
  size_t len = 0;
  const int rc = sc_cli_read_text_file("submit", path, MAX_PROMPT_FILE, &text, &len);
  if (rc) return rc;
  int32_t cap = 256, cnt = 0;
  int32_t *v = malloc(sizeof *v * (size_t)cap);
  char *p = text;
  while (v != NULL) {
    while (*p == '[' || *p == ']' || *p == ',' || *p == ' ' || *p == '\n' || *p == '\t' ||
           *p == '\r')
      p++;
    if (*p == '\0') break;
    char *end;
    errno = 0;
    const long t = strtol(p, &end, 10);
    if (end == p || errno || t < 0 || t > INT32_MAX) {
      sc_cli_error("submit", "%s: '%.20s' is not a token id", path, p);
      free(v);
      free(text);
      return SC_EXIT_USAGE;
    }
    if (cnt == cap) {
      cap *= 2;
      int32_t *nv = realloc(v, sizeof *v * (size_t)cap);
      if (nv == NULL) free(v);
      v = nv;
      if (v == NULL) break;
    }
    v[cnt++] = (int32_t)t;
    p = end;
  }
  free(text);
  if (v == NULL) {
    sc_cli_error("submit", "out of memory reading %s", path);
    return SC_EXIT_FAILURE;
  }
  if (cnt == 0) {
    sc_cli_error("submit", "%s holds no token ids", path);
    free(v);
    return SC_EXIT_USAGE;
  }
  *out = v;
  *n = cnt;
  return SC_EXIT_OK;
}

int sc_cmd_submit(int argc, char **argv) {
  static const struct option opts[] = {{"connect", required_argument, NULL, 'c'},
                                       {"prompt-len", required_argument, NULL, 'l'},
                                       {"prompt-file", required_argument, NULL, 'f'},
                                       {"max-tokens", required_argument, NULL, 'm'},
                                       {"temperature", required_argument, NULL, 't'},
                                       {"seed", required_argument, NULL, 's'},
                                       {"timeout", required_argument, NULL, 'T'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"ignore-eos", no_argument, NULL, 'E'},
                                       {"vocab", required_argument, NULL, 'v'},
                                       {"server-key", required_argument, NULL, 'k'},
                                       {"client-key-file", required_argument, NULL, 'K'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *endpoint = NULL, *prompt_file = NULL, *server_key = NULL, *client_key = NULL;
  int64_t prompt_len = 0, max_tokens = 0, seed = 1, timeout_s = 120,
          vocab = SC_MODEL_DEFAULT_VOCAB;
  double temperature = 0;
  bool json = false, ignore_eos = false;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'c': endpoint = optarg; break;
    case 'E': ignore_eos = true; break;
    case 'k': server_key = optarg; break;
    case 'K': client_key = optarg; break;
    case 'f': prompt_file = optarg; break;
    case 'l':
      if (!sc_cli_int("submit", "--prompt-len", optarg, 1, 1 << 27, &prompt_len))
        return SC_EXIT_USAGE;
      break;
    case 'm':
      if (!sc_cli_int("submit", "--max-tokens", optarg, 1, 1 << 27, &max_tokens))
        return SC_EXIT_USAGE;
      break;
    case 's':
      if (!sc_cli_int("submit", "--seed", optarg, 0, INT64_MAX, &seed)) return SC_EXIT_USAGE;
      break;
    case 'T':
      if (!sc_cli_int("submit", "--timeout", optarg, 1, 86400, &timeout_s)) return SC_EXIT_USAGE;
      break;
    case 't': {
      char *end;
      temperature = strtod(optarg, &end);
      /* finite also as the float the request carries (1e300 would go out as inf) */
      if (end == optarg || *end != '\0' || !(temperature >= 0) || !isfinite((float)temperature)) {
        sc_cli_error("submit", "--temperature: '%s' is not a finite number >= 0", optarg);
        return SC_EXIT_USAGE;
      }
      break;
    }
    case 'j': json = true; break;
    case 'v':
      if (!sc_cli_int("submit", "--vocab", optarg, 1, INT32_MAX, &vocab)) return SC_EXIT_USAGE;
      break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (optind != argc) {
    sc_cli_error("submit", "unexpected argument '%s'", argv[optind]);
    help(stderr);
    return SC_EXIT_USAGE;
  }
  if (endpoint == NULL || max_tokens == 0 || (prompt_len == 0) == (prompt_file == NULL)) {
    sc_cli_error("submit", "--connect, --max-tokens and one of --prompt-len or --prompt-file "
                           "are required");
    help(stderr);
    return SC_EXIT_USAGE;
  }
  uint8_t key[32], secret[32];
  sc_diag why = {0};
  if (server_key && sc_curve_decode(server_key, key, &why) != 0) {
    sc_cli_error("submit", "--server-key: %s", sc_diag_message(&why));
    return SC_EXIT_USAGE;
  }
  if (client_key && server_key == NULL) {
    sc_cli_error("submit", "--client-key-file needs --server-key (CURVE)");
    return SC_EXIT_USAGE;
  }
  const int rc_key = client_key ? sc_curve_load_secret(client_key, secret, NULL, &why) : 0;
  if (rc_key != 0) {
    sc_cli_error("submit", "--client-key-file: %s", sc_diag_message(&why));
    return rc_key == SC_ENOTSUP ? SC_EXIT_FAILURE : SC_EXIT_USAGE;
  }

  int32_t *prompt = NULL, n = 0;
  if (prompt_file) {
    const int rc = read_prompt_file(prompt_file, &prompt, &n);
    if (rc) return rc;
  } else {
    n = (int32_t)prompt_len;
    prompt = malloc(sizeof *prompt * (size_t)n);
    if (prompt == NULL) return SC_EXIT_FAILURE;
    sc_requests_fill_prompt(prompt, n, (int32_t)vocab, (uint64_t)seed);
  }

  sc_client *c = NULL;
  sc_diag d = {0};
  int exit_code = SC_EXIT_OK;
  int32_t *tokens = NULL, ntok = 0;
  char error[512] = "";
  const char *finish = "";
  uint64_t id = 0;
  const sc_client_opts co = {.server_key = server_key,
                             .client_secret = client_key ? secret : NULL};
  const int rc_connect = sc_client_connect_opts(&c, endpoint, &co, &d);
  sc_wipe(secret, sizeof secret); /* (ZeroMQ holds its copy) */
  if (rc_connect != 0) {
    snprintf(error, sizeof error, "%s", d.msg);
    goto done;
  }
  const sc_client_request req = {.prompt = prompt, .prompt_len = n, .max_tokens = (int32_t)max_tokens,
                                 .temperature = (float)temperature, .seed = (uint64_t)seed,
                                 .ignore_eos = ignore_eos};
  tokens = malloc(sizeof *tokens * (size_t)max_tokens);
  const int rc_submit = tokens ? sc_client_submit(c, &req, &id) : SC_ENOMEM;
  if (rc_submit == SC_ETOOBIG) { /* the gateway would drop it without an answer */
    snprintf(error, sizeof error,
             "the request (a prompt of %d tokens) exceeds the gateway's message size limit",
             (int)n);
    exit_code = SC_EXIT_USAGE;
    goto done;
  }
  if (rc_submit != 0) {
    snprintf(error, sizeof error, "cannot send the request: %s", sc_strerror(rc_submit));
    goto done;
  }
  for (;;) {
    sc_client_event ev;
    const int rc = sc_client_next(c, (int)timeout_s * 1000, &ev);
    if (rc == SC_ETIMEDOUT) {
      snprintf(error, sizeof error, "no answer within %lld s", (long long)timeout_s);
      break;
    }
    /* id 0: the gateway could not read which request a rejected message was */
    if (rc != 0 || (ev.request_id != id && !(ev.kind == SC_CLIENT_ERROR && ev.request_id == 0)))
      continue;
    if (ev.kind == SC_CLIENT_TOKENS) {
      for (int32_t i = 0; i < ev.n && ntok < max_tokens; i++) {
        tokens[ntok++] = ev.tokens[i];
        if (!json) printf("%d ", ev.tokens[i]);
      }
      if (!json) fflush(stdout);
    } else if (ev.kind == SC_CLIENT_DONE) {
      finish = ev.finish_reason;
      if (!json) printf("\n[done: %d tokens, %s]\n", ev.num_tokens, finish);
      break;
    } else {
      snprintf(error, sizeof error, "%s (%s)", ev.message, sc_errname(ev.code));
      break;
    }
  }
done:
  if (json) { /* one object, also on failure (DESIGN.md §7) */
    sc_jsonw w;
    sc_jsonw_init(&w);
    sc_jsonw_obj_begin(&w);
    sc_jsonw_key(&w, "request_id"); /* (64 random bits: unsigned) */
    sc_jsonw_uint(&w, id);
    sc_jsonw_kv_int(&w, "prompt_tokens", n);
    sc_jsonw_key(&w, "tokens");
    sc_jsonw_int32_array(&w, tokens, (size_t)ntok);
    if (error[0]) sc_jsonw_kv_str(&w, "error", error);
    else sc_jsonw_kv_str(&w, "finish_reason", finish);
    sc_jsonw_obj_end(&w);
    puts(sc_jsonw_str(&w));
    sc_jsonw_free(&w);
  }
  if (error[0]) {
    if (!json) sc_cli_error("submit", "%s", error);
    if (exit_code == SC_EXIT_OK) exit_code = SC_EXIT_FAILURE;
  }
  sc_client_close(c);
  free(tokens);
  free(prompt);
  return exit_code;
}
