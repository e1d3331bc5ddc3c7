/* inet_addr.c - see inet_addr.h. */
#include "base/inet_addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sc_inet_addr_parse(const char *addr, struct sockaddr_storage *ss, socklen_t *len,
                       sc_diag *d) {
  const char *colon = strrchr(addr, ':');
  char *end = NULL;
  const unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
  char host[128];
  const size_t hn = colon ? (size_t)(colon - addr) : 0;
  if (colon == NULL || hn == 0 || colon[1] == '\0' || *end != '\0' || port > 65535 ||
      hn >= sizeof host)
    return sc_fail(d, SC_EINVAL, "%s: expected HOST:PORT", addr);
  memcpy(host, addr, hn);
  host[hn] = '\0';
  memset(ss, 0, sizeof *ss);
  if (host[0] == '[') {
    if (hn < 3 || host[hn - 1] != ']') /* (cutting a missing "]" could leave "::") */
      return sc_fail(d, SC_EINVAL, "%s: an IPv6 host is written [ADDRESS]", addr);
    host[hn - 1] = '\0';
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    *len = sizeof *a;
    if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
      return sc_fail(d, SC_EINVAL, "%s: bad IPv6 host", addr);
    return 0;
  }
  struct sockaddr_in *a = (struct sockaddr_in *)ss;
  a->sin_family = AF_INET;
  a->sin_port = htons((uint16_t)port);
  *len = sizeof *a;
  if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
    return sc_fail(d, SC_EINVAL, "%s: the host must be a numeric IPv4 or [IPv6] address",
                   addr);
  return 0;
}

unsigned sc_inet_addr_port(const struct sockaddr_storage *ss) {
  return ss->ss_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)ss)->sin6_port)
                                   : ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

void sc_inet_addr_format(const struct sockaddr_storage *ss, char *out, size_t cap) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss->ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host, sizeof host);
    snprintf(out, cap, "[%s]:%u", host, sc_inet_addr_port(ss));
  } else {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host, sizeof host);
    snprintf(out, cap, "%s:%u", host, sc_inet_addr_port(ss));
  }
}
