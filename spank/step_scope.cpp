// numabind SPANK plugin: see step_scope.hpp.
#include "step_scope.hpp"

#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace numabind::spank {

namespace {

constexpr const char* kVariables[] = {"NUMABIND_MODE", "NUMABIND_CPUS", "NUMABIND_MEMS", "NUMABIND_MEM_POLICY",
                                      "NUMABIND_DEVICE", "NUMABIND_DEVICES", "NUMABIND_DEVICE_PCI"};

}  // namespace

std::optional<std::string> job_getenv(spank_t sp, const std::string& name) {
    std::vector<char> buf(512);
    for (int tries = 0; tries < 6; ++tries) {
        spank_err_t rc = spank_getenv(sp, name.c_str(), buf.data(), static_cast<int>(buf.size()));
        if (rc == ESPANK_SUCCESS) return std::string(buf.data());
        if (rc != ESPANK_NOSPACE) return std::nullopt;
        buf.resize(buf.size() * 4);
    }
    return std::nullopt;
}

StepScope step_scope(spank_t sp, const SiteConfig& site) {
    StepScope s;
    uint32_t stepid = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS || stepid == kExternStep) return s;
    s.job_level = stepid == kBatchStep || stepid == kInteractiveStep ||
                  job_getenv(sp, "SLURM_INTERACTIVE_STEP").value_or("") == "1";
    s.ours = !s.job_level || site.batch_step;
    return s;
}

void clear_variables(spank_t sp, bool mode_none) {
    for (const char* v : kVariables) spank_unsetenv(sp, v);
    if (mode_none) spank_setenv(sp, "NUMABIND_MODE", "none", 1);
}

std::string short_hostname() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) return "localhost";
    std::string h(host);
    return h.substr(0, h.find('.'));
}

std::string node_name() {
    const char* node = std::getenv("SLURMD_NODENAME");
    return node && *node ? node : short_hostname();
}

}  // namespace numabind::spank
