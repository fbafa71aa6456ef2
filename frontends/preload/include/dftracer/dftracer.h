/*
 * dftracer/dftracer.h: the C and C++ API of DFTracer (dftracer-rs), source-compatible with the
 * DFTracer 2.2.0 header. Link with -ldftracer_core (pkg-config: dftracer; CMake:
 * find_package(dftracer) and target dftracer::dftracer_core).
 *
 * Includes only its sibling headers, as the reference's does: dftracer/core/common/constants.h
 * and typedef.h (C and C++), and in C++ cpp_typedefs.h and enumeration.h (with <string>,
 * <unordered_map>, and <any> from C++17 on). Compiles as C99 and as C++11 to C++20 with
 * -Wall -Wextra -Werror.
 *
 * The C++ class DFTracer has the reference's layout and its members are the library's
 * exported functions under the reference's mangled names, so a C++ program built against
 * either header runs on either library (libdftracer_core.so.4.3.0).
 *
 *   int main(void) {
 *     DFTRACER_C_INIT(NULL, "/scratch/data", NULL);   // start tracing + bind I/O
 *     DFTRACER_C_REGION_START(load);
 *     DFTRACER_C_REGION_UPDATE_INT(load, "files", 3);
 *     ...
 *     DFTRACER_C_REGION_END(load);                    // one C_APP event "load"
 *     DFTRACER_C_FINI();
 *   }
 *
 * Every function is safe to call with tracing off (DFTRACER_ENABLE unset): it does nothing,
 * and initialize_region returns NULL, which every other function accepts. NULL strings and
 * pointers that are not open regions are ignored.
 */
#ifndef DFTRACER_DFTRACER_H
#define DFTRACER_DFTRACER_H

#include <dftracer/core/common/constants.h>
#include <dftracer/core/common/typedef.h>

/* Kinds of region (initialize_region's event_type). */
#define DF_DATA_EVENT 0     /* a complete event with a start time and a duration */
#define DF_METADATA_EVENT 1 /* a CM metadata record: name = key, cat = value */

#if defined(__GNUC__) || defined(__clang__)
#define DFTRACER_UNUSED_ __attribute__((unused))
#define DFTRACER_WEAK_ __attribute__((weak))
#define DFTRACER_LIKELY_(x) __builtin_expect(!!(x), 1)
#else
#define DFTRACER_UNUSED_
#define DFTRACER_WEAK_
#define DFTRACER_LIKELY_(x) (x)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Starts tracing in this process and traces its POSIX/stdio I/O on the files under data_dirs
 * (':'-separated; joined with DFTRACER_DATA_DIR). NULL arguments fall back to the environment
 * (DFTRACER_LOG_FILE, DFTRACER_DATA_DIR). process_id is accepted and ignored: the trace holds
 * the real pid. A second call is ignored. */
void initialize_main(const char *log_file, const char *data_dirs, int *process_id);
/* The same without I/O tracing: only the API's regions and metadata are recorded. */
void initialize_no_bind(const char *log_file, const char *data_dirs, int *process_id);
/* Writes the end record and closes the trace (idempotent; also runs at exit). */
void finalize(void);

/* Process-wide metadata, written in the end record's "app" object (last write wins). */
void set_app_metadata_int(const char *key, int value);
void set_app_metadata_string(const char *key, const char *value);
/* Names a layer or integration as used in this run (end record's "used" object). */
void mark_used(const char *name);

/* An open region. Allocated by initialize_region, released by finalize_region. */
struct DFTracerData {
  void *profiler;
};

/* Begins a region (a "C_APP" event, type 2, when it ends). NULL when tracing is off. */
struct DFTracerData *initialize_region(const char *name, const char *cat, int event_type);
/* Ends the region and records its event; a second call for the same region does nothing. */
void finalize_region(struct DFTracerData *data);
/* For __attribute__((cleanup)): ends *data if still open and sets it to NULL. */
void finalize_region_cleanup(struct DFTracerData **data);
/* Adds an arg to the region's event (the same key again replaces its value). */
void update_metadata_int(struct DFTracerData *data, const char *key, int value);
void update_metadata_string(struct DFTracerData *data, const char *key, const char *value);
/* The same with a metadata type (MT_KEY 0, MT_VALUE 1, MT_IGNORE 2); the arg is written for
 * every type. */
