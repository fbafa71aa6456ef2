/*
 * dftracer/core/common/enumeration.h (dftracer-rs): DFTracer's enumerations and their text
 * conversions, with the names, values and results of the DFTracer 2.2.0 header of the same
 * name. C++ only.
 *
 * The trace format's integer columns come from here: "type" is a TraceEventType, "ph" a
 * TracePhaseType (FORMAT.md). Both are append-only: values are never renumbered.
 *
 * The reference header includes <cpp-logger/logger.h> for one overload,
 * convert(const std::string&, cpplogger::LoggerType&); dftracer-rs does not use cpp-logger,
 * so that overload is declared only when <cpp-logger/logger.h> is on the include path.
 */
#ifndef DFTRACER_ENUMERATION_H
#define DFTRACER_ENUMERATION_H

#ifndef __cplusplus
#error "dftracer/core/common/enumeration.h is a C++ header"
#endif

#include <stdint.h>

#include <string>

#if defined(__has_include)
#if __has_include(<cpp-logger/logger.h>)
#include <cpp-logger/logger.h>
#define DFTRACER_HAVE_CPP_LOGGER_ 1
#endif
#endif

enum WriterType : uint8_t { CHROME = 0 };

enum ProfilerStage : uint8_t { PROFILER_INIT = 0, PROFILER_FINI = 1, PROFILER_OTHER = 2 };

/* Who started the profiler. */
enum ProfileType : uint8_t {
  PROFILER_PRELOAD = 0,
  PROFILER_PY_APP = 1,
  PROFILER_CPP_APP = 2,
  PROFILER_C_APP = 3,
  PROFILER_ANY = 4
};

/* DFTRACER_INIT: none, PRELOAD, FUNCTION. */
enum ProfileInitType : uint8_t {
  PROFILER_INIT_NONE = 0,
  PROFILER_INIT_LD_PRELOAD = 1,
  PROFILER_INIT_FUNCTION = 2
};

enum ValueType : uint8_t { VALUE_TYPE_NUMBER = 0, VALUE_TYPE_STRING = 1 };

/* How an arg takes part in aggregation (dftracer-rs writes the arg for every type). */
enum MetadataType : uint8_t { MT_KEY = 0, MT_VALUE = 1, MT_IGNORE = 2 };

/* DFTRACER_AGGREGATION_TYPE: FULL, SELECTIVE. */
enum AggregationType : uint8_t { AGGREGATION_TYPE_FULL = 0, AGGREGATION_TYPE_SELECTIVE = 1 };

/* DFTRACER_TIME_METRIC: US, NS, MS, SEC. */
enum TimeMetricType : uint8_t {
  TIME_METRIC_US = 0,
  TIME_METRIC_NS = 1,
  TIME_METRIC_MS = 2,
  TIME_METRIC_SEC = 3
};

/* Operators of aggregation rules. */
enum class RuleOp { AND, OR, NOT, EQ, NEQ, GT, LT, GTE, LTE, IN, LIKE };

/* The layer that produced an event: the trace's integer "type" ("cat" refines it, e.g.
 * LIBC_IO events have cat POSIX or STDIO). */
enum TraceEventType : uint8_t {
  TRACE_TYPE_UNKNOWN = 0,
  TRACE_TYPE_DFTRACER = 1,
  TRACE_TYPE_C_APP = 2,
  TRACE_TYPE_LIBC_IO = 3,
  TRACE_TYPE_HIP = 4,
  TRACE_TYPE_HDF5 = 5,
  TRACE_TYPE_PYTHON = 6,
  TRACE_TYPE_PSUTIL = 7,
  TRACE_TYPE_FINSTRUMENT = 8,
  TRACE_TYPE_CPP_APP = 9,
  TRACE_TYPE_MPI = 10,
  TRACE_TYPE_PAPI = 11,
  TRACE_TYPE_OMNISTAT = 12,
  TRACE_TYPE_VARIORUM = 13,
  TRACE_TYPE_CUDA = 14,
  TRACE_TYPE_MAX /* one past the last type; never written */
};

/* The kind of record: the trace's integer "ph". */
enum TracePhaseType : uint8_t {
  TRACE_PHASE_UNKNOWN = 0,
  TRACE_PHASE_COMPLETE = 1,   /* an event with ts and dur (Chrome "X") */
  TRACE_PHASE_COUNTER = 2,    /* a reading at a timestamp (Chrome "C") */
  TRACE_PHASE_AGGREGATED = 3, /* an aggregated record */
  TRACE_PHASE_METADATA = 4,   /* a metadata record (Chrome "M") */
  TRACE_PHASE_MAX             /* one past the last phase; never written */
};

/* The layer's name as the "used" object of the end record spells it; "UNKNOWN" for
 * TRACE_TYPE_UNKNOWN and values out of range. */
inline const char *to_string(const TraceEventType &type) {
  static const char *const names[TRACE_TYPE_MAX] = {
      "UNKNOWN", "DFTRACER", "C_APP",       "LIBC_IO", "HIP", "HDF5",     "PYTHON", "PSUTIL",
      "FINSTRUMENT", "CPP_APP", "MPI", "PAPI", "OMNISTAT", "VARIORUM", "CUDA"};
  const unsigned i = static_cast<unsigned>(type);
  return i < static_cast<unsigned>(TRACE_TYPE_MAX) ? names[i] : "UNKNOWN";
}

