/* Overhead benchmark for LD_PRELOAD I/O tracers.
 *
 *   bench pread     <file> <n>   n x pread(fd, buf, 4096, off) over the first 1 MiB
 *   bench openclose <file> <n>   n x (open(file, O_RDONLY); close(fd))
 *   bench opennew   <dir> <n>    open + close of n distinct files of <dir> (its regular files,
 *                                at least n; a path never opened before each time: the
 *                                first-open path of a data loader)
 *   bench both <file> <n> <m>    in ONE process: n x pread as above, then m x open+close
 *                                (the setting of a real program: the second phase runs while
 *                                the tracer still holds the first one's events)
 *
 * Prints one line per phase: "<op> <n> <ns per call> <thread cpu ns> <process cpu ns>": wall
 * time, then the CPU time (user + system) of the calling thread and of the whole process (a
 * tracer's writer thread included) over the phase, all per call. The timed loops contain only
 * the calls; the fd is opened before the clock starts.
 *
 * BENCH_SETTLE_MS=<ms>: each phase makes one call, then sleeps that long before its loop, so
 * that a tracer started by that call has calibrated its clock (in 55 ms; in a program that
 * runs for longer than that, every later call uses the calibrated clock) before the calls
 * are counted (benches/callgrind_check.py). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cpu_ns(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

/* Wall, calling thread's CPU and process CPU at one instant. */
struct stamp { double wall, thread, process; };

static struct stamp stamp(void) {
    struct stamp s = {now_ns(), cpu_ns(RUSAGE_THREAD), cpu_ns(RUSAGE_SELF)};
    return s;
}

static void report(const char *op, long n, struct stamp a, struct stamp b) {
    printf("%s %ld %.1f %.1f %.1f\n", op, n, (b.wall - a.wall) / n, (b.thread - a.thread) / n,
           (b.process - a.process) / n);
    fflush(stdout);
}

/* Sleeps BENCH_SETTLE_MS, if set. */
static void settle(void) {
    const char *ms = getenv("BENCH_SETTLE_MS");
    if (ms)
        usleep(atol(ms) * 1000);
}

/* Each phase returns 0, or -1 after printing why it failed. */
static int preads(const char *path, long n) {
    static char buf[4096];
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); return -1; }
    settle();
    struct stamp a = stamp();
    for (long i = 0; i < n; i++)
        if (pread(fd, buf, sizeof buf, (i & 255) * 4096) != sizeof buf) { perror("pread"); return -1; }
    struct stamp b = stamp();
    close(fd);
    report("pread", n, a, b);
    return 0;
}

static int opencloses(const char *path, long n) {
    int first = open(path, O_RDONLY);
    if (first < 0) { perror(path); return -1; }
    close(first);
    settle();
    struct stamp a = stamp();
    for (long i = 0; i < n; i++) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) { perror(path); return -1; }
        close(fd);
    }
    struct stamp b = stamp();
    report("openclose", n, a, b);
    return 0;
}

/* The first n regular files of dir (paths built before the clock starts). */
static int opennews(const char *dir, long n) {
    DIR *d = opendir(dir);
    if (!d) { perror(dir); return -1; }
    char **paths = calloc(n > 0 ? n : 1, sizeof *paths);
    long have = 0;
    struct dirent *e;
    while (have < n && (e = readdir(d)))
        if (e->d_type == DT_REG && asprintf(&paths[have], "%s/%s", dir, e->d_name) > 0)
            have++;
    closedir(d);
    if (have < n) { fprintf(stderr, "%s: %ld regular files, %ld wanted\n", dir, have, n); return -1; }
    settle();
    struct stamp a = stamp();
    for (long i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY);
        if (fd < 0) { perror(paths[i]); return -1; }
        close(fd);
    }
    struct stamp b = stamp();
    report("opennew", n, a, b);
    for (long i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    return 0;
}

int main(int argc, char **argv) {
    int both = argc == 5 && !strcmp(argv[1], "both");
    if (argc != 4 && !both) {
        fprintf(stderr,
                "usage: %s pread|openclose <file> <n>\n       %s opennew <dir> <n>\n"
                "       %s both <file> <n> <m>\n",
                argv[0], argv[0], argv[0]);
        return 2;
    }
    const char *op = argv[1], *path = argv[2];
    long n = atol(argv[3]);
    if (both)
        return preads(path, n) || opencloses(path, atol(argv[4])) ? 1 : 0;
    if (!strcmp(op, "pread"))
        return preads(path, n) ? 1 : 0;
    if (!strcmp(op, "openclose"))
        return opencloses(path, n) ? 1 : 0;
    if (!strcmp(op, "opennew"))
        return opennews(path, n) ? 1 : 0;
    return 2;
}