void update_metadata_int_type(struct DFTracerData *data, const char *key, int value, int type);
void update_metadata_string_type(struct DFTracerData *data, const char *key, const char *value,
                                 int type);

/* dftracer-rs: initialize_region with the event's layer (trace_type: 2 C_APP, 9 CPP_APP). */
struct DFTracerData *dftracer_region_begin(const char *name, const char *cat, int event_type,
                                           int trace_type);

/* dftracer-rs: dftracer_region_begin for a region that the calling thread ends at the end of
 * the same scope (what the region macros below call): cheaper to end; its end or updates from
 * another thread are ignored (the owner's scope end records it). Weak, as dftracer_gate_ below:
 * called only where the gate exists. */
struct DFTracerData *dftracer_scope_begin(const char *name, const char *cat, int event_type,
                                          int trace_type) DFTRACER_WEAK_;

/* dftracer-rs: what the macros below read inline, so that a region costs two loads and no
 * call while regions cannot be recorded (tracing off, or after finalize): the library's
 * state word (bit 0: tracing on) and whether its lazy start was decided. Declared weak: a
 * program built with this header that runs on a library without it calls the functions. */
struct dftracer_gate_s {
  const volatile unsigned long long *state;
  const volatile unsigned char *decided;
};
extern const struct dftracer_gate_s dftracer_gate_ DFTRACER_WEAK_;

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------------------------ C */

/* dftracer-rs: nonzero when no region can be recorded now (see dftracer_gate_). */
static inline int dftracer_off_(void) {
  const struct dftracer_gate_s *g = &dftracer_gate_;
  return g != (const struct dftracer_gate_s *)0 && !(*g->state & 1) && *g->decided;
}
/* dftracer-rs: the macros' region start: NULL at once while off. */
static inline struct DFTracerData *dftracer_begin_(const char *name, const char *cat,
                                                  int event_type, int trace_type) {
  if (DFTRACER_LIKELY_(dftracer_off_())) return (struct DFTracerData *)0;
  /* On a library without dftracer_gate_ (not ours), the reference's function. */
  if (&dftracer_gate_ == (const struct dftracer_gate_s *)0)
    return initialize_region(name, cat, event_type);
  return dftracer_scope_begin(name, cat, event_type, trace_type);
}
/* dftracer-rs: the macros' cleanup: no call for a region already ended or never begun. */
static inline void dftracer_cleanup_(struct DFTracerData **data) {
  if (*data) finalize_region_cleanup(data);
}

static const char *const C_LOG_CATEGORY DFTRACER_UNUSED_ = "C_APP";

#define DFTRACER_C_INIT(log_file, data_dirs, process_id) \
  (initialize_main(log_file, data_dirs, process_id), mark_used("C_APP"));
#define DFTRACER_C_INIT_NO_BIND(log_file, data_dirs, process_id) \
  (initialize_no_bind(log_file, data_dirs, process_id), mark_used("C_APP"));
#define DFTRACER_C_FINI() finalize()
#define DFTRACER_C_APP_METADATA_INT(key, val) set_app_metadata_int(key, val);
#define DFTRACER_C_APP_METADATA_STR(key, val) set_app_metadata_string(key, val);
#define DFTRACER_C_MARK_USED(name) mark_used(name);

/* Regions declared by the macros end when their variable goes out of scope (GCC, Clang), so
 * an early return still records the event. The UPDATE macros skip the call for a NULL region
 * (tracing off) but still evaluate their arguments once, as a call would. */
#if defined(__GNUC__) || defined(__clang__)
#define DFTRACER_C_REGION_CLEANUP __attribute__((cleanup(dftracer_cleanup_)))
#else
#define DFTRACER_C_REGION_CLEANUP
#endif

#define DFTRACER_C_FUNCTION_START()                                   \
  struct DFTracerData *data_fn DFTRACER_C_REGION_CLEANUP =            \
      dftracer_begin_(__func__, C_LOG_CATEGORY, DF_DATA_EVENT, 2);    \
  (void)data_fn;
