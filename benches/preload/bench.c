/* Overhead benchmark for LD_PRELOAD I/O tracers.
 *
 *   bench pread     <file> <n>   n x pread(fd, buf, 4096, off) over the first 1 MiB
 *   bench openclose <file> <n>   n x (open(file, O_RDONLY); close(fd))
 *
 * Prints one line: "<op> <n> <ns per call>". The timed loop contains only the calls;
 * the fd is opened before the clock starts. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s pread|openclose <file> <n>\n", argv[0]);
        return 2;
    }
    const char *op = argv[1], *path = argv[2];
    long n = atol(argv[3]);
    static char buf[4096];
    double t0, t1;
    if (!strcmp(op, "pread")) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) { perror(path); return 1; }
        t0 = now_ns();
        for (long i = 0; i < n; i++)
            if (pread(fd, buf, sizeof buf, (i & 255) * 4096) != sizeof buf) { perror("pread"); return 1; }
        t1 = now_ns();
        close(fd);
    } else if (!strcmp(op, "openclose")) {
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            int fd = open(path, O_RDONLY);
            if (fd < 0) { perror(path); return 1; }
            close(fd);
        }
        t1 = now_ns();
    } else {
        return 2;
    }
    printf("%s %ld %.1f\n", op, n, (t1 - t0) / n);
    return 0;
}
