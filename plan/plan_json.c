#include "plan/plan_json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Config keys of DESIGN.md §7 and where they go. `dtype` is an extension ("f32" or
 * "bf16", the element type of activation collectives). */
typedef struct {
  const char *key;
  size_t offset;
  bool is64;
} config_key;

#define K32(name) {#name, offsetof(sc_plan_config, name), false}
static const config_key k_config_keys[] = {
    K32(pcp),          K32(dcp),        K32(tp),       K32(interleave),
    K32(block_size),   K32(pad_multiple),
    {"max_gathered_rows", offsetof(sc_plan_config, max_gathered_rows), true},
    K32(layers),       K32(heads),      K32(kv_lora_rank),
    K32(rope_dim),     K32(index_dim),  K32(topk),     K32(hidden),
};
#undef K32

int sc_plan_config_apply_json(sc_plan_config *cfg, const void *json_object, sc_diag *d) {
  const json_t *obj = json_object;
  if (!json_is_object(obj)) return sc_fail(d, SC_EINVAL, "\"config\" must be an object");
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)obj, key, val) {
    if (strcmp(key, "dtype") == 0) {
      const char *s = json_string_value(val);
      if (s && strcmp(s, "f32") == 0) cfg->dtype = SC_DT_F32;
      else if (s && strcmp(s, "bf16") == 0) cfg->dtype = SC_DT_BF16;
      else return sc_fail(d, SC_EINVAL, "config.dtype must be \"f32\" or \"bf16\"");
      continue;
    }
    const config_key *k = NULL;
    for (size_t i = 0; i < sizeof k_config_keys / sizeof k_config_keys[0]; i++)
      if (strcmp(key, k_config_keys[i].key) == 0) k = &k_config_keys[i];
    if (k == NULL) return sc_fail(d, SC_EINVAL, "config: unknown key \"%s\"", key);
    if (!json_is_integer(val))
      return sc_fail(d, SC_EINVAL, "config.%s must be an integer", key);
    const json_int_t v = json_integer_value(val);
    if (k->is64) {
      *(int64_t *)((char *)cfg + k->offset) = v;
    } else {
      if (v < INT32_MIN || v > INT32_MAX)
        return sc_fail(d, SC_EINVAL, "config.%s = %lld does not fit 32 bits", key,
                       (long long)v);
      *(int32_t *)((char *)cfg + k->offset) = (int32_t)v;
    }
  }
  return 0;
}

static int parse_request(const json_t *o, int32_t i, sc_batch_req *r, sc_diag *d) {
  if (!json_is_object(o)) return sc_fail(d, SC_EINVAL, "requests[%d] must be an object", i);
  *r = (sc_batch_req){.id = i};
  bool have_scheduled = false, have_prefill = false;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)o, key, val) {
    if (strcmp(key, "prefill") == 0) {
      if (!json_is_boolean(val))
        return sc_fail(d, SC_EINVAL, "requests[%d].prefill must be true or false", i);
      r->prefill = json_is_true(val);
      have_prefill = true;
      continue;
    }
    if (!json_is_integer(val))
      return sc_fail(d, SC_EINVAL, "requests[%d].%s must be an integer", i, key);
    const json_int_t v = json_integer_value(val);
    if (strcmp(key, "id") == 0) {
      r->id = v;
      continue;
    }
    if (v < 0 || v > SC_PLAN_MAX_TOKENS)
      return sc_fail(d, SC_EINVAL, "requests[%d].%s = %lld is out of range [0, %d]", i, key,
                     (long long)v, SC_PLAN_MAX_TOKENS);
    if (strcmp(key, "computed") == 0) {
      r->computed = (int32_t)v;
    } else if (strcmp(key, "scheduled") == 0) {
      r->scheduled = (int32_t)v;
      have_scheduled = true;
    } else {
      return sc_fail(d, SC_EINVAL, "requests[%d]: unknown key \"%s\"", i, key);
    }
  }
  if (!have_scheduled) return sc_fail(d, SC_EINVAL, "requests[%d]: \"scheduled\" is missing", i);
  if (!have_prefill) return sc_fail(d, SC_EINVAL, "requests[%d]: \"prefill\" is missing", i);
  return 0;
}

