// numabind step engine: Slurm's allocation and device files for the step (slurm_facts.hpp).
#include "slurm_facts.hpp"

#include <algorithm>
#include <cstdlib>

#include "numabind/error.hpp"
#include "policy/slurm_conf.hpp"
#include "shared/step_scope.hpp"
#include "sys/config_file.hpp"

namespace numabind::spank {

namespace {

std::optional<std::string> config_text(State& st, const std::string& path) {
    std::string why;
    std::optional<std::string> text = read_config_file(path, why);
    if (!why.empty()) st.notes.push_back("cannot read Slurm's " + why);
    return text;
}

}  // namespace

IdSet allocated_cpus(spank_t sp, State& st) {
    char* cores = nullptr;
    const spank_item_t item = job_level(st.decision.kind) ? S_JOB_ALLOC_CORES : S_STEP_ALLOC_CORES;
    if (spank_get_item(sp, item, &cores) != ESPANK_SUCCESS || !cores || !*cores) {
        st.notes.push_back("Slurm gives no CPU allocation for this step; only the cpuset bounds its tasks");
        return {};
    }
    try {
        return cpus_of_slurm_cores(st.model, cores);
    } catch (const std::exception& e) {
        st.notes.push_back(std::string(e.what()) + "; only the cpuset bounds this step's tasks");
        return {};
    }
}

void use_slurm_device_files(State& st) {
    const bool some_unknown =
        std::any_of(st.device_files.begin(), st.device_files.end(), [](const std::string& f) { return f.empty(); });
    if (!some_unknown) return;
    const char* conf = std::getenv("SLURM_CONF");
    const std::string dir = slurm_conf_dir(conf ? std::optional<std::string>(conf) : std::nullopt);
    const auto slurm = config_text(st, conf && *conf ? std::string(conf) : dir + "/slurm.conf");
    st.devices_constrained = devices_constrained(slurm, config_text(st, dir + "/cgroup.conf"));
    const auto gres_text = config_text(st, dir + "/gres.conf");
    if (!gres_text) return;
    GresGpus gres;
    try {
        gres = parse_gres_conf(*gres_text, st.node_name);
    } catch (const std::exception& e) {
        st.notes.push_back(dir + "/gres.conf: " + e.what() + "; Slurm's device files are not used");
        return;
    }
    if (!slurm_files_usable(gres.files.size(), st.accelerators.size())) return;
    for (size_t i = 0; i < st.device_files.size(); ++i)
        if (st.device_files[i].empty()) st.device_files[i] = gres.files[i];
}

}  // namespace numabind::spank
