// numabind SPANK plugin: the entry points Slurm calls. Each one dispatches on the
// context and never lets a C++ exception reach Slurm. This is the front (front.hpp); the
// binding itself is done by the step engine it loads in slurmstepd (stepd_api.h).
#include <exception>
#include <string>
#include <vector>

#include "front.hpp"
#include "numabind/error.hpp"
#include "shared/messages.hpp"

// SPANK_PLUGIN(numabind, 1), spelled out: in C++ a namespace-scope const has internal
// linkage unless declared extern, and the loader must find these symbols.
#define NB_EXPORT __attribute__((visibility("default")))
extern "C" {
NB_EXPORT extern const char plugin_name[];
NB_EXPORT extern const char plugin_type[];
NB_EXPORT extern const unsigned int plugin_version;
NB_EXPORT extern const unsigned int spank_plugin_version;
const char plugin_name[] = "numabind";
const char plugin_type[] = "spank";
const unsigned int plugin_version = SLURM_VERSION_NUMBER;
const unsigned int spank_plugin_version = 1;
}

namespace numabind::spank {

FrontState& front_state() {
    static FrontState s;
    return s;
}

namespace {

template <typename F>
int guard(const char* hook, F&& body) noexcept {
    try {
        return body();
    } catch (const std::exception& e) {
        try {
            log_error(std::string(hook) + ": " + e.what());  // escaped there
        } catch (...) {
        }
    } catch (...) {
        slurm_error("numabind: %s: unknown failure", hook);
    }
    return -1;
}

int parse_config(int ac, char** av) {
    std::vector<std::string> args(av, av + ac);
    try {
        front_state().site = parse_site_config(args);
    } catch (const UsageError& e) {
        log_error(e.what());
        return -1;
    }
    return 0;
}

}  // namespace

}  // namespace numabind::spank

namespace nbs = numabind::spank;

extern "C" {

NB_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
    return nbs::guard("init", [&] {
        if (nbs::parse_config(ac, av) != 0) return -1;
        switch (spank_context()) {
            case S_CTX_LOCAL:
            case S_CTX_REMOTE:
            case S_CTX_ALLOCATOR:
                return nbs::local_init(sp);
            default:
                return 0;
        }
    });
}

NB_EXPORT int slurm_spank_init_post_opt(spank_t sp, int /*ac*/, char** /*av*/) {
    return nbs::guard("init_post_opt", [&] {
        switch (spank_context()) {
            case S_CTX_LOCAL:
            case S_CTX_ALLOCATOR:
                return nbs::local_init_post_opt(sp);
            case S_CTX_REMOTE:
                return nbs::front_prepare(sp);
            default:
                return 0;
        }
    });
}

NB_EXPORT int slurm_spank_user_init(spank_t sp, int /*ac*/, char** /*av*/) {
    return nbs::guard("user_init", [&] { return spank_remote(sp) ? nbs::front_user_init(sp) : 0; });
}

NB_EXPORT int slurm_spank_task_init(spank_t sp, int /*ac*/, char** /*av*/) {
    return nbs::guard("task_init", [&] { return spank_remote(sp) ? nbs::front_task_init(sp) : 0; });
}

NB_EXPORT int slurm_spank_exit(spank_t sp, int /*ac*/, char** /*av*/) {
    return nbs::guard("exit", [&] {
        if (spank_remote(sp)) nbs::front_exit();
        return 0;
    });
}

}  // extern "C"
