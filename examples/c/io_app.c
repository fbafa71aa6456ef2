/* A C program annotated with the DFTracer C API: regions, args, and file I/O under the data
 * directory given to DFTRACER_C_INIT (traced as POSIX/STDIO events).
 *
 *   cc -std=c99 io_app.c $(pkg-config --cflags --libs dftracer) -o io_app
 *   DFTRACER_ENABLE=1 DFTRACER_LOG_FILE=/tmp/t/c ./io_app /tmp/data [bind|nobind]
 */
#include <dftracer/dftracer.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int write_file(const char *path, int blocks) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_STR("path", path);
  DFTRACER_C_FUNCTION_UPDATE_INT("blocks", blocks);
  char buf[4096];
  memset(buf, 'x', sizeof buf);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) {
    return -1; /* the cleanup attribute still ends the region */
  }
  for (int i = 0; i < blocks; i++) {
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
      close(fd);
      return -1;
    }
  }
  close(fd);
  DFTRACER_C_FUNCTION_END();
  return 0;
}

static long read_file(const char *path) {
  DFTRACER_C_FUNCTION_START();
  char buf[4096];
  long total = 0;
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
    close(fd);
  }
  DFTRACER_C_FUNCTION_UPDATE_INT_TYPE("bytes", (int)total, 1);
  DFTRACER_C_FUNCTION_UPDATE_STR_TYPE("kind", "sequential", 2);
  DFTRACER_C_FUNCTION_END();
  return total;
}

static size_t stream_file(const char *path) {
  DFTRACER_C_REGION_START(stream);
  char buf[1024];
  size_t total = 0;
  FILE *f = fopen(path, "r");
  if (f) {
    total = fread(buf, 1, sizeof buf, f);
    fclose(f);
  }
  DFTRACER_C_REGION_UPDATE_INT(stream, "bytes", (int)total);
  DFTRACER_C_REGION_UPDATE_STR_TYPE(stream, "mode", "r", 0);
  DFTRACER_C_REGION_UPDATE_INT_TYPE(stream, "calls", 1, 1);
  DFTRACER_C_REGION_END(stream);
  return total;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  int bind = !(argc > 2 && strcmp(argv[2], "nobind") == 0);
  if (bind) {
    DFTRACER_C_INIT(NULL, dir, NULL);
  } else {
    DFTRACER_C_INIT_NO_BIND(NULL, dir, NULL);
  }
  DFTRACER_C_APP_METADATA_STR("workload", "io_app");
  DFTRACER_C_APP_METADATA_INT("files", 2);
  DFTRACER_C_MARK_USED("EXAMPLE");
  DFTRACER_C_METADATA(version, "app_version", "1.0");

  DFTRACER_C_REGION_START(work);
  char a[512], b[512];
  snprintf(a, sizeof a, "%s/a.bin", dir);
  snprintf(b, sizeof b, "%s/b.bin", dir);
  int rc = write_file(a, 3) | write_file(b, 1);
  long n = read_file(a) + read_file(b);
  size_t s = stream_file(a);
  DFTRACER_C_REGION_UPDATE_INT(work, "rc", rc);
  DFTRACER_C_REGION_END(work);

  printf("wrote and read %ld bytes, streamed %zu\n", n, s);
  DFTRACER_C_FINI();
  return rc == 0 ? 0 : 1;
}
