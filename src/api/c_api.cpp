// The C API (include/numabind/numabind.h): thin glue over the task planner, the
// whole-process binder and the reports. No exception leaves this file.
#include "numabind/numabind.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <string>

#include "api/placement_report.hpp"
#include "api/process_report.hpp"
#include "api/task_planner.hpp"
#include "core/binding_env.hpp"
#include "core/omp.hpp"
#include "core/text.hpp"
#include "core/visible.hpp"
#include "numabind/error.hpp"
#include "numabind/report.hpp"
#include "sys/nvml.hpp"
#include "sys/process_binding.hpp"
#include "sys/process_inspect.hpp"

namespace nb = numabind;

struct numabind_options {
    nb::TaskRequest request;
    std::string fallback = "fail";
    bool migrate = false;
    bool ucx = false;  // UCX_NET_DEVICES from the task's nearest NICs
};

struct numabind_result {
    std::string json;
    int threads = -1;
    long pages_moved = 0;
};

namespace {

void put_error(char* buf, size_t size, const std::string& msg) {
    if (!buf || size == 0) return;
    size_t n = std::min(size - 1, msg.size());
    std::memcpy(buf, msg.data(), n);
    buf[n] = '\0';
}

char* dup_string(const std::string& s) {
    char* p = static_cast<char*>(std::malloc(s.size() + 1));
    if (p) std::memcpy(p, s.c_str(), s.size() + 1);
    return p;
}

// Runs f, mapping exceptions to status codes and the one-line message.
template <typename F>
int guarded(char* error, size_t error_size, F&& f) {
    try {
        return f();
    } catch (const nb::UsageError& e) {
        put_error(error, error_size, e.what());
        return NUMABIND_USAGE;
    } catch (const std::bad_alloc&) {
        put_error(error, error_size, "out of memory");
        return NUMABIND_NOMEM;
    } catch (const std::exception& e) {
        put_error(error, error_size, e.what());
        return NUMABIND_ERROR;
    } catch (...) {
        put_error(error, error_size, "unexpected internal error");
        return NUMABIND_ERROR;
    }
}

// null: a variable removed (NUMABIND_NICS when the task has no NIC).
nlohmann::ordered_json env_json(nb::Mode mode, const nb::TaskPlan& task, bool ucx = false) {
    nlohmann::ordered_json env = nlohmann::ordered_json::object();
    nb::export_binding_env(mode, task, [&](const char* k, const std::string& v) { env[k] = v; });
    nb::export_nic_env(task, ucx, nb::getenv_lookup("UCX_NET_DEVICES"), nb::getenv_lookup(nb::kUcxMarker),
                       [&](const char* k, const std::string& v) { env[k] = v; }, [&](const char* k) { env[k] = nullptr; });
    return env;
}

void setenv_all(const nlohmann::ordered_json& env) {
    for (auto it = env.begin(); it != env.end(); ++it) {
        if (it.value().is_null()) unsetenv(it.key().c_str());
        else setenv(it.key().c_str(), it.value().get<std::string>().c_str(), 1);
    }
}

numabind_result* make_result(const nlohmann::ordered_json& j, int threads, long moved) {
    auto* r = new numabind_result;
    r->json = j.dump();
    r->threads = threads;
    r->pages_moved = moved;
    return r;
}

nlohmann::ordered_json binding_json(const nb::ProcessBindResult& b) {
    nlohmann::ordered_json off = nlohmann::ordered_json::array();
    for (const auto& t : b.threads_not_as_planned) off.push_back({{"tid", t.tid}, {"why", t.why}});
    return {{"threads", b.threads},
            {"threads_mem_policy", b.threads_policy},
            {"threads_mem_policy_missing", b.threads_policy_missing},
            {"threads_not_as_planned", off},
            {"kernel_mem_policy", b.caller.mem_policy},
            {"migrated", b.migrated},
            {"pages_moved", b.pages_moved},
            {"pages_off_home_before", b.pages_off_home_before},
            {"pages_off_home_after", b.pages_off_home_after}};
}

std::vector<int> int_list(const std::string& text, const char* what) {
    std::vector<int> out;
    for (std::string_view item : nb::split(text, ','))
        if (!item.empty()) out.push_back(nb::parse_nonnegative(std::string(item), what));
    return out;
}

// An on/off option (omp, ucx, migrate): the library's one yes/no, 0 and 1 as documented.
bool yes_no_option(const std::string& key, const std::string& value) {
    const std::optional<bool> b = nb::parse_yes_no(value);
    if (!b) throw nb::UsageError("invalid " + key + " '" + value + "' (valid: 0, 1, " + nb::kYesNoChoices + ")");
    return *b;
}

}  // namespace

