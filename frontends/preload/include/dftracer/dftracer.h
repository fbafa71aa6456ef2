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

/* dftracer-rs: a region of the macros below kept on the caller's stack (a "frame"): its
 * start, its call site and up to two int args live in the caller's variable, so a region
 * without args, or with one or two _UPDATE_INT args, costs one library call (x86-64 with GCC
 * or Clang, where the start is read inline; two elsewhere), no allocation and no shared state
 * until it ends. `d` is what the macros' data_fn / data_<name> point at
 * (its profiler field is a tag of the frame's own address), so the reference's functions
 * (finalize_region, update_metadata_*) still take that pointer. One thread's: the thread
 * that began it. The library fills it; nothing else reads its fields. */
struct dftracer_site_ {
  void *entry_[2];
};
struct dftracer_frame_ {
  struct DFTracerData d;
  unsigned long long ts;
  unsigned long owner;
  struct dftracer_site_ *site;
  struct DFTracerData *cell;
  const char *name;
  const char *cat;
  const char *key[2];
  long long val[2];
  unsigned char mode; /* 0 ended or never begun, 1 on the stack, 2 moved into `cell` */
  unsigned char n;    /* int args in key/val */
  unsigned char trace_type;
};
/* Opens *f (nonzero) or leaves it ended (0: tracing off). Weak: a library without frames
 * (an older one, the reference's) has none, and the macros then take a region cell. */
int dftracer_frame_open_(struct dftracer_frame_ *f, struct dftracer_site_ *site,
                         const char *name, const char *cat, int trace_type) DFTRACER_WEAK_;
/* Ends an open frame and records its event. */
void dftracer_frame_close_(struct dftracer_frame_ *f) DFTRACER_WEAK_;
/* Moves an open frame's region into a region cell (for a string arg, a third int arg) and
 * returns it (NULL when none could be had). */
struct DFTracerData *dftracer_frame_cell_(struct dftracer_frame_ *f) DFTRACER_WEAK_;

/* dftracer-rs: what the macros' frame start reads to open a frame inline, with no call
 * (x86-64 with GCC or Clang): the state word (bit 0: tracing on), the clock's word (even: the
 * library's clock is the TSC, read as rdtsc with bit 63 set; odd: the library reads it) and
 * the key of a frame's tag. Weak, as dftracer_gate_: without it the frame is opened by
 * dftracer_frame_open_. */
struct dftracer_fast_s {
  const volatile unsigned long long *state;
  const volatile unsigned long long *clock;
  unsigned long long frame_key;
};
extern const struct dftracer_fast_s dftracer_fast_ DFTRACER_WEAK_;

#ifdef __cplusplus
}
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && defined(__linux__)
#define DFTRACER_INLINE_OPEN_ 1
#else
#define DFTRACER_INLINE_OPEN_ 0
#endif

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
/* dftracer-rs: the macros' frame start: the pointer their data variable holds (NULL while
 * off). On a library without frames, a region cell (the frame only holds it). */
static inline struct DFTracerData *dftracer_frame_begin_(struct dftracer_frame_ *f,
                                                        struct dftracer_site_ *site,
                                                        const char *name, const char *cat,
                                                        int trace_type) {
  f->mode = 0;
  if (DFTRACER_LIKELY_(dftracer_off_())) return (struct DFTracerData *)0;
#if DFTRACER_INLINE_OPEN_
  {
    /* Tracing on and the clock the TSC: the frame is filled here, as dftracer_frame_open_
     * fills it (the owner is the thread pointer, which pthread_self returns too). */
    const struct dftracer_fast_s *x = &dftracer_fast_;
    if (x != (const struct dftracer_fast_s *)0 && (*x->state & 1) && !(*x->clock & 1)) {
      unsigned long tp;
      __asm__("mov %%fs:0, %0" : "=r"(tp));
      f->d.profiler = (void *)((unsigned long)f ^ (unsigned long)x->frame_key);
      f->owner = tp;
      f->site = site;
      f->cell = (struct DFTracerData *)0;
      f->name = name;
      f->cat = cat;
      f->n = 0;
      f->trace_type = (unsigned char)trace_type;
      f->mode = 1;
      f->ts = __builtin_ia32_rdtsc() | (1ULL << 63);
      return &f->d;
    }
  }
#endif
  if (dftracer_frame_open_ != 0 && &dftracer_gate_ != (const struct dftracer_gate_s *)0)
    return dftracer_frame_open_(f, site, name, cat, trace_type) ? &f->d
                                                                : (struct DFTracerData *)0;
  f->cell = dftracer_begin_(name, cat, DF_DATA_EVENT, trace_type);
  f->mode = f->cell ? 2 : 0;
  return f->cell;
}
/* dftracer-rs: the macros' frame end (and their cleanup): nothing for an ended frame. */
static inline void dftracer_frame_end_(struct dftracer_frame_ *f) {
  if (f->mode == 1) {
    dftracer_frame_close_(f);
  } else if (f->mode == 2) {
    f->mode = 0;
    finalize_region(f->cell);
  }
}
/* dftracer-rs: where an update of the frame's region goes: `d` itself unless it is the open
 * frame, which moves into a cell first. */