int sc_plan_input_parse(const char *text, size_t len, sc_plan_config *cfg,
                        sc_batch_req **reqs_out, int32_t *num_out, sc_diag *d) {
  *reqs_out = NULL;
  *num_out = 0;
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return sc_fail(d, SC_EINVAL, "invalid JSON at line %d, column %d: %s", jerr.line,
                   jerr.column, jerr.text);
  int rc = 0;
  sc_batch_req *reqs = NULL;
  if (!json_is_object(root)) {
    rc = sc_fail(d, SC_EINVAL, "input must be an object {\"config\": ..., \"requests\": [...]}");
    goto out;
  }
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "config") != 0 && strcmp(key, "requests") != 0) {
      rc = sc_fail(d, SC_EINVAL, "unknown top-level key \"%s\"", key);
      goto out;
    }
  }
  json_t *jc = json_object_get(root, "config");
  if (jc != NULL && (rc = sc_plan_config_apply_json(cfg, jc, d))) goto out;
  if ((rc = sc_plan_config_validate(cfg, d))) goto out;

  json_t *jr = json_object_get(root, "requests");
  if (!json_is_array(jr)) {
    rc = sc_fail(d, SC_EINVAL, "\"requests\" must be an array");
    goto out;
  }
  const size_t n = json_array_size(jr);
  if (n == 0) {
    rc = sc_fail(d, SC_EINVAL, "empty batch: \"requests\" has no entries");
    goto out;
  }
  if (n > INT32_MAX / 2) {
    rc = sc_fail(d, SC_ERANGE, "too many requests (%zu)", n);
    goto out;
  }
  reqs = calloc(n, sizeof *reqs);
  if (reqs == NULL) {
    rc = sc_fail(d, SC_ENOMEM, "out of memory reading %zu requests", n);
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    if ((rc = parse_request(json_array_get(jr, i), (int32_t)i, &reqs[i], d))) goto out;
  *reqs_out = reqs;
  *num_out = (int32_t)n;
  reqs = NULL;
out:
  free(reqs);
  json_decref(root);
  return rc;
}

void sc_plan_fingerprint_hex(uint64_t fp, char buf[17]) {
  snprintf(buf, 17, "%016llx", (unsigned long long)fp);
}