extern "C" {

const char* numabind_version(void) { return NUMABIND_VERSION; }  // project() in CMakeLists.txt
int numabind_api_version(void) { return NUMABIND_API_VERSION; }

numabind_options* numabind_options_new(void) { return new (std::nothrow) numabind_options; }
void numabind_options_free(numabind_options* o) { delete o; }

int numabind_options_set(numabind_options* o, const char* key, const char* value, char* error, size_t error_size) {
    return guarded(error, error_size, [&] {
        if (!o || !key || !value) throw nb::UsageError("numabind_options_set: NULL argument");
        const std::string k = key, v = value;
        nb::TaskRequest& r = o->request;
        if (k == "mode") r.mode = v;
        else if (k == "mem") r.mem = v;
        else if (k == "local_rank") r.local_rank = v;
        else if (k == "ntasks") r.ntasks = v;
        else if (k == "devices") r.devices = v;
        else if (k == "device_match") r.device_match = v;
        else if (k == "topology") r.topology = v;
        else if (k == "allowed_cpus") r.allowed_cpus = v;
        else if (k == "smt") {
            (void)nb::parse_smt(v, "smt");  // bad values now, as for the other checked keys
            r.smt = v;
        }
        else if (k == "threads") {
            (void)nb::parse_threads(v, "threads");
            r.omp_threads = v;
        }
        else if (k == "omp") r.omp = yes_no_option(k, v);
        else if (k == "rank_source") {
            if (v != "auto" && v != "env")
                throw nb::UsageError("invalid rank_source '" + v + "' (valid: auto, env; PMIx is for `numabind run --rank-source pmix`)");
            r.rank_source = v;
        } else if (k == "fallback") {
            if (v != "fail" && v != "warn") throw nb::UsageError("invalid fallback '" + v + "' (valid: fail, warn)");
            o->fallback = v;
        } else if (k == "ucx") {
            o->ucx = yes_no_option(k, v);
        } else if (k == "migrate") {
            o->migrate = yes_no_option(k, v);
        } else {
            throw nb::UsageError("unknown option '" + k +
                                 "' (valid: mode, mem, local_rank, ntasks, devices, device_match, topology, "
                                 "allowed_cpus, rank_source, fallback, migrate, ucx, smt, omp, threads)");
        }
        return NUMABIND_OK;
    });
}

// One bind or reapply at a time, over the whole call: planning reads (and briefly widens)
// the calling thread's CPUs, and two calls interleaved would leave threads in a mix of
// both plans or misread each other's binding as a cpuset's narrowing.
static std::mutex g_bind_mutex;

int numabind_bind(const numabind_options* o, numabind_result** result, char* error, size_t error_size) {
    if (result) *result = nullptr;
    return guarded(error, error_size, [&] {
        std::lock_guard<std::mutex> lock(g_bind_mutex);
        const numabind_options defaults;
        const numabind_options& opts = o ? *o : defaults;
        // Bad values are usage errors whatever the fallback, as in `numabind run`.
        const nb::Mode mode = nb::parse_mode(opts.request.mode);
        (void)nb::parse_mem_policy(opts.request.mem);
        nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
        nlohmann::ordered_json j;
        nb::NodePlan plan;
        // Read before anything is exported: torchrun's OMP_NUM_THREADS=1, not one of ours.
        const bool omp_torchrun = nb::omp_is_torchrun_default(nb::getenv_lookup);
        try {
            nb::LocalRank lr = nb::resolve_local_rank(opts.request.local_rank, opts.request.ntasks,
                                                      opts.request.rank_source, nb::getenv_lookup, nb::PmixRankSource{});
            std::vector<nb::OmpVariable> omp;
            nb::TaskPlan task = nb::plan_this_task(opts.request, plan, nb::PmixRankSource{}, [](const std::string&) {},
                                                   [&](const std::string& w) { warnings.push_back(w); }, &omp);
            for (const std::string& w : task.warnings) warnings.push_back(w);
            nb::ProcessBindResult b;
            if (mode != nb::Mode::None) {
                b = nb::bind_process(task, opts.migrate);
                for (const std::string& w : b.warnings) warnings.push_back(w);
                if (!b.ok) throw nb::Error(b.error);
            }
            nlohmann::ordered_json env = env_json(mode, task, opts.ucx);
            nlohmann::ordered_json omp_kept = nlohmann::ordered_json::array();
            for (const nb::OmpVariable& v : omp) {  // omp=1: the user's own values stay
                if (mode == nb::Mode::None) break;
                if (v.kept) omp_kept.push_back(v.name);
                else env[v.name] = v.value;
            }
            if (!opts.request.omp_threads.empty() && mode != nb::Mode::None) env["OMP_NUM_THREADS"] = opts.request.omp_threads;
            const int ncpus = static_cast<int>(task.cpus.size());
            const bool omp_kept_torchrun = omp_torchrun && opts.request.omp_threads.empty() && mode != nb::Mode::None && ncpus > 1;
            setenv_all(env);
            if (mode != nb::Mode::None) nb::publish_plan_marker(nb::to_string(mode), task);
            j = {{"bound", mode != nb::Mode::None},
                 {"error", nullptr},
                 {"mode", nb::to_string(mode)},
                 {"local_rank", task.local_rank},
                 {"local_rank_source", lr.source},
                 {"device_rule", nb::to_string(nb::device_rule_for(lr))},
                 {"ntasks", static_cast<int>(plan.tasks.size())},
                 {"cpus", task.cpus.ids()},
                 {"mems", task.mems},
                 {"mem_policy", nb::to_string(task.mem)},
                 {"device", task.device ? nlohmann::ordered_json(task.device->index) : nlohmann::ordered_json(nullptr)},
                 {"devices", task.devices},
                 {"device_pci", task.device ? task.device->pci : std::string()}};
            j.update(binding_json(b));
            nlohmann::ordered_json nics = nlohmann::ordered_json::array();
            for (const nb::Nic& n : task.nics) nics.push_back({{"name", n.name}, {"pci", n.pci}});
            j["nics"] = nics;
            j["warnings"] = warnings;
            j["env"] = env;
            if (opts.request.omp) j["omp_kept"] = omp_kept;
            j["omp_notice"] = omp_kept_torchrun ? nlohmann::ordered_json(nb::torchrun_omp_notice(ncpus, "--threads N"))
                                                : nlohmann::ordered_json(nullptr);
            if (result) *result = make_result(j, b.threads, b.pages_moved);
            return NUMABIND_OK;
        } catch (const nb::UsageError&) {
            throw;
        } catch (const std::exception& e) {
            if (opts.fallback != "warn") throw;
            setenv(nb::kEnvMode, "none", 1);
            const bool no_accelerator = dynamic_cast<const nb::NoAcceleratorError*>(&e) != nullptr;
            j = {{"bound", false}, {"error", e.what()}, {"error_kind", no_accelerator ? "no_accelerator" : "error"},
                 {"mode", "none"}, {"warnings", warnings}, {"env", {{nb::kEnvMode, "none"}}}};
            if (result) *result = make_result(j, -1, 0);
            return NUMABIND_OK;
        }
    });
}

int numabind_reapply(numabind_result** result, char* error, size_t error_size) {
    if (result) *result = nullptr;
    return guarded(error, error_size, [&] {
        std::lock_guard<std::mutex> lock(g_bind_mutex);
        const char* mode = std::getenv(nb::kEnvMode);
        const char* cpus = std::getenv(nb::kEnvCpus);
        nlohmann::ordered_json j;
        if (!mode || !*mode || std::string(mode) == "none" || !cpus || !*cpus) {
            j = {{"checked", false}, {"reason", "no numabind binding in the environment (NUMABIND_MODE unset or none)"},
                 {"lost", nlohmann::ordered_json::array()}, {"reapplied", false}};
            if (result) *result = make_result(j, -1, 0);
            return NUMABIND_OK;
        }
        nb::TaskPlan task;
        task.cpus = nb::IdSet::parse(cpus);
        const char* mems = std::getenv(nb::kEnvMems);
        task.mems = int_list(mems ? mems : "", nb::kEnvMems);
        const char* mem = std::getenv(nb::kEnvMemPolicy);
        task.mem = nb::parse_mem_policy(mem && *mem ? mem : "none");
        const char* devices = std::getenv(nb::kEnvDevices);
        task.devices = int_list(devices ? devices : "", nb::kEnvDevices);

        nb::EnvPlan plan;
        plan.present = true;
        plan.cpus = task.cpus;
        plan.mems = task.mems;
        plan.mem_policy = nb::to_string(task.mem);
        nb::ProcessSnapshot self = nb::inspect_process(static_cast<int>(getpid()), true);
        std::vector<std::string> lost =
            nb::process_mismatches(self.threads, plan, {}, {}, {});  // threads' CPUs and memory policies only
        j = {{"checked", true}, {"lost", lost}, {"reapplied", false}};
        nb::ProcessBindResult b;
        if (!lost.empty()) {
            b = nb::bind_process(task, false);
            if (!b.ok) throw nb::Error(b.error);
            j["reapplied"] = true;
            j.update(binding_json(b));
            j["warnings"] = b.warnings;
        }
        if (result) *result = make_result(j, lost.empty() ? -1 : b.threads, 0);
        return NUMABIND_OK;
    });
}

const char* numabind_result_json(const numabind_result* r) { return r ? r->json.c_str() : "null"; }
int numabind_result_threads(const numabind_result* r) { return r ? r->threads : -1; }
long numabind_result_pages_moved(const numabind_result* r) { return r ? r->pages_moved : 0; }
void numabind_result_free(numabind_result* r) { delete r; }

int numabind_plan_json(const numabind_options* o, char** json, char* error, size_t error_size) {
    if (json) *json = nullptr;
    return guarded(error, error_size, [&] {
        if (!json) throw nb::UsageError("numabind_plan_json: NULL json pointer");
        const numabind_options defaults;
        const nb::NodePlan plan = nb::plan_preview(o ? o->request : defaults.request, [](const std::string&) {}, "ntasks");
        *json = dup_string(nb::plan_to_json(plan).dump());
        if (!*json) throw std::bad_alloc();
        return NUMABIND_OK;
    });
}

int numabind_cuda_index(const char* topology, const char* device_match, int* index, char* error, size_t error_size) {
    if (index) *index = -1;
    return guarded(error, error_size, [&] {
        if (!index) throw nb::UsageError("numabind_cuda_index: NULL index pointer");
        const char* device = std::getenv(nb::kEnvDevice);
        if (!device || !*device)
            throw nb::Error("this process is not bound to a device (NUMABIND_DEVICE is unset or empty)");
        auto topo = nb::load_topology(topology ? topology : "", true, [](const std::string&) {});
        const auto accs = nb::find_accelerators(topo->model(), nb::make_matcher(device_match ? device_match : ""));
        const int physical = nb::parse_device_list(device, INT_MAX, nb::kEnvDevice).front();  // syntax only
        if (physical >= static_cast<int>(accs.size()))
            throw nb::Error(std::string("NUMABIND_DEVICE=") + device + " is not among the " + std::to_string(accs.size()) +
                            " accelerator(s) " + (topology && *topology ? std::string("of ") + topology : "this machine shows") +
                            " (bound from another topology XML? pass the same topology to cuda_index)");
        // CUDA numbers the NVIDIA devices (all accelerators where none is NVIDIA), narrowed
        // and reordered by CUDA_VISIBLE_DEVICES; the other runtimes' variables do not count.
        auto cuda_only = [](const std::string& name) {
            return name == nb::kCudaVisibleDevices ? nb::getenv_lookup(name) : std::nullopt;
        };
        const nb::VisibleDevices vis = nb::visible_from_env(accs, cuda_only, nb::nvml_uuid_resolver());
        if (!vis.warnings.empty()) throw nb::Error(vis.warnings.front());
        std::vector<int> order = vis.indexes;
        if (!vis.restricted) {
            for (const auto& a : accs)
                if (a.vendor == nb::Vendor::Nvidia) order.push_back(a.index);
            if (order.empty())
                for (const auto& a : accs) order.push_back(a.index);
        }
        auto it = std::find(order.begin(), order.end(), physical);
        if (it == order.end()) {
            const char* cvd = std::getenv(nb::kCudaVisibleDevices);
            throw nb::Error("device " + std::to_string(physical) + " is not visible to CUDA (CUDA_VISIBLE_DEVICES='" +
                            (cvd ? cvd : "") + "')");
        }
        *index = static_cast<int>(it - order.begin());
        return NUMABIND_OK;
    });
}

int numabind_placement_json(const char* topology, const char* device_match, char** json, char* error, size_t error_size) {
    if (json) *json = nullptr;
    return guarded(error, error_size, [&] {
        if (!json) throw nb::UsageError("numabind_placement_json: NULL json pointer");
        nb::PlacementReport r = nb::current_placement_report(topology ? topology : "", device_match ? device_match : "",
                                                             [](const std::string&) {});
        *json = dup_string(nb::placement_to_json(r).dump(2));
        if (!*json) throw std::bad_alloc();
        return NUMABIND_OK;
    });
}

int numabind_inspect_json(int pid, const char* topology, const char* device_match, char** json, char* error,
                          size_t error_size) {
    if (json) *json = nullptr;
    return guarded(error, error_size, [&] {
        if (!json) throw nb::UsageError("numabind_inspect_json: NULL json pointer");
        nb::ProcessReport r = nb::inspect_report(pid, topology ? topology : "", device_match ? device_match : "",
                                                 [](const std::string&) {});
        *json = dup_string(nb::process_report_to_json(r).dump(2));
        if (!*json) throw std::bad_alloc();
        return NUMABIND_OK;
    });
}

void numabind_free(void* p) { std::free(p); }

}  // extern "C"
