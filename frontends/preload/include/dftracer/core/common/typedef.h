/*
 * dftracer/core/common/typedef.h (dftracer-rs): the scalar types of DFTracer's public
 * interface, as the DFTracer 2.2.0 header of the same name declares them. C and C++.
 */
#ifndef DFTRACER_TYPEDEF_H
#define DFTRACER_TYPEDEF_H

/* A timestamp or duration in the configured unit (DFTRACER_TIME_METRIC). */
typedef unsigned long long int TimeResolution;
/* A thread id (as gettid returns it, widened). */
typedef unsigned long int ThreadID;
/* A process id. */
typedef int ProcessID;
/* Event names and categories. */
typedef char *EventNameType;
typedef const char *ConstEventNameType;
/* A hash rendered as text (hex). */
typedef char *HashType;

#endif /* DFTRACER_TYPEDEF_H */