static inline struct DFTracerData *dftracer_frame_target_(struct dftracer_frame_ *f,
                                                         struct DFTracerData *d) {
  if (d != &f->d) return d;
  if (f->mode == 1) return dftracer_frame_cell_(f);
  return f->mode == 2 ? f->cell : (struct DFTracerData *)0;
}
/* dftracer-rs: _UPDATE_INT: the first two keys stay in the frame (the same key pointer again
 * replaces its value); more, or a frame already in a cell, go to the cell. */
static inline void dftracer_frame_int_(struct dftracer_frame_ *f, struct DFTracerData *d,
                                       const char *key, int val) {
  if (!key) return; /* ignored, as update_metadata_int ignores it */
  if (d == &f->d && f->mode == 1) {
    if (f->n > 0 && f->key[0] == key) {
      f->val[0] = val;
      return;
    }
    if (f->n > 1 && f->key[1] == key) {
      f->val[1] = val;
      return;
    }
    if (f->n < 2) {
      f->key[f->n] = key;
      f->val[f->n] = val;
      f->n++;
      return;
    }
  }
  d = dftracer_frame_target_(f, d);
  if (d) update_metadata_int(d, key, val);
}
static inline void dftracer_frame_int_type_(struct dftracer_frame_ *f, struct DFTracerData *d,
                                            const char *key, int val, int type) {
  (void)type; /* the written arg is the same for every type */
  dftracer_frame_int_(f, d, key, val);
}
static inline void dftracer_frame_str_(struct dftracer_frame_ *f, struct DFTracerData *d,
                                       const char *key, const char *val, int type) {
  d = dftracer_frame_target_(f, d);
  if (d) update_metadata_string_type(d, key, val, type);
}

/* ------------------------------------------------------------------------------------ C */


static const char *const C_LOG_CATEGORY DFTRACER_UNUSED_ = "C_APP";

#define DFTRACER_C_INIT(log_file, data_dirs, process_id) \
  (initialize_main(log_file, data_dirs, process_id), mark_used("C_APP"));
#define DFTRACER_C_INIT_NO_BIND(log_file, data_dirs, process_id) \
  (initialize_no_bind(log_file, data_dirs, process_id), mark_used("C_APP"));
#define DFTRACER_C_FINI() finalize()
#define DFTRACER_C_APP_METADATA_INT(key, val) set_app_metadata_int(key, val);
#define DFTRACER_C_APP_METADATA_STR(key, val) set_app_metadata_string(key, val);
#define DFTRACER_C_MARK_USED(name) mark_used(name);

/* Regions declared by the macros end when their frame goes out of scope (GCC, Clang), so an
 * early return still records the event. The UPDATE macros skip the call for a NULL region
 * (tracing off) but still evaluate their arguments once, as a call would. data_fn and
 * data_<name> are the reference's variables: the reference's functions take them too. No
 * static variable per call site in C (C99 forbids one in an extern inline function). */
#if defined(__GNUC__) || defined(__clang__)
#define DFTRACER_C_REGION_CLEANUP __attribute__((cleanup(dftracer_frame_end_)))
#else
#define DFTRACER_C_REGION_CLEANUP
#endif

#define DFTRACER_C_FUNCTION_START()                                                   \
  struct dftracer_frame_ dftracer_frame_fn_ DFTRACER_C_REGION_CLEANUP;                \
  struct DFTracerData *data_fn = dftracer_frame_begin_(                                \
      &dftracer_frame_fn_, (struct dftracer_site_ *)0, __func__, C_LOG_CATEGORY, 2);  \
  (void)data_fn;
#define DFTRACER_C_FUNCTION_END()               \
  dftracer_frame_end_(&dftracer_frame_fn_);     \
  data_fn = (struct DFTracerData *)0;
#define DFTRACER_C_REGION_START(name)                                                 \
  struct dftracer_frame_ dftracer_frame_##name##_ DFTRACER_C_REGION_CLEANUP;          \
  struct DFTracerData *data_##name = dftracer_frame_begin_(                            \
      &dftracer_frame_##name##_, (struct dftracer_site_ *)0, #name, C_LOG_CATEGORY, 2); \
  (void)data_##name;