#define DFTRACER_C_FUNCTION_END()                                \
  (data_fn ? finalize_region(data_fn) : (void)0);                \
  data_fn = (struct DFTracerData *)0;
#define DFTRACER_C_REGION_START(name)                                 \
  struct DFTracerData *data_##name DFTRACER_C_REGION_CLEANUP =        \
      dftracer_begin_(#name, C_LOG_CATEGORY, DF_DATA_EVENT, 2);       \
  (void)data_##name;
#define DFTRACER_C_REGION_END(name)                              \
  (data_##name ? finalize_region(data_##name) : (void)0);        \
  data_##name = (struct DFTracerData *)0;
#define DFTRACER_C_METADATA(name, key, val)                     \
  {                                                             \
    struct DFTracerData *data_##name =                          \
        initialize_region(key, val, DF_METADATA_EVENT);         \
    finalize_region(data_##name);                               \
  }
#define DFTRACER_C_FUNCTION_UPDATE_INT(key, val) \
  (data_fn ? update_metadata_int(data_fn, key, val) : ((void)(key), (void)(val)));
#define DFTRACER_C_FUNCTION_UPDATE_STR(key, val) \
  (data_fn ? update_metadata_string(data_fn, key, val) : ((void)(key), (void)(val)));
#define DFTRACER_C_REGION_UPDATE_INT(name, key, val) \
  (data_##name ? update_metadata_int(data_##name, key, val) : ((void)(key), (void)(val)));
#define DFTRACER_C_REGION_UPDATE_STR(name, key, val) \
  (data_##name ? update_metadata_string(data_##name, key, val) : ((void)(key), (void)(val)));
#define DFTRACER_C_FUNCTION_UPDATE_INT_TYPE(key, val, type) \
  (data_fn ? update_metadata_int_type(data_fn, key, val, type) \
      : ((void)(key), (void)(val), (void)(type)));
#define DFTRACER_C_FUNCTION_UPDATE_STR_TYPE(key, val, type) \
  (data_fn ? update_metadata_string_type(data_fn, key, val, type) \
      : ((void)(key), (void)(val), (void)(type)));
#define DFTRACER_C_REGION_UPDATE_INT_TYPE(name, key, val, type) \
  (data_##name ? update_metadata_int_type(data_##name, key, val, type) \
      : ((void)(key), (void)(val), (void)(type)));
#define DFTRACER_C_REGION_UPDATE_STR_TYPE(name, key, val, type) \
  (data_##name ? update_metadata_string_type(data_##name, key, val, type) \
      : ((void)(key), (void)(val), (void)(type)));

/* ---------------------------------------------------------------------------------- C++ */

#ifdef __cplusplus

#include <dftracer/core/common/cpp_typedefs.h>
#include <dftracer/core/common/enumeration.h>

static const char *const CPP_LOG_CATEGORY DFTRACER_UNUSED_ = "CPP_APP";

/* A region that ends with its scope, at finalize() or at delete: one event of layer `type`
 * (default CPP_APP, type 9) when it ends. The data members are the reference's, in its order
 * (programs built against its header allocate this layout); the library keeps its region
 * handle in `metadata`. Copying is not allowed (a copy would end the region twice); moving
 * hands the region over. */
class DFTracer {
  int event_type; /* DF_DATA_EVENT or DF_METADATA_EVENT */
  bool initialized;
  ConstEventNameType name;
  ConstEventNameType cat;
  TraceEventType type;
  TimeResolution start_time;
  dftracer::Metadata *metadata;

 public:
  DFTracer(ConstEventNameType _name, ConstEventNameType _cat, int _event_type = DF_DATA_EVENT,
           TraceEventType _type = TRACE_TYPE_CPP_APP);
  DFTracer(DFTracer &&other) noexcept
      : event_type(other.event_type),
        initialized(other.initialized),
        name(other.name),
        cat(other.cat),
        type(other.type),
        start_time(other.start_time),
        metadata(other.metadata) {
    other.initialized = false;
    other.metadata = nullptr;
  }
  DFTracer(const DFTracer &) = delete;
  DFTracer &operator=(const DFTracer &) = delete;
  DFTracer &operator=(DFTracer &&) = delete;

  /* Adds an arg to the region's event (the same key again replaces its value). */
  void update(const char *key, int value, MetadataType _type = MT_KEY);
  void update(const char *key, const char *value, MetadataType _type = MT_KEY);
  /* Ends the region now (the destructor then does nothing). */
  void finalize();
  ~DFTracer();
};

/* dftracer-rs: the scoped region of DFTRACER_CPP_FUNCTION() and DFTRACER_CPP_REGION(name):
 * the same event as a DFTracer object (layer CPP_APP, type 9), with its off check inline
 * (no call while no region can be recorded) and no call at scope end for an ended region. */
class DFTracerScope {
  struct DFTracerData *data_;

 public:
  DFTracerScope(ConstEventNameType name, ConstEventNameType cat)
      : data_(dftracer_begin_(name, cat, DF_DATA_EVENT, 9)) {}
  DFTracerScope(const DFTracerScope &) = delete;
  DFTracerScope &operator=(const DFTracerScope &) = delete;
  /* Adds an arg to the region's event (the same key again replaces its value). */
  void update(const char *key, int value, MetadataType type = MT_KEY) {
    if (data_) update_metadata_int_type(data_, key, value, (int)type);
  }
  void update(const char *key, const char *value, MetadataType type = MT_KEY) {
    if (data_) update_metadata_string_type(data_, key, value, (int)type);
  }
  /* Ends the region now (the destructor then does nothing). */
  void finalize() {
    if (data_) finalize_region(data_);
    data_ = (struct DFTracerData *)0;
  }
  ~DFTracerScope() {
    if (data_) finalize_region(data_);
  }
};

#define DFTRACER_CPP_INIT(log_file, data_dirs, process_id) \
  (initialize_main(log_file, data_dirs, process_id), mark_used("CPP_APP"));
#define DFTRACER_CPP_INIT_NO_BIND(log_file, data_dirs, process_id) \
  (initialize_no_bind(log_file, data_dirs, process_id), mark_used("CPP_APP"));
#define DFTRACER_CPP_FINI() finalize()
#define DFTRACER_CPP_APP_METADATA_INT(key, val) set_app_metadata_int(key, val);
#define DFTRACER_CPP_APP_METADATA_STR(key, val) set_app_metadata_string(key, val);
#define DFTRACER_CPP_MARK_USED(name) mark_used(name);
#define DFTRACER_CPP_FUNCTION() DFTracerScope profiler_dft_fn(__FUNCTION__, CPP_LOG_CATEGORY);
#define DFTRACER_CPP_FUNCTION_UPDATE(key, val) profiler_dft_fn.update(key, val);
#define DFTRACER_CPP_FUNCTION_UPDATE_TYPE(key, val, type) profiler_dft_fn.update(key, val, type);
#define DFTRACER_CPP_REGION(name) DFTracerScope profiler_##name(#name, CPP_LOG_CATEGORY);
#define DFTRACER_CPP_REGION_UPDATE(name, key, val) profiler_##name.update(key, val);
#define DFTRACER_CPP_REGION_UPDATE_TYPE(name, key, val, type) \
  profiler_##name.update(key, val, type);
#define DFTRACER_CPP_REGION_START(name) \
  DFTracer *profiler_##name = new DFTracer(#name, CPP_LOG_CATEGORY, DF_DATA_EVENT);
#define DFTRACER_CPP_REGION_END(name) delete profiler_##name
#define DFTRACER_CPP_REGION_DYN_UPDATE(name, key, val) profiler_##name->update(key, val);
#define DFTRACER_CPP_REGION_DYN_UPDATE_TYPE(name, key, val, type) \
  profiler_##name->update(key, val, type);
#define DFTRACER_CPP_METADATA(name, key, value)                 \
  {                                                             \
    DFTracer profiler_##name(key, value, DF_METADATA_EVENT);    \
  }

#endif /* __cplusplus */

#endif /* DFTRACER_DFTRACER_H */
