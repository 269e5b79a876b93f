// Adapter shared by `numabind run` and the C API: topology, rank, visible devices, plan.
#include "api/task_planner.hpp"

#include <cstdlib>

#include "core/omp.hpp"
#include "core/text.hpp"
#include "core/visible.hpp"
#include "numabind/error.hpp"
#include "sys/nvml.hpp"

namespace numabind {

namespace {
std::string first_word(const std::string& s) { return s.substr(0, s.find(' ')); }
}  // namespace

std::optional<std::string> getenv_lookup(const std::string& name) {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
}

DeviceMatcher make_matcher(const std::string& spec) {
    return spec.empty() ? DeviceMatcher::builtin() : DeviceMatcher::parse(spec);
}

std::optional<TopologyCacheOptions> cache_options() {
    TopologyCacheOptions c;
    if (auto v = getenv_lookup("NUMABIND_TOPOLOGY_CACHE"); v && !v->empty()) {
        if (*v == "off") return std::nullopt;
        c.dir = *v;
    }
    return c;
}

std::unique_ptr<HwlocTopology> load_topology(const std::string& topology, bool xml_is_this_system,
                                             const Notify& note) {
    if (!topology.empty()) return std::make_unique<HwlocTopology>(LoadOptions{topology, xml_is_this_system});
    auto c = cache_options();
    if (!c) return std::make_unique<HwlocTopology>(LoadOptions{});
    c->write = false;
    CacheOutcome out;
    auto topo = load_this_machine(*c, &out);
    note(std::string("topology cache ") + to_string(out.result) + (out.path.empty() ? "" : " (" + out.path + ")") +
         (out.detail.empty() ? "" : ": " + out.detail));
    return topo;
}

int cpus_per_task(const TaskRequest& o, bool from_slurm) {
    std::string text = o.cpus_per_task;
    std::string what = "--cpus-per-task";
    if (text.empty() && from_slurm) {
        if (auto v = getenv_lookup("SLURM_CPUS_PER_TASK")) text = *v, what = "SLURM_CPUS_PER_TASK";
    }
    if (text.empty()) return 0;
    const int n = parse_nonnegative(text, what);
    if (n < 1) throw UsageError("invalid " + what + " '" + text + "' (must be at least 1)");
    return n;
}

DeviceRule device_rule_for(const LocalRank& lr) { return lr.torchrun ? DeviceRule::LocalRank : DeviceRule::Blocks; }

std::optional<std::string> device_block_notice(const NodePlan& plan, const LocalRank& lr) {
    // Once per step: task 0 says it for all. An explicit --local-rank is the user's own choice.
    if (lr.torchrun || lr.rank != 0 || lr.source == "--local-rank") return std::nullopt;
    bool blocks = false;
    std::string each;
    for (const TaskPlan& t : plan.tasks) {
        blocks = blocks || t.devices.size() > 1;
        each += (each.empty() ? "" : ", ") + std::string("task ") + std::to_string(t.local_rank) + ": " +
                (t.devices.empty() ? std::string("-") : join_ints(t.devices));
    }
    if (!blocks) return std::nullopt;
    return std::to_string(plan.tasks.size()) + " tasks (" + first_word(lr.source) +
           ") share the devices in blocks (" + each +
           "); each task is bound for the first of its block (NUMABIND_DEVICE), so a program that computes on "
           "cuda:LOCAL_RANK uses a device its task was not bound for: select numabind.cuda_index() "
           "(NUMABIND_DEVICE), or give each task its devices (srun --gpus-per-task=N or --gpu-bind)";
}

TaskPlan plan_this_task(const TaskRequest& o, NodePlan& plan_out, const PmixRankSource& pmix,
                        const Notify& note, const Notify& warn, std::vector<OmpVariable>* omp_out) {
    const Mode mode = parse_mode(o.mode);
    const MemPolicy mem = parse_mem_policy(o.mem);
    // Unset: what `srun --hint=nomultithread` asked of Slurm holds for the task too.
    const bool one_thread_per_core =
        o.smt.empty() ? getenv_lookup("SLURM_THREADS_PER_CORE").value_or("") == "1" : parse_smt(o.smt, "--smt");
    if (o.smt.empty() && one_thread_per_core) note("one thread per core: SLURM_THREADS_PER_CORE=1 (--hint=nomultithread)");
    auto topo_ptr = load_topology(o.topology, true, note);
    const HwlocTopology& topo = *topo_ptr;
    note("topology: " + topo.source());
    auto accs = find_accelerators(topo.model(), make_matcher(o.device_match));

    std::vector<std::string> rank_warnings;
    LocalRank lr = resolve_local_rank(o.local_rank, o.ntasks, o.rank_source, getenv_lookup, pmix, &rank_warnings);
    for (const std::string& w : rank_warnings) warn(w);
    note("local rank " + std::to_string(lr.rank) + " from " + lr.source + ", local tasks " +
         (lr.size ? std::to_string(lr.size) + " from " + lr.size_source : std::string("unknown")));
    if (lr.size == 0) {
        if (disjoint(mode)) {
            throw UsageError("the local task count is unknown and mode " + to_string(mode) +
                             " splits CPUs among tasks; pass --ntasks");
        }
        lr.size = lr.rank + 1;
    }

    if (accs.empty() && mode != Mode::None)  // plan_node's message, as a kind of its own
        throw NoAcceleratorError("no accelerator found on this node (use --device-match to name the devices, e.g. "
                                 "10de or class=0x0302)");

    PlanRequest req;
    req.mode = mode;
    req.mem = mem;
    req.ntasks = lr.size;
    req.device_rule = device_rule_for(lr);
    note("device rule: " + to_string(req.device_rule) + (lr.torchrun ? " (torchrun: worker r computes on device r)" : ""));
    if (!o.devices.empty()) {
        req.visible_devices = parse_device_list(o.devices, static_cast<int>(accs.size()));
        note("devices from --devices: " + o.devices);
    } else {
        VisibleDevices vis = visible_from_env(accs, getenv_lookup, nvml_uuid_resolver());
        for (const std::string& w : vis.warnings) warn(w);
        if (vis.restricted) {
            req.visible_devices = vis.indexes;
            note("devices from " + vis.source + ": " + join_ints(vis.indexes));
            if (vis.indexes.empty() && mode != Mode::None)
                throw NoAcceleratorError(vis.source + " makes no device visible; nothing to bind to");
        } else {
            note("devices: all " + std::to_string(accs.size()) + " accelerator(s)");
        }
    }
    HwlocTopology::Allowed allowed = topo.allowed();
    req.allowed_cpus = o.allowed_cpus.empty() ? std::move(allowed.cpus) : IdSet::parse(o.allowed_cpus);
    req.allowed_mems = std::move(allowed.mems);
    req.min_cpus = cpus_per_task(o, true);
    req.one_thread_per_core = one_thread_per_core;
    // smt=1: a minimum in threads becomes one in cores, except Slurm's own under
    // --hint=nomultithread (SLURM_THREADS_PER_CORE=1), which counted cores already.
    const bool slurm_counted_cores =
        o.cpus_per_task.empty() && getenv_lookup("SLURM_THREADS_PER_CORE").value_or("") == "1";
    if (one_thread_per_core && !slurm_counted_cores)
        req.min_cpus = min_cpus_one_thread(topo.model(), req.allowed_cpus, req.min_cpus);
    note("allowed CPUs " + req.allowed_cpus.to_string() +
         (req.min_cpus ? ", at least " + std::to_string(req.min_cpus) + " per task" : std::string()));
    plan_out = plan_node(topo.model(), accs, req);
    if (auto notice = device_block_notice(plan_out, lr)) warn(*notice);
    if (o.omp && omp_out) *omp_out = omp_environment(topo.model(), plan_out.tasks.at(lr.rank).cpus, getenv_lookup);
    return plan_out.tasks.at(lr.rank);
}

NodePlan plan_preview(const TaskRequest& o, const Notify& note, const std::string& ntasks_name) {
    PlanRequest req;
    req.mode = parse_mode(o.mode);
    req.mem = parse_mem_policy(o.mem);
    req.one_thread_per_core = !o.smt.empty() && parse_smt(o.smt, "--smt");  // a preview: unset is all
    req.ntasks = 0;  // unknown until given or found
    if (!o.ntasks.empty()) {
        req.ntasks = parse_task_count(o.ntasks, ntasks_name);
    } else if (auto lr = local_rank_from_env(getenv_lookup); lr && lr->size > 0) {
        req.ntasks = lr->size;
        note("local tasks " + std::to_string(lr->size) + " from " + lr->size_source);
    }
    if (req.ntasks < 1)
        throw UsageError(o.ntasks.empty() ? "the local task count is unknown; pass " + ntasks_name
                                          : "invalid " + ntasks_name + " '0' (must be at least 1)");
    auto topo_ptr = load_topology(o.topology, false, note);
    const HwlocTopology& topo = *topo_ptr;
    note("topology: " + topo.source());
    auto accs = find_accelerators(topo.model(), make_matcher(o.device_match));
    if (!o.devices.empty()) req.visible_devices = parse_device_list(o.devices, static_cast<int>(accs.size()));
    HwlocTopology::Allowed allowed = topo.allowed();
    req.allowed_cpus = o.allowed_cpus.empty() ? std::move(allowed.cpus) : IdSet::parse(o.allowed_cpus);
    req.allowed_mems = std::move(allowed.mems);
    return plan_node(topo.model(), accs, req);
}

}  // namespace numabind