#define DFTRACER_C_REGION_END(name)                 \
  dftracer_frame_end_(&dftracer_frame_##name##_);   \
  data_##name = (struct DFTracerData *)0;

#define DFTRACER_C_METADATA(name, key, val)                     \
  {                                                             \
    struct DFTracerData *data_##name =                          \
        initialize_region(key, val, DF_METADATA_EVENT);         \
    finalize_region(data_##name);                               \
  }
#define DFTRACER_C_FUNCTION_UPDATE_INT(key, val)                             \
  (data_fn ? dftracer_frame_int_(&dftracer_frame_fn_, data_fn, key, val)     \
           : ((void)(key), (void)(val)));
#define DFTRACER_C_FUNCTION_UPDATE_STR(key, val)                             \
  (data_fn ? dftracer_frame_str_(&dftracer_frame_fn_, data_fn, key, val, 0)  \
           : ((void)(key), (void)(val)));
#define DFTRACER_C_REGION_UPDATE_INT(name, key, val)                                   \
  (data_##name ? dftracer_frame_int_(&dftracer_frame_##name##_, data_##name, key, val) \
               : ((void)(key), (void)(val)));
#define DFTRACER_C_REGION_UPDATE_STR(name, key, val)                                      \
  (data_##name ? dftracer_frame_str_(&dftracer_frame_##name##_, data_##name, key, val, 0) \
               : ((void)(key), (void)(val)));
#define DFTRACER_C_FUNCTION_UPDATE_INT_TYPE(key, val, type)                            \
  (data_fn ? dftracer_frame_int_type_(&dftracer_frame_fn_, data_fn, key, val, type)    \
           : ((void)(key), (void)(val), (void)(type)));
#define DFTRACER_C_FUNCTION_UPDATE_STR_TYPE(key, val, type)                            \
  (data_fn ? dftracer_frame_str_(&dftracer_frame_fn_, data_fn, key, val, type)         \
           : ((void)(key), (void)(val), (void)(type)));
#define DFTRACER_C_REGION_UPDATE_INT_TYPE(name, key, val, type)                         \
  (data_##name                                                                          \
       ? dftracer_frame_int_type_(&dftracer_frame_##name##_, data_##name, key, val, type) \
       : ((void)(key), (void)(val), (void)(type)));
#define DFTRACER_C_REGION_UPDATE_STR_TYPE(name, key, val, type)                         \
  (data_##name                                                                          \
       ? dftracer_frame_str_(&dftracer_frame_##name##_, data_##name, key, val, type)    \
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
 * the same event as a DFTracer object (layer CPP_APP, type 9), kept in a frame on the stack
 * (see dftracer_frame_), with its off check inline (no call while no region can be
 * recorded) and no call at scope end for an ended region. The macros pass a call site (a
 * static, zero-initialised once: no guard) where the library remembers the region's
 * schema. */
class DFTracerScope {
  struct dftracer_frame_ f_;
  struct DFTracerData *data_;

 public:
  DFTracerScope(ConstEventNameType name, ConstEventNameType cat)
      : data_(dftracer_frame_begin_(&f_, (struct dftracer_site_ *)0, name, cat, 9)) {}
  DFTracerScope(struct dftracer_site_ *site, ConstEventNameType name, ConstEventNameType cat)
      : data_(dftracer_frame_begin_(&f_, site, name, cat, 9)) {}
  DFTracerScope(const DFTracerScope &) = delete;
  DFTracerScope &operator=(const DFTracerScope &) = delete;
  /* Adds an arg to the region's event (the same key again replaces its value). */
  void update(const char *key, int value, MetadataType type = MT_KEY) {
    if (data_) dftracer_frame_int_type_(&f_, data_, key, value, (int)type);
  }
  void update(const char *key, const char *value, MetadataType type = MT_KEY) {
    if (data_) dftracer_frame_str_(&f_, data_, key, value, (int)type);
  }
  /* Ends the region now (the destructor then does nothing). */
  void finalize() {
    dftracer_frame_end_(&f_);
    data_ = (struct DFTracerData *)0;
  }
  ~DFTracerScope() { dftracer_frame_end_(&f_); }
};

#define DFTRACER_CPP_INIT(log_file, data_dirs, process_id) \
  (initialize_main(log_file, data_dirs, process_id), mark_used("CPP_APP"));
#define DFTRACER_CPP_INIT_NO_BIND(log_file, data_dirs, process_id) \
  (initialize_no_bind(log_file, data_dirs, process_id), mark_used("CPP_APP"));
#define DFTRACER_CPP_FINI() finalize()
#define DFTRACER_CPP_APP_METADATA_INT(key, val) set_app_metadata_int(key, val);
#define DFTRACER_CPP_APP_METADATA_STR(key, val) set_app_metadata_string(key, val);
#define DFTRACER_CPP_MARK_USED(name) mark_used(name);
#define DFTRACER_CPP_FUNCTION()                   \
  static struct dftracer_site_ dftracer_site_fn_; \
  DFTracerScope profiler_dft_fn(&dftracer_site_fn_, __FUNCTION__, CPP_LOG_CATEGORY);
#define DFTRACER_CPP_FUNCTION_UPDATE(key, val) profiler_dft_fn.update(key, val);
#define DFTRACER_CPP_FUNCTION_UPDATE_TYPE(key, val, type) profiler_dft_fn.update(key, val, type);
#define DFTRACER_CPP_REGION(name)                        \
  static struct dftracer_site_ dftracer_site_##name##_;  \
  DFTracerScope profiler_##name(&dftracer_site_##name##_, #name, CPP_LOG_CATEGORY);
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
