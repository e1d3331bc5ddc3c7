/* pipeline.c - the pipeline's startup list, the cluster's readiness and the head's
 * orderly stop (pipeline.h). */
#include "actors/pipeline.h"

#include <string.h>
#include <unistd.h>

void sc_pipeline_startup(sc_rank_ctx **ctx_slot, sc_startup_actor *out) {
  const sc_startup_actor list[SC_PIPELINE_NUM_ACTORS] = {
      {"gateway", &sc_gateway_spec, SC_ON_HEAD, ctx_slot, sizeof *ctx_slot},
      {"scheduler", &sc_scheduler_spec, SC_ON_HEAD, ctx_slot, sizeof *ctx_slot},
      {"partitioner", &sc_partitioner_spec, SC_ON_HEAD, ctx_slot, sizeof *ctx_slot},
      {"comm", &sc_comm_spec, SC_ON_ALL, ctx_slot, sizeof *ctx_slot},
      {"metadata", &sc_metadata_spec, SC_ON_ALL, ctx_slot, sizeof *ctx_slot},
      {"executor", &sc_executor_spec, SC_ON_ALL, ctx_slot, sizeof *ctx_slot},
  };
  memcpy(out, list, sizeof list);
}

void sc_pipeline_cluster_ready(sc_node *node) {
  sc_actor_id sched;
  if (sc_node_resolve(node, "scheduler@0", &sched) != 0) return;
  sc_msg_node_ready *m = sc_msg_body_new(SC_MSG_NODE_READY);
  if (m == NULL) return;
  m->rank = sc_node_rank(node);
  sc_envelope env = {.type = SC_MSG_NODE_READY, .dst = sched};
  if (sc_node_send(node, &env, m) != 0) sc_msg_body_destroy(SC_MSG_NODE_READY, m);
}

void sc_pipeline_stop_clients(sc_node *node, const char *why) {
  sc_actor_id sched;
  if (sc_node_resolve(node, "scheduler@0", &sched) != 0) return;
  sc_msg_node_shutdown *m = sc_msg_body_new(SC_MSG_NODE_SHUTDOWN);
  if (m == NULL) return;
  m->reason = strdup(why ? why : "");
  sc_envelope env = {.type = SC_MSG_NODE_SHUTDOWN, .dst = sched};
  if (sc_node_send(node, &env, m) != 0) {
    sc_msg_body_destroy(SC_MSG_NODE_SHUTDOWN, m);
    return;
  }
  /* the answers go scheduler -> gateway -> clients, all on the head's loops; a fixed
   * pause, as the scheduler's own shut_down takes, since nothing reports them sent */
  usleep(SC_PIPELINE_STOP_ANSWER_MS * 1000);
}
