// numabind SPANK plugin front: see engine_loader.hpp.
#include "engine_loader.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace numabind::spank {

namespace {

// This plugin's own path, as the dynamic loader mapped it (Slurm's plugstack line).
std::string own_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&load_stepd_engine), &info) == 0 || !info.dli_fname) return {};
    return info.dli_fname;
}

std::string beside(const std::string& file, const char* name) {
    const size_t slash = file.rfind('/');
    return (slash == std::string::npos ? std::string() : file.substr(0, slash + 1)) + name;
}

// The engine runs as root in slurmstepd: load only a file that whoever installed the
// plugin (or root) owns and nobody else may change.
bool trustworthy(const std::string& engine, const std::string& plugin, std::string& error) {
    struct stat e {}, p {};
    if (stat(engine.c_str(), &e) != 0) {
        error = "cannot find the step engine " + engine + ": " + std::strerror(errno) + " (install it beside " +
                plugin + ")";
        return false;
    }
    if (!S_ISREG(e.st_mode)) {
        error = "the step engine " + engine + " is not a regular file";
        return false;
    }
    if (e.st_mode & (S_IWGRP | S_IWOTH)) {
        error = "the step engine " + engine + " is writable by group or others; not loaded";
        return false;
    }
    const bool same_owner = stat(plugin.c_str(), &p) == 0 && p.st_uid == e.st_uid;
    if (e.st_uid != 0 && !same_owner) {
        error = "the step engine " + engine + " is owned by uid " + std::to_string(e.st_uid) +
                ", neither root nor the plugin's owner; not loaded";
        return false;
    }
    return true;
}

const numabind_stepd_api* load(std::string& error) {
    const std::string plugin = own_path();
    if (plugin.empty()) {
        error = "cannot find where the plugin itself was loaded from (dladdr)";
        return nullptr;
    }
    const std::string engine = beside(plugin, NUMABIND_STEPD_FILE);
    if (!trustworthy(engine, plugin, error)) return nullptr;
    void* handle = dlopen(engine.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        error = "cannot load the step engine " + engine + ": " + (why ? why : "unknown error");
        return nullptr;
    }
    const auto* api = static_cast<const numabind_stepd_api*>(dlsym(handle, NUMABIND_STEPD_SYMBOL));
    if (!api || !api->build || !api->prepare || !api->task_init || !api->exit) {
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
