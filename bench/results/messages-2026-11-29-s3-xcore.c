/* xcore: cross-thread message passing costs on this machine: an MPSC of malloc'd nodes
 * (producer mallocs, consumer frees), the same with nodes recycled (no malloc), and a
 * ping-pong of one cache line. Threads pinned to cpu A and B (argv). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include "actors/runtime/sc_mpsc.h"
typedef struct item { sc_mpsc_node link; uint64_t seq; char pad[48]; void *body; } item;
static sc_mpsc q; static _Atomic uint64_t inflight; static int mode; static uint64_t N = 4000000;
static sc_mpsc back; /* recycled nodes */
static _Atomic uint64_t line[16];
static int cpu_a, cpu_b;
static uint64_t now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ull+t.tv_nsec;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void *consumer(void *a){pin(cpu_b); uint64_t got=0, sum=0;
  if (mode==2){ for(uint64_t i=0;i<N;i++){ while(atomic_load_explicit(&line[0],memory_order_acquire)!=2*i+1); atomic_store_explicit(&line[0],2*i+2,memory_order_release);} return NULL;}
  while(got<N){ sc_mpsc_node *n=sc_mpsc_pop(&q); if(!n) continue; item *it=(item*)n; sum+=it->seq; 
    if(mode==0){ free(it->body); free(it);} else { sc_mpsc_push(&back,&it->link);} got++; atomic_fetch_sub_explicit(&inflight,1,memory_order_relaxed);} 
  return (void*)(uintptr_t)sum;}
int main(int argc,char**argv){ cpu_a=argc>1?atoi(argv[1]):0; cpu_b=argc>2?atoi(argv[2]):1;
 for(mode=0;mode<3;mode++){ sc_mpsc_init(&q); sc_mpsc_init(&back); atomic_store(&line[0],0); pthread_t th; pin(cpu_a); pthread_create(&th,NULL,consumer,NULL);
  uint64_t t0=now();
  if(mode==2){ for(uint64_t i=0;i<N;i++){ atomic_store_explicit(&line[0],2*i+1,memory_order_release); while(atomic_load_explicit(&line[0],memory_order_acquire)!=2*i+2);} }
  else for(uint64_t i=0;i<N;i++){ while(atomic_load_explicit(&inflight,memory_order_relaxed)>32768); item *it=NULL;
    if(mode==1){ sc_mpsc_node *n=sc_mpsc_pop(&back); it=n?(item*)n:malloc(sizeof *it);} else { it=malloc(sizeof *it); it->body=malloc(40);} 
    it->seq=i; atomic_fetch_add_explicit(&inflight,1,memory_order_relaxed); sc_mpsc_push(&q,&it->link);} 
  pthread_join(th,NULL); double s=(now()-t0)*1e-9;
  printf("cpus %d,%d %-28s %.2f M/s (%.0f ns each)\n",cpu_a,cpu_b, mode==0?"mpsc, malloc+free across":mode==1?"mpsc, nodes recycled":"one-line ping-pong (round trip)", N/s/1e6, s*1e9/N);}
 return 0;}
