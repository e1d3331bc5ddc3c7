/* inet_addr.h - "HOST:PORT" addresses of plain sockets (the HTTP front's): a numeric IPv4
 * host, or an IPv6 one in brackets ("[::1]:8000"); no names, so that no lookup happens and
 * a typo cannot end up on another interface.
 *
 * Threads: any; no state. */
#ifndef SC_INET_ADDR_H
#define SC_INET_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

#include "base/error.h"

/* Parses addr into *ss (*len: the address's size). SC_EINVAL (said in d, naming addr)
 * for anything else. */
int sc_inet_addr_parse(const char *addr, struct sockaddr_storage *ss, socklen_t *len,
                       sc_diag *d);
/* Writes ss back as "HOST:PORT" (brackets for IPv6) into out. */
void sc_inet_addr_format(const struct sockaddr_storage *ss, char *out, size_t cap);
/* The port of ss. */
unsigned sc_inet_addr_port(const struct sockaddr_storage *ss);

#endif
