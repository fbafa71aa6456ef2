// A C++ program annotated with the DFTracer C++ API: RAII function regions with args, a
// heap region around main's work, and file I/O under the data directory given to
// DFTRACER_CPP_INIT (traced as POSIX/STDIO events).
//
//   c++ -std=c++17 io_app.cpp $(pkg-config --cflags --libs dftracer) -o io_app_cpp
//   DFTRACER_ENABLE=1 DFTRACER_LOG_FILE=/tmp/t/cpp ./io_app_cpp /tmp/data [bind|nobind]
#include <dftracer/dftracer.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static bool save(const std::string &path, int blocks) {
  DFTRACER_CPP_FUNCTION();
  DFTRACER_CPP_FUNCTION_UPDATE("comp", "io");
  DFTRACER_CPP_FUNCTION_UPDATE("blocks", blocks);
  std::vector<char> buf(4096, 'y');
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return false;
  for (int i = 0; i < blocks; i++) {
    if (write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
      close(fd);
      return false;
    }
  }
  close(fd);
  return true;
}

static long load(const std::string &path) {
  DFTRACER_CPP_FUNCTION();
  DFTRACER_CPP_FUNCTION_UPDATE("comp", "io");
  char buf[4096];
  long total = 0;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
    close(fd);
  }
  DFTRACER_CPP_FUNCTION_UPDATE_TYPE("bytes", static_cast<int>(total), MT_VALUE);
  return total;
}

static size_t stream(const std::string &path) {
  DFTRACER_CPP_REGION(stream);
  char buf[1024];
  size_t total = 0;
  if (FILE *f = std::fopen(path.c_str(), "r")) {
    total = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
  }
  DFTRACER_CPP_REGION_UPDATE(stream, "bytes", static_cast<int>(total));
  DFTRACER_CPP_REGION_UPDATE_TYPE(stream, "mode", "r", MT_KEY);
  return total;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  bool bind = !(argc > 2 && std::strcmp(argv[2], "nobind") == 0);
  if (bind) {
    DFTRACER_CPP_INIT(nullptr, dir, nullptr);
  } else {
    DFTRACER_CPP_INIT_NO_BIND(nullptr, dir, nullptr);
  }
  DFTRACER_CPP_APP_METADATA_STR("workload", "io_app_cpp");
  DFTRACER_CPP_APP_METADATA_INT("files", 2);
  DFTRACER_CPP_MARK_USED("EXAMPLE");
  DFTRACER_CPP_METADATA(version, "app_version", "1.0");

  DFTRACER_CPP_REGION_START(main);
  std::string a = std::string(dir) + "/a.bin", b = std::string(dir) + "/b.bin";
  bool ok = save(a, 3) && save(b, 1);
  long n = load(a) + load(b);
  size_t s = stream(a);
  DFTRACER_CPP_REGION_DYN_UPDATE(main, "ok", ok ? 1 : 0);
  DFTRACER_CPP_REGION_DYN_UPDATE_TYPE(main, "phase", "all", MT_IGNORE);
  DFTRACER_CPP_REGION_END(main);

  std::printf("wrote and read %ld bytes, streamed %zu\n", n, s);
  DFTRACER_CPP_FINI();
  return ok ? 0 : 1;
}
