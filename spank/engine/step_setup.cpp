// The step's setup in slurmstepd, once before the tasks fork: the node model, its
// accelerators and their device files, the step's CPUs and the node share.
#include <chrono>

#include "context.hpp"
#include "slurm_facts.hpp"
#include "hwloc/topology_cache.hpp"
#include "numabind/error.hpp"
#include "numabind/topology.hpp"
#include "policy/log_text.hpp"
#include "shared/step_scope.hpp"
#include "sys/device_files.hpp"

namespace numabind::spank {

namespace {

using Clock = std::chrono::steady_clock;

// device_files= entry `i`, checked against accelerator `i`; "" when the file does not exist
// (that GPU is then found without it, as a step note says).
std::string listed_device_file(State& st, size_t i, const Accelerator& acc, int& unverified,
                               std::vector<std::string>& missing) {
    std::string f = expand_path(st.site.device_files[i], st.node_name, short_hostname());
    const DeviceFileCheck check = check_device_file(f, acc.pci);
    const std::string entry = "device_files= entry " + std::to_string(i + 1) + " (" + f + ", for accelerator " +
                              std::to_string(i) + " at " + acc.pci + ")";
    switch (listed_file_use(check.verdict)) {
        case ListedFileUse::FailStep:
            throw Error(entry + " is not that accelerator's device file: " + check.detail +
                        "; list the files in accelerator (PCI) order (numabind topo lists them)");
        case ListedFileUse::FindWithout:
            missing.push_back(entry);
            f.clear();
            break;
        case ListedFileUse::UseTrusted: ++unverified; break;
        case ListedFileUse::Use: break;
    }
    return f;
}

// Each accelerator's device file (own_gpus probes them in the tasks): the site's list, else
// the driver's. As root, before the fork: /proc/driver/nvidia and sysfs once per step.
std::vector<std::string> device_files_for(State& st, const std::vector<Accelerator>& accs) {
    std::vector<std::string> files;
    if (st.site.device_files.empty() || accs.empty()) {  // a node without accelerators ignores device_files=
        for (const Accelerator& a : accs) files.push_back(device_file_for_pci(a.pci));
        return files;
    }
    if (!listed_files_fit(st.site.device_files.size(), accs.size()))
        throw Error("plugstack device_files= names " + std::to_string(st.site.device_files.size()) +
                    " device file(s) but the node has " + std::to_string(accs.size()) + " accelerator(s)");
    int unverified = 0;
    std::vector<std::string> missing;  // in entry order: one line, the same in every step
    for (size_t i = 0; i < accs.size(); ++i) files.push_back(listed_device_file(st, i, accs[i], unverified, missing));
    if (!missing.empty()) {
        std::string line;
        for (const std::string& m : missing) line += (line.empty() ? "" : "; ") + m;
        st.notes.push_back(line + (missing.size() == 1 ? " does not exist; that GPU is" : ": none exists; those GPUs are") +
                           " found without it");
    }
    // A list that cannot be checked binds by its order alone: said in every step, not only with verbose.
    if (unverified)
        st.notes.push_back(std::to_string(unverified) + " device_files= entr" + (unverified == 1 ? "y" : "ies") +
                           " cannot be checked against the accelerators (no driver information or sysfs "
                           "entry for their device numbers); trusted as listed");
    return files;
}

// The node model from the per-boot model cache (/run/numabind, written here as root by the
// first step that misses it), else from hwloc, which is then not kept: a step that hits the
// cache never initialises hwloc, and none keeps hwloc's plugins mapped while slurmstepd
// forks the tasks (each fork copies every mapping). A throw leaves `st` as it was, but for
// its notes.
void load_step_model(State& st) {
    const std::string xml =
        st.site.topology.empty() ? std::string() : expand_path(st.site.topology, st.node_name, short_hostname());
    ModelOutcome cache;
    LoadedModel loaded = load_node_model(xml, {}, &cache);
    // A model or topology cache problem (each said once per boot).
    for (const std::string& line : cache_report_lines(cache)) log_info(line);
    std::vector<Accelerator> accs = find_accelerators(loaded.model, st.site.matcher);
    std::vector<std::string> files = device_files_for(st, accs);
    st.accelerators = std::move(accs);
    st.device_files = std::move(files);
    st.model = std::move(loaded.model);
    st.model_source = std::move(loaded.source);
    use_slurm_device_files(st);
    st.active = true;  // only now: task_init never meets an active step without a topology
}

}  // namespace

int stepd_prepare(spank_t sp) {
    State& st = state();
    st.active = false;
    st.step_gpus.reset();
    st.prepare_error.clear();
    st.notes.clear();
    st.min_cpus = 0;
    st.model = Topology{};
    st.accelerators.clear();
    st.device_files.clear();
    st.devices_constrained.reset();
    st.allocated = IdSet{};
    st.share.destroy();
    st.step_plan = StepPlan{};

    uint32_t ntasks = 0;
    if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS) ntasks = 1;
    st.local_tasks = static_cast<int>(ntasks);
    uint32_t cpus_per_task = 0;
    if (spank_get_item(sp, S_STEP_CPUS_PER_TASK, &cpus_per_task) == ESPANK_SUCCESS && cpus_per_task < (1u << 20))
        st.min_cpus = static_cast<int>(cpus_per_task);
    st.node_name = node_name();
    st.step_gpus = job_getenv(sp, job_level(st.decision.kind) ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
    const auto t0 = Clock::now();
    try {
        load_step_model(st);
        st.allocated = allocated_cpus(sp, st);
    } catch (const std::exception& e) {
        st.model = Topology{};
        st.accelerators.clear();
        st.device_files.clear();
        st.prepare_error = e.what();
    }
    st.prepare_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!st.share.create(static_cast<int>(ntasks), static_cast<int>(st.accelerators.size())) && st.active)
        st.prepare_error = "cannot map the node share for " + std::to_string(ntasks) + " local task(s)";
    st.said.create();  // without it every task says its warnings itself
    if (!st.prepare_error.empty()) st.active = false;
    return 0;
}

}  // namespace numabind::spank