/* An integer as a TraceEventType (out of range: TRACE_TYPE_UNKNOWN). */
inline void convert(const int &s, TraceEventType &type) {
  const bool known = s >= 0 && s < static_cast<int>(TRACE_TYPE_MAX);
  type = known ? static_cast<TraceEventType>(s) : TRACE_TYPE_UNKNOWN;
}

/* "COMPLETE", "COUNTER", "AGGREGATED", "METADATA"; "UNKNOWN" otherwise. */
inline const char *to_string(const TracePhaseType &phase) {
  static const char *const names[TRACE_PHASE_MAX] = {"UNKNOWN", "COMPLETE", "COUNTER",
                                                     "AGGREGATED", "METADATA"};
  const unsigned i = static_cast<unsigned>(phase);
  return i < static_cast<unsigned>(TRACE_PHASE_MAX) ? names[i] : "UNKNOWN";
}

/* An integer as a TracePhaseType (out of range: TRACE_PHASE_UNKNOWN). */
inline void convert(const int &s, TracePhaseType &phase) {
  const bool known = s >= 0 && s < static_cast<int>(TRACE_PHASE_MAX);
  phase = known ? static_cast<TracePhaseType>(s) : TRACE_PHASE_UNKNOWN;
}

/* An integer as a MetadataType: 0 MT_KEY, 1 MT_VALUE, 2 MT_IGNORE, anything else MT_KEY. */
inline MetadataType convert(const int &s) {
  return (s == 1 || s == 2) ? static_cast<MetadataType>(s) : MT_KEY;
}

inline void convert(const int &s, MetadataType &type) { type = convert(s); }

/* DFTRACER_INIT's value: "PRELOAD", "FUNCTION", anything else none. */
inline void convert(const std::string &s, ProfileInitType &type) {
  if (s == "PRELOAD")
    type = PROFILER_INIT_LD_PRELOAD;
  else if (s == "FUNCTION")
    type = PROFILER_INIT_FUNCTION;
  else
    type = PROFILER_INIT_NONE;
}

#ifdef DFTRACER_HAVE_CPP_LOGGER_
/* DFTRACER_LOG_LEVEL's value: "DEBUG", "INFO", "WARN", anything else ERROR. */
inline void convert(const std::string &s, cpplogger::LoggerType &type) {
  if (s == "DEBUG")
    type = cpplogger::LoggerType::CPP_LOGGER_DEBUG;
  else if (s == "INFO")
    type = cpplogger::LoggerType::CPP_LOGGER_INFO;
  else if (s == "WARN")
    type = cpplogger::LoggerType::CPP_LOGGER_WARN;
  else
    type = cpplogger::LoggerType::CPP_LOGGER_ERROR;
}
#endif

/* DFTRACER_AGGREGATION_TYPE's value: "SELECTIVE", anything else FULL. */
inline void convert(const std::string &s, AggregationType &type) {
  type = s == "SELECTIVE" ? AGGREGATION_TYPE_SELECTIVE : AGGREGATION_TYPE_FULL;
}

inline std::string to_string(const AggregationType &type) {
  return type == AGGREGATION_TYPE_SELECTIVE ? "SELECTIVE" : "FULL";
}

/* DFTRACER_TIME_METRIC's value: "NS", "MS", "SEC", anything else (and "US") US. */
inline void convert(const std::string &s, TimeMetricType &type) {
  if (s == "NS")
    type = TIME_METRIC_NS;
  else if (s == "MS")
    type = TIME_METRIC_MS;
  else if (s == "SEC")
    type = TIME_METRIC_SEC;
  else
    type = TIME_METRIC_US;
}

/* "US", "NS", "MS", "SEC" (a value out of range: "US"). */
inline std::string to_string(const TimeMetricType &type) {
  static const char *const names[] = {"US", "NS", "MS", "SEC"};
  const unsigned i = static_cast<unsigned>(type);
  return i < 4 ? names[i] : "US";
}

/* How many units of the metric make one second (US, and out of range: 1e6). */
inline double time_metric_units_per_second(const TimeMetricType &type) {
  switch (type) {
    case TIME_METRIC_NS:
      return 1e9;
    case TIME_METRIC_MS:
      return 1e3;
    case TIME_METRIC_SEC:
      return 1.0;
    case TIME_METRIC_US:
    default:
      return 1e6;
  }
}

/* Names of the trace's metadata records (FORMAT.md). */
#define METADATA_NAME_PROCESS "PR"
#define METADATA_NAME_PROCESS_NAME "process_name"
#define METADATA_NAME_THREAD_NAME "thread_name"
#define METADATA_NAME_FILE_HASH "FH"
#define METADATA_NAME_HOSTNAME_HASH "HH"
#define METADATA_NAME_STRING_HASH "SH"
#define CUSTOM_METADATA "CM"

#endif /* DFTRACER_ENUMERATION_H */
