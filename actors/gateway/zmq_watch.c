#include "actors/gateway/zmq_watch.h"

#include <stdlib.h>
#include <zmq.h>

#include "base/error.h"

struct sc_zmq_watch {
  uv_poll_t poll;
  uv_prepare_t prepare;
  uv_idle_t idle;
  void *sock;
  sc_zmq_service_fn service;
  void *ud;
  int open_handles;
  bool closing;
};

static bool readable(void *sock) {
  int ev = 0;
  size_t sz = sizeof ev;
  return zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN);
}

static void on_idle(uv_idle_t *h) { (void)h; }

static void service(sc_zmq_watch *w) {
  if (w->closing) return;
  const bool more = w->service(w->ud) || readable(w->sock);
  if (more) uv_idle_start(&w->idle, on_idle);
  else uv_idle_stop(&w->idle);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  service(h->data);
}

static void on_prepare(uv_prepare_t *h) {
  sc_zmq_watch *w = h->data;
  if (!w->closing && readable(w->sock)) service(w);
}

int sc_zmq_watch_start(uv_loop_t *loop, void *sock, sc_zmq_service_fn fn, void *ud,
                       sc_zmq_watch **out) {
  *out = NULL;
  int fd = -1;
  size_t sz = sizeof fd;
  if (zmq_getsockopt(sock, ZMQ_FD, &fd, &sz) != 0) return SC_ESYS;
  sc_zmq_watch *w = calloc(1, sizeof *w);
  if (w == NULL) return SC_ENOMEM;
  *w = (sc_zmq_watch){.sock = sock, .service = fn, .ud = ud};
  if (uv_poll_init(loop, &w->poll, fd) != 0) {
    free(w);
    return SC_ESYS;
  }
  uv_prepare_init(loop, &w->prepare);
  uv_idle_init(loop, &w->idle);
  w->poll.data = w->prepare.data = w->idle.data = w;
  w->open_handles = 3;
  uv_poll_start(&w->poll, UV_READABLE, on_poll);
  uv_prepare_start(&w->prepare, on_prepare);
  *out = w;
  return 0;
}

static void on_closed(uv_handle_t *h) {
  sc_zmq_watch *w = h->data;
  if (--w->open_handles == 0) free(w);
}

void sc_zmq_watch_close(sc_zmq_watch *w) {
  if (w == NULL || w->closing) return;
  w->closing = true;
  uv_close((uv_handle_t *)&w->poll, on_closed);
  uv_close((uv_handle_t *)&w->prepare, on_closed);
  uv_close((uv_handle_t *)&w->idle, on_closed);
}
