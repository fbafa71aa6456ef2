/* The cost floor for the benchmark: a loop that only reads the same five /proc files once per
 * interval (sigtimedwait as the sleep, like our daemon) and writes nothing. Whatever this
 * costs on a machine, no service that samples these files at this interval can cost less.
 * Usage: floor <interval_ms>; stops on SIGTERM. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 1000;
    const char *files[] = {"/proc/stat", "/proc/meminfo", "/proc/diskstats", "/proc/net/dev",
                           "/proc/loadavg"};
    int fds[5];
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    for (int i = 0; i < 5; i++) fds[i] = open(files[i], O_RDONLY);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    for (;;) {
        if (sigtimedwait(&set, NULL, &ts) > 0) return 0;
        for (int i = 0; i < 5; i++) {
            off_t off = 0;
            ssize_t r;
            while (fds[i] >= 0 && (r = pread(fds[i], buf + off, sizeof buf - off, off)) > 0) off += r;
        }
    }
}
