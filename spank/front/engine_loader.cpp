// numabind SPANK plugin front: see engine_loader.hpp.
#include "engine_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "policy/file_trust.hpp"

namespace numabind::spank {

static_assert(std::string_view(NUMABIND_STEPD_FILE) == kStepEngineFile, "one engine file name");

namespace {

// This plugin's own path, as the dynamic loader mapped it (Slurm's plugstack line).
std::string own_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&load_stepd_engine), &info) == 0 || !info.dli_fname) return {};
    return info.dli_fname;
}

const numabind_stepd_api* load(std::string& error) {
    const std::string mapped = own_path();
    if (mapped.empty()) {
        error = "cannot find where the plugin itself was loaded from (dladdr)";
        return nullptr;
    }
    // The rule `numabind check` reports too (policy/file_trust.cpp).
    std::string engine;
    const int fd = open_step_engine(mapped, NUMABIND_STEPD_FILE, geteuid(), engine, error);
    if (fd < 0) return nullptr;
    // Loaded through the checked descriptor: a rename or symlink swap of the path after the
    // check cannot change what is mapped.
    const std::string via = "/proc/self/fd/" + std::to_string(fd);
    void* handle = dlopen(via.c_str(), RTLD_NOW | RTLD_LOCAL);
    close(fd);  // the mapping stays
    if (!handle) {
        const char* why = dlerror();
        error = "cannot load the step engine " + engine + " (through " + via + "): " + (why ? why : "unknown error");
        return nullptr;
    }
    const auto* api = static_cast<const numabind_stepd_api*>(dlsym(handle, NUMABIND_STEPD_SYMBOL));
    if (!api || !api->build || !api->prepare || !api->plan_step || !api->task_init || !api->exit) {
        error = "the step engine " + engine + " has no " + NUMABIND_STEPD_SYMBOL + " (from another numabind release?)";
        dlclose(handle);
        return nullptr;
    }
    if (std::strcmp(api->build, NUMABIND_STEPD_BUILD) != 0) {
        error = "the step engine " + engine + " is from " + api->build + ", the plugin from " + NUMABIND_STEPD_BUILD +
                "; install both from one build";
        dlclose(handle);
        return nullptr;
    }
    return api;  // kept loaded for the life of the process (slurmstepd lives one step)
}

}  // namespace

const numabind_stepd_api* load_stepd_engine(std::string& error) {
    static const numabind_stepd_api* api = nullptr;
    static std::string load_error;
    static bool tried = false;
    if (!tried) {
        api = load(load_error);  // may throw std::bad_alloc (then tried again next time)
        tried = true;
    }
    error = load_error;
    return api;
}

}  // namespace numabind::spank
