/* cmd_plan.c - `sparsecp plan [--json] < batch.json`: the pure planner on one batch. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_defaults.h"
#include "plan/dcp.h"
#include "plan/plan.h"
#include "plan/plan_json.h"
#include "tools/cli.h"

#define MAX_INPUT_BYTES (64u << 20)

static void help(FILE *f) {
  fprintf(f,
          "usage: sparsecp plan [--json] [--input FILE] < batch.json\n"
          "\n"
          "Reads {\"config\": {...}, \"requests\": [...]} and prints the step plan: the\n"
          "rank layout, the index arrays, the global chunk plan and the collective plan\n"
          "with its fingerprint (SPEC.md §3-6).\n"
          "\n"
          "config keys: pcp dcp tp interleave block_size pad_multiple max_gathered_rows\n"
          "             layers heads kv_lora_rank rope_dim index_dim topk hidden dtype\n"
          "request keys: computed (default 0), scheduled, prefill, id (optional)\n"
          "\n"
          "  --json        print one JSON object (DESIGN.md §7); on bad input print\n"
          "                {\"error\": ...} and exit 2\n"
          "  --input FILE  read FILE instead of standard input\n"
          "  -h, --help    this text\n");
}

static void print_index(FILE *f, const char *name, const int32_t *v, int64_t n, int64_t stride) {
  fprintf(f, "  %-19s", name);
  for (int64_t i = 0; i < n; i++) {
    if (stride > 0 && i > 0 && i % stride == 0) fprintf(f, " |");
    fprintf(f, " %d", v[i]);
    if (i >= 255 && n > 260) {
      fprintf(f, " ... (%lld more)", (long long)(n - i - 1));
      break;
    }
  }
  fputc('\n', f);
}

static void print_table(FILE *f, const sc_plan *plan) {
  const sc_plan_config *c = &plan->cfg;
  char hex[17];
  sc_plan_fingerprint_hex(plan->fingerprint, hex);
  fprintf(f, "step plan: pcp %d, dcp %d, tp %d, interleave %d, %d layer(s)\n", c->pcp, c->dcp,
          c->tp, c->interleave, c->layers);
  fprintf(f, "  %d requests, %d tokens (%d decode), T_pad %d, fingerprint %s\n\n",
          plan->num_reqs, plan->num_tokens, plan->num_decode_tokens, plan->t_pad, hex);

  fprintf(f, "requests\n  %4s %8s %9s %7s %-8s %-10s %s\n", "req", "computed", "scheduled",
          "extent", "kind", "layout", "dcp local lengths");
  for (int32_t i = 0; i < plan->num_reqs; i++) {
    const sc_plan_req *r = &plan->reqs[i];
    char layout[32];
    if (r->q == 0) snprintf(layout, sizeof layout, "no rows");
    else if (r->flags & SC_REQ_SPLIT) snprintf(layout, sizeof layout, "split/%d", r->cs);
    else snprintf(layout, sizeof layout, "whole");
    fprintf(f, "  %4d %8d %9d %7d %-8s %-10s", i, r->extent - r->q, r->q, r->extent,
            (r->flags & SC_REQ_PREFILL) ? "prefill" : "decode", layout);
    for (int32_t k = 0; k < c->dcp; k++)
      fprintf(f, " %lld", (long long)sc_dcp_local_len(r->extent, k, c->dcp, c->interleave));
    fputc('\n', f);
  }

  fprintf(f, "\nrank layout (rows as req[begin,end); * = replicated)\n");
  for (int32_t r = 0; r < c->pcp; r++) {
    fprintf(f, "  rank %-3d %5d tokens:", r, plan->rank_tokens[r]);
    for (int32_t k = 0; k < plan->num_ordered; k++) {
      sc_plan_row rows[2];
      const int n = sc_plan_req_rows(plan, plan->order[k], r, rows);
      for (int i = 0; i < n; i++)
        fprintf(f, " %d[%d,%d)%s", rows[i].req, rows[i].offset, rows[i].offset + rows[i].len,
                rows[i].split ? "" : "*");
    }
    fputc('\n', f);
  }

  const int64_t slots = sc_plan_gather_slots(plan);
  int32_t *gather = malloc(sizeof *gather * (size_t)(slots + plan->num_tokens + 1));
  uint8_t *mask = malloc((size_t)slots + 1);
  if (gather && mask) {
    int32_t *restore = gather + slots;
    sc_plan_fill_gather(plan, gather, restore, mask);
    fprintf(f, "\nindex arrays\n");
    print_index(f, "padded_gather_idx", gather, slots, plan->t_pad);
    print_index(f, "hidden_restore_idx", restore, plan->num_tokens, 0);
    int64_t pads = 0;
    for (int64_t s = 0; s < slots; s++) pads += !mask[s];
    fprintf(f, "  %-19s %lld of %lld slots write KV\n", "kv_write_mask",
            (long long)(slots - pads), (long long)slots);
  }
  free(gather);
  free(mask);

  if (plan->num_chunks > 0) {
    fprintf(f, "\nchunks (context_kv workspace per DCP rank)\n");
    for (int32_t ci = 0; ci < plan->num_chunks; ci++) {
      const sc_plan_chunk *ch = &plan->chunks[ci];
      fprintf(f, "  chunk %d: %d shard rows, regions:", ci, ch->shard_rows_total);
      for (int32_t g = ch->first_region; g < ch->first_region + ch->num_regions; g++)
        fprintf(f, " req %d (extent %d, S %d, ws %d)", plan->regions[g].req,
                plan->regions[g].extent, plan->regions[g].shard_rows, plan->regions[g].ws_start);
      fputc('\n', f);
      int32_t *deint = malloc(sizeof *deint * (size_t)(ch->extent_total + 1));
      if (deint) {
        sc_plan_fill_deinterleave(plan, ci, deint);
        print_index(f, "deinterleave_idx", deint, ch->extent_total, 0);
      }
      free(deint);
    }
  }

  fprintf(f, "\ncollectives\n  %4s %5s %-5s %-14s %-5s %8s %8s %12s  %s\n", "seq", "layer",
          "group", "op", "dtype", "rows", "width", "bytes/rank", "purpose");
  for (int32_t i = 0; i < plan->num_colls; i++) {
    const sc_coll *k = &plan->colls[i];
    fprintf(f, "  %4d %5d %-5s %-14s %-5s %8lld %8lld %12lld  %s\n", k->seq, k->layer,
            sc_group_name(k->group), sc_coll_op_name(k->op), sc_dtype_name(k->dtype),
            (long long)k->rows, (long long)k->width,
            (long long)(k->rows * k->width * (int64_t)sc_dtype_size(k->dtype)),
            sc_coll_purpose_name(k->purpose));
  }
}

static int fail_input(bool json, const char *msg) {
  sc_cli_report_error("plan", json, msg);
  return SC_EXIT_USAGE;
}

int sc_cmd_plan(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"input", required_argument, NULL, 'i'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  bool json = false;
  const char *input = NULL;
  int ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'j': json = true; break;
    case 'i': input = optarg; break;
    case 'h': help(stdout); return SC_EXIT_OK;
    default: help(stderr); return SC_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    sc_cli_error("plan", "unexpected argument '%s'", argv[optind]);
    return SC_EXIT_USAGE;
  }

  FILE *in = stdin;
  if (input != NULL && (in = fopen(input, "rb")) == NULL) {
    char msg[512];
    snprintf(msg, sizeof msg, "cannot open %s", input);
    return fail_input(json, msg);
  }
  char *text = NULL;
  size_t len = 0;
  int rc = sc_cli_read_all(in, MAX_INPUT_BYTES, &text, &len);
  if (in != stdin) fclose(in);
  if (rc != 0)
    return fail_input(json, rc == SC_ETOOBIG ? "input larger than 64 MiB" : sc_strerror(rc));

  sc_plan_config cfg;
  sc_batch_req *reqs = NULL;
  int32_t n = 0;
  sc_diag diag = {0};
  sc_model_plan_config_default(&cfg); /* DESIGN.md §7: keys not given */
  rc = sc_plan_input_parse(text, len, &cfg, &reqs, &n, &diag);
  free(text);
  if (rc != 0) return fail_input(json, sc_diag_message(&diag));

  sc_plan plan;
  sc_plan_init(&plan);
  rc = sc_plan_build(&plan, &cfg, reqs, n, &diag);
  free(reqs);
  int exit_code = SC_EXIT_OK;
  if (rc != 0) {
    exit_code = rc == SC_ENOMEM ? SC_EXIT_FAILURE : fail_input(json, sc_diag_message(&diag));
    if (rc == SC_ENOMEM) sc_cli_error("plan", "%s", sc_diag_message(&diag));
  } else if (json) {
    sc_jsonw w;
    sc_jsonw_init(&w);
    if (sc_plan_render_json(&plan, &w) != 0) {
      sc_cli_error("plan", "out of memory rendering the plan");
      exit_code = SC_EXIT_FAILURE;
    } else {
      fputs(sc_jsonw_str(&w), stdout);
      fputc('\n', stdout);
    }
    sc_jsonw_free(&w);
  } else {
    print_table(stdout, &plan);
  }
  sc_plan_free(&plan);
  return exit_code;
}
