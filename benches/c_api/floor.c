/*
 * benches/c_api/floor.c: the floor of an annotated region on this machine, the yardstick for
 * issue 30's "a region at most 30 ns": what the least a tracer can do costs here, with no
 * tracer at all. A region is two clock reads around the body and one 32-byte record (call
 * site, start tick, end tick, a spare word) pushed into a thread's ring, which a consumer
 * thread drains every DRAIN_US microseconds (as our writer does, on the other core).
 *
 *   gcc -O2 -o floor benches/c_api/floor.c -lpthread
 *   ./floor N [DRAIN_US]     N regions per round, 5 rounds; DRAIN_US default 1000
 *
 * Prints, per case, the best of the 5 rounds in ns per call (wall; the loop runs on one core,
 * the consumer on the other):
 *   plain    the body alone (a noinline call)
 *   rdtsc2   the body between two rdtsc
 *   record   rdtsc2 plus the record pushed (release store of the head, as a real ring)
 * record - plain is the floor of one region here: what neither the clock nor the ring can
 * give back. Measured in benches/record/c_api.md.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define CAP (1u << 20) /* bytes, as our default ring */
#define REC 32u

struct ring {
  _Alignas(128) _Atomic uint64_t head;
  _Alignas(128) _Atomic uint64_t tail;
  _Alignas(128) unsigned char buf[CAP];
};

static struct ring ring_;
static volatile long sink_;
static atomic_int stop_;
static long drain_us_ = 1000;

__attribute__((noinline)) static void body(long i) { sink_ += i; }

static void *consumer(void *arg) {
  (void)arg;
  uint64_t sum = 0;
  while (!atomic_load(&stop_)) {
    uint64_t h = atomic_load_explicit(&ring_.head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&ring_.tail, memory_order_relaxed);
    for (; t < h; t += REC) sum += *(uint64_t *)&ring_.buf[(t + 8) & (CAP - 1)];
    atomic_store_explicit(&ring_.tail, t, memory_order_release);
    usleep((useconds_t)drain_us_);
  }
  sink_ += (long)sum;
  return 0;
}

static inline void push(const void *site, uint64_t t0, uint64_t t1) {
  uint64_t h = atomic_load_explicit(&ring_.head, memory_order_relaxed);
  while (h + REC - atomic_load_explicit(&ring_.tail, memory_order_acquire) > CAP) {
  } /* full: wait (never happens when the consumer keeps up) */
  uint64_t *p = (uint64_t *)&ring_.buf[h & (CAP - 1)];
  p[0] = (uint64_t)(uintptr_t)site;
  p[1] = t0;
  p[2] = t1;
  p[3] = 0;
  atomic_store_explicit(&ring_.head, h + REC, memory_order_release);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double round_ns(int what, long n) {
  static const char site[] = "fn";
  double a = now_ns();
  for (long i = 0; i < n; i++) {
    if (what == 0) {
      body(i);
    } else {
      uint64_t t0 = __rdtsc();
      body(i);
      uint64_t t1 = __rdtsc();
      if (what == 1)
        sink_ += (long)(t1 - t0);
      else
        push(site, t0, t1);
    }
  }
  return (now_ns() - a) / (double)n;
}

int main(int argc, char **argv) {
  if (argc < 2 || atol(argv[1]) < 1) {
    fprintf(stderr, "usage: floor N [DRAIN_US]\n");
    return 2;
  }
  long n = atol(argv[1]);
  if (argc > 2) drain_us_ = atol(argv[2]);
  pthread_t th;
  pthread_create(&th, 0, consumer, 0);
  const char *names[] = {"plain", "rdtsc2", "record"};
  for (int what = 0; what < 3; what++) {
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
      double v = round_ns(what, n);
      if (v < best) best = v;
    }
    printf("%-7s %8.2f ns per call\n", names[what], best);
  }
  atomic_store(&stop_, 1);
  pthread_join(th, 0);
  return 0;
}