int sc_plan_render_json(const sc_plan *plan, sc_jsonw *w) {
  const int32_t P = plan->cfg.pcp, N = plan->cfg.dcp;
  const int64_t slots = sc_plan_gather_slots(plan);
  int32_t max_chunk = 0;
  for (int32_t c = 0; c < plan->num_chunks; c++)
    if (plan->chunks[c].extent_total > max_chunk) max_chunk = plan->chunks[c].extent_total;
  /* Rendering is not a hot path: one scratch allocation for all index arrays. */
  const size_t n32 = (size_t)slots + (size_t)plan->num_tokens + (size_t)max_chunk +
                     (size_t)plan->num_reqs * (size_t)N;
  int32_t *scratch = malloc((n32 + 1) * sizeof *scratch);
  uint8_t *mask = malloc((size_t)slots + 1);
  if (scratch == NULL || mask == NULL) {
    free(scratch);
    free(mask);
    return SC_ENOMEM;
  }
  int32_t *gather = scratch, *restore = gather + slots, *deint = restore + plan->num_tokens;
  int32_t *lens = deint + max_chunk;
  sc_plan_fill_gather(plan, gather, restore, mask);
  sc_plan_fill_dcp_local_lens(plan, lens);

  sc_jsonw_obj_begin(w);
  sc_jsonw_key(w, "ranks");
  sc_jsonw_arr_begin(w);
  for (int32_t r = 0; r < P; r++) {
    sc_jsonw_obj_begin(w);
    sc_jsonw_kv_int(w, "rank", r);
    sc_jsonw_kv_int(w, "num_tokens", plan->rank_tokens[r]);
    sc_jsonw_key(w, "rows");
    sc_jsonw_arr_begin(w);
    for (int32_t k = 0; k < plan->num_ordered; k++) {
      sc_plan_row rows[2];
      const int nrows = sc_plan_req_rows(plan, plan->order[k], r, rows);
      for (int i = 0; i < nrows; i++) {
        sc_jsonw_obj_begin(w);
        sc_jsonw_kv_int(w, "req", rows[i].req);
        sc_jsonw_kv_int(w, "offset", rows[i].offset);
        sc_jsonw_kv_int(w, "len", rows[i].len);
        sc_jsonw_kv_bool(w, "split", rows[i].split);
        sc_jsonw_obj_end(w);
      }
    }
    sc_jsonw_arr_end(w);
    sc_jsonw_obj_end(w);
  }
  sc_jsonw_arr_end(w);
  sc_jsonw_kv_int(w, "t_pad", plan->t_pad);
  sc_jsonw_kv_int(w, "num_decode_tokens", plan->num_decode_tokens);
  sc_jsonw_key(w, "padded_gather_idx");
  sc_jsonw_int32_array(w, gather, (size_t)slots);
  sc_jsonw_key(w, "hidden_restore_idx");
  sc_jsonw_int32_array(w, restore, (size_t)plan->num_tokens);
  sc_jsonw_key(w, "kv_write_mask");
  sc_jsonw_arr_begin(w);
  for (int64_t s = 0; s < slots; s++) sc_jsonw_bool(w, mask[s] != 0);
  sc_jsonw_arr_end(w);
  sc_jsonw_key(w, "extents");
  sc_jsonw_arr_begin(w);
  for (int32_t i = 0; i < plan->num_reqs; i++) sc_jsonw_int(w, plan->reqs[i].extent);
  sc_jsonw_arr_end(w);
  sc_jsonw_key(w, "dcp_local_seq_lens");
  sc_jsonw_arr_begin(w);
  for (int32_t i = 0; i < plan->num_reqs; i++)
    sc_jsonw_int32_array(w, lens + (size_t)i * N, (size_t)N);
  sc_jsonw_arr_end(w);
  sc_jsonw_key(w, "chunks");
  sc_jsonw_arr_begin(w);
  for (int32_t c = 0; c < plan->num_chunks; c++) {
    const sc_plan_chunk *ch = &plan->chunks[c];
    sc_jsonw_obj_begin(w);
    sc_jsonw_key(w, "regions");
    sc_jsonw_arr_begin(w);
    for (int32_t g = ch->first_region; g < ch->first_region + ch->num_regions; g++) {
      const sc_plan_region *rg = &plan->regions[g];
      sc_jsonw_obj_begin(w);
      sc_jsonw_kv_int(w, "req", rg->req);
      sc_jsonw_kv_int(w, "extent", rg->extent);
      sc_jsonw_kv_int(w, "shard_rows", rg->shard_rows);
      sc_jsonw_kv_int(w, "ws_start", rg->ws_start);
      sc_jsonw_obj_end(w);
    }
    sc_jsonw_arr_end(w);
    sc_jsonw_kv_int(w, "shard_rows_total", ch->shard_rows_total);
    sc_plan_fill_deinterleave(plan, c, deint);
    sc_jsonw_key(w, "deinterleave_idx");
    sc_jsonw_int32_array(w, deint, (size_t)ch->extent_total);
    sc_jsonw_obj_end(w);
  }
  sc_jsonw_arr_end(w);
  sc_jsonw_key(w, "collectives");
  sc_jsonw_arr_begin(w);
  for (int32_t i = 0; i < plan->num_colls; i++) {
    const sc_coll *c = &plan->colls[i];
    sc_jsonw_obj_begin(w);
    sc_jsonw_kv_int(w, "seq", c->seq);
    sc_jsonw_kv_int(w, "layer", c->layer);
    sc_jsonw_kv_str(w, "group", sc_group_name(c->group));
    sc_jsonw_kv_str(w, "op", sc_coll_op_name(c->op));
    sc_jsonw_kv_int(w, "rows", c->rows);
    sc_jsonw_kv_int(w, "width", c->width);
    sc_jsonw_kv_str(w, "purpose", sc_coll_purpose_name(c->purpose));
    sc_jsonw_obj_end(w);
  }
  sc_jsonw_arr_end(w);
  char hex[17];
  sc_plan_fingerprint_hex(plan->fingerprint, hex);
  sc_jsonw_kv_str(w, "fingerprint", hex);
  sc_jsonw_obj_end(w);
  free(scratch);
  free(mask);
  return sc_jsonw_status(w);
}
