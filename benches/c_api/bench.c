/*
 * benches/c_api/bench.c: what one annotated C region costs, as HPC codes write it (the
 * macros of dftracer/dftracer.h around a trivial function body), for ours and the reference
 * (the same source compiles against either header; benches/c_api/run.sh builds both).
 *
 *   bench CASE N [BURST]   CASE: plain | fn | fn_2int | region | rdtsc | clock
 *                          (built as C++ also cpp_fn | cpp_fn_2int: DFTRACER_CPP_FUNCTION())
 *
 * Prints one line: CASE N wall_ns_per_call thread_cpu_ns_per_call process_cpu_ns_per_call,
 * where the process figure (every thread: the writer's encoding and compression included)
 * is taken after DFTRACER_C_FINI, so it counts the work of writing the events out.
 *
 * Without BURST the N calls run back to back: at tens of millions of regions a second the
 * writer cannot keep up, the thread's ring fills, and the calling thread then encodes part of
 * it itself (nothing is dropped), so the figure is the sustained rate, bounded by the
 * writer. With BURST the calls run in bursts of BURST, 5 ms apart (pauses not timed), as a
 * code whose regions leave the writer time to drain: what a region costs its thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dftracer/dftracer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile long sink_;

__attribute__((noinline)) static void plain(long i) { sink_ += i; }

__attribute__((noinline)) static void fn(long i) {
  DFTRACER_C_FUNCTION_START();
  sink_ += i;
  DFTRACER_C_FUNCTION_END();
}

__attribute__((noinline)) static void fn_2int(long i) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT("step", (int)i);
  DFTRACER_C_FUNCTION_UPDATE_INT("rank", 3);
  sink_ += i;
  DFTRACER_C_FUNCTION_END();
}

__attribute__((noinline)) static void region(long i) {
  DFTRACER_C_REGION_START(compute);
  sink_ += i;
  DFTRACER_C_REGION_END(compute);
}

#ifdef __cplusplus
__attribute__((noinline)) static void cpp_fn(long i) {
  DFTRACER_CPP_FUNCTION();
  sink_ += i;
}

__attribute__((noinline)) static void cpp_fn_2int(long i) {
  DFTRACER_CPP_FUNCTION();
  DFTRACER_CPP_FUNCTION_UPDATE("step", (int)i);
  DFTRACER_CPP_FUNCTION_UPDATE("rank", 3);
  sink_ += i;
}
#endif

__attribute__((noinline)) static void rdtsc_twice(long i) {
  sink_ += (long)__builtin_ia32_rdtsc() + i;
  sink_ += (long)__builtin_ia32_rdtsc();
}

__attribute__((noinline)) static void clock_twice(long i) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  sink_ += t.tv_nsec + i;
  clock_gettime(CLOCK_REALTIME, &t);
  sink_ += t.tv_nsec;
}

static double ns(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr,
            "usage: bench plain|fn|fn_2int|region|rdtsc|clock|cpp_fn|cpp_fn_2int N [BURST]\n");
    return 2;
  }
  const char *c = argv[1];
  long n = atol(argv[2]);
  long burst = argc == 4 ? atol(argv[3]) : n;
  if (burst <= 0) {
    fprintf(stderr, "bench: bad BURST '%s'\n", argv[3]);
    return 2;
  }
  void (*f)(long) = !strcmp(c, "plain")     ? plain
                    : !strcmp(c, "fn")      ? fn
                    : !strcmp(c, "fn_2int") ? fn_2int
                    : !strcmp(c, "region")  ? region
                    : !strcmp(c, "rdtsc")   ? rdtsc_twice
                    : !strcmp(c, "clock")   ? clock_twice
#ifdef __cplusplus
                    : !strcmp(c, "cpp_fn")      ? cpp_fn
                    : !strcmp(c, "cpp_fn_2int") ? cpp_fn_2int
#endif
                                            : NULL;
  if (!f || n <= 0) {
    fprintf(stderr, "bench: unknown case '%s' or bad N '%s'\n", c, argv[2]);
    return 2;
  }
  DFTRACER_C_INIT(NULL, NULL, NULL);
  for (long i = 0; i < 1000; i++) f(i); /* warm: first-call work (lazy start, caches) */
  double wall = 0, thread = 0, p0 = ns(CLOCK_PROCESS_CPUTIME_ID);
  for (long done = 0; done < n; done += burst) {
    long m = n - done < burst ? n - done : burst;
    if (done > 0) {
      struct timespec pause = {0, 5000000};
      nanosleep(&pause, NULL);
    }
    double w0 = ns(CLOCK_MONOTONIC), t0 = ns(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < m; i++) f(done + i);
    wall += ns(CLOCK_MONOTONIC) - w0;
    thread += ns(CLOCK_THREAD_CPUTIME_ID) - t0;
  }
  DFTRACER_C_FINI();
  double p1 = ns(CLOCK_PROCESS_CPUTIME_ID);
  printf("%s %ld %.2f %.2f %.2f\n", c, n, wall / n, thread / n, (p1 - p0) / n);
  return 0;
}
