/*
 * dftracer/core/common/cpp_typedefs.h (dftracer-rs): what the DFTracer 2.2.0 header of the
 * same name provides to C++ code: the standard headers it brings in (<string>,
 * <unordered_map>, and <any> from C++17 on), the forward declaration of
 * dftracer::Metadata (the type of class DFTracer's last member) and the enumerations.
 */
#ifndef DFTRACER_CORE_CPP_TYPEDEF_H
#define DFTRACER_CORE_CPP_TYPEDEF_H

#ifndef __cplusplus
#error "dftracer/core/common/cpp_typedefs.h is a C++ header"
#endif

#include <string>
#include <unordered_map>
#if __cplusplus >= 201703L
#include <any>
#endif

namespace dftracer {
class Metadata;
}

#include <dftracer/core/common/enumeration.h>

#endif /* DFTRACER_CORE_CPP_TYPEDEF_H */
