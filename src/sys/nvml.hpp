// GPU UUIDs (GPU-..., MIG-...) to PCI addresses through NVML, loaded with dlopen only when a
// variable names a UUID: no link-time dependency on the NVIDIA driver.
#pragma once

#include "core/visible.hpp"

namespace numabind {

// NVML loaded with dlopen; returns a resolver that always fails (with a warning
// through `warn`) when libnvidia-ml is absent.
UuidResolver nvml_uuid_resolver();

}  // namespace numabind
