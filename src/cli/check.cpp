// `numabind check` (check.hpp): gathers the facts and turns each comparison into a row.
// The parsers and rules are in check_facts.cpp; the plugstack arguments are parsed by the
// plugin's own parser (spank/policy/config.cpp).
#include "check.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "api/task_planner.hpp"
#include "bounded_io.hpp"
#include "check_facts.hpp"
#include "core/text.hpp"
#include "hwloc/topology_cache.hpp"
#include "numabind/accelerators.hpp"
#include "numabind/error.hpp"
#include "numabind/hwloc_topology.hpp"
#include "policy/config.hpp"      // spank/: parse_site_config, expand_path, node_name
#include "policy/file_trust.hpp"  // spank/: the engine loader's trust rule
#include "sys/device_files.hpp"
#include "xml_probe.hpp"

namespace fs = std::filesystem;


namespace numabind::check {

namespace {

// ---- small I/O helpers ----
std::string root() {
    const char* r = std::getenv("NUMABIND_CHECK_ROOT");
    return r ? r : "";
}

// A configuration file: a regular file of at most kMaxConfigBytes (a FIFO or /dev/zero in its
// place must not hang or exhaust a check run as root); `error` says why not.
std::optional<std::string> read_file(const std::string& path, std::string* error = nullptr) {
    std::string why;
    auto text = cli::read_regular_file(path, cli::kMaxConfigBytes, why);
    if (!text && error) *error = path + " " + why;
    return text;
}

// The first line of a sysfs/procfs attribute (bounded like read_file).
std::string first_line(const std::string& path) {
    std::string why;
    const auto text = cli::read_regular_file(path, 1 << 16, why);
    return text ? text->substr(0, text->find('\n')) : "";
}

FileFacts facts_of(const std::string& path) {
    FileFacts f;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return f;
    f.exists = true;
    f.regular = S_ISREG(st.st_mode);
    f.mode = st.st_mode;
    f.uid = st.st_uid;
    return f;
}

// How long a vendor tool may run: a GPU in a bad state can make these tools hang.
constexpr int kToolSeconds = 20;

std::string kernel_pci(const std::string& pci) {
    std::string a;
    for (char c : pci) a += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::count(a.begin(), a.end(), ':') == 1) a = "0000:" + a;
    return a;
}

std::string nodes_text(const std::vector<int>& nodes) { return numabind::join_ints(nodes, ",", "-"); }

std::string gpu_label(const Accelerator& a) {
    return "GPU " + std::to_string(a.index) + " (" + a.pci + (a.sub_count > 1 ? " #" + std::to_string(a.sub_index) : "") + ")";
}

// ---- what is checked ----
struct Context {
    std::string root;
    std::unique_ptr<HwlocTopology> node;  // numabind's view of this node
    std::vector<Accelerator> accs;
    DeviceMatcher matcher = DeviceMatcher::builtin();
    std::optional<spank::SiteConfig> site;  // the plugstack line's arguments, when they parse
    std::optional<bool> gres_in_pci_order;
    // What the plugin reads too: its plugstack topology= (when it names one that loads, the
    // plugin binds by that file's accelerators), Slurm's device constraint, gres.conf's files.
    std::optional<std::vector<Accelerator>> plugin_accs;
    std::optional<bool> devices_constrained;
    size_t gres_files = 0;
    std::vector<Row> rows;
    void add(Row r) { rows.push_back(std::move(r)); }
};

// PCI functions sysfs lists that the matcher counts as accelerators.
std::optional<std::set<std::string>> sysfs_accelerators(const Context& c) {
    const std::string dir = c.root + "/sys/bus/pci/devices";
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    if (ec) return std::nullopt;
    std::set<std::string> out;
    for (const fs::directory_entry& e : it) {
        const std::string p = e.path().string();
        PciDevice d;
        d.address = e.path().filename().string();
        try {
            d.vendor = static_cast<uint16_t>(std::stoul(first_line(p + "/vendor"), nullptr, 16));
            d.device = static_cast<uint16_t>(std::stoul(first_line(p + "/device"), nullptr, 16));
            d.class_id = static_cast<uint16_t>(std::stoul(first_line(p + "/class"), nullptr, 16) >> 8);
        } catch (const std::exception&) {
            continue;
        }
        if (c.matcher.matches(d)) out.insert(d.address);
    }
    return out;
}

void check_accelerator_list(Context& c) {
    std::set<std::string> ours;
    std::string listed;
    for (const Accelerator& a : c.accs) {
        ours.insert(kernel_pci(a.pci));
        listed += (listed.empty() ? "" : ", ") + a.pci + " (NUMA " + nodes_text(a.home_nodes) + ")";
    }
    Row r{"accelerators", "numabind's list vs sysfs", Status::Ok, "", ""};
    const auto sysfs = sysfs_accelerators(c);
    if (!sysfs) {
        r.status = Status::Warn;
        r.detail = std::to_string(c.accs.size()) + " found by numabind; cannot read " + c.root + "/sys/bus/pci/devices";
        r.fix = "run on the node itself, with /sys mounted";
    } else if (*sysfs == ours) {
        r.detail = c.accs.empty() ? "no accelerator (sysfs agrees)"
                                  : std::to_string(ours.size()) + " PCI function(s), same as sysfs: " + listed;
    } else {
        std::string missing, extra;
        for (const std::string& s : *sysfs)
            if (!ours.count(s)) missing += " " + s;
        for (const std::string& s : ours)
            if (!sysfs->count(s)) extra += " " + s;
        r.status = Status::Fail;
        r.detail = (missing.empty() ? "" : "in sysfs, not seen by numabind:" + missing + ";") +
                   (extra.empty() ? "" : " seen by numabind, not in sysfs:" + extra);
        r.fix = "the topology numabind reads is not this node's: re-record it with `lstopo --of xml --whole-io` "
                "(or name the devices with devices=/--device-match)";
    }
    c.add(r);
}

void check_accelerator_homes(Context& c) {
    const Topology& m = c.node->model();
    std::set<std::string> done;
    for (const Accelerator& a : c.accs) {
        const std::string addr = kernel_pci(a.pci);
        if (!done.insert(addr).second) continue;  // logical GPUs of one function share its home
        const std::string dir = c.root + "/sys/bus/pci/devices/" + addr;
        Row r{"accelerators", gpu_label(a) + " home", Status::Ok, "", ""};
        const std::string numa = first_line(dir + "/numa_node");
        const std::string cpulist = first_line(dir + "/local_cpulist");
        const std::string ours = "numabind: NUMA " + nodes_text(a.home_nodes) + ", CPUs " + a.locality.to_string();
        if (numa.empty()) {
            r.status = Status::Warn;
            r.detail = ours + "; sysfs has no numa_node for it";
            r.fix = "run on the node itself, with /sys mounted";
        } else if (numa == "-1") {
            r.status = Status::Warn;
            r.detail = "firmware reports no NUMA node (numa_node = -1); " + ours +
                       (a.home_warning.empty() ? "" : " (" + a.home_warning + ")");
            r.fix = "fix the BIOS/ACPI proximity (_PXM) setting, or set HWLOC_PCI_LOCALITY for slurmd, or record "
                    "topology= with the right locality";
        } else {
            IdSet sys_cpus;
            try {
                sys_cpus = IdSet::parse(cpulist);
            } catch (const std::exception&) {
            }
            const int node = std::atoi(numa.c_str());
            const NumaNode* n = m.numa_by_os(node);
            // A GPU on a CPU-less memory node: its home is the CPU node(s) of the same CPUs.
            const bool same_node = a.home_nodes == std::vector<int>{node} ||
                                   (n && !n->has_cpus() && a.locality == sys_cpus);
            r.detail = ours + "; sysfs: NUMA " + numa + ", CPUs " + cpulist;
            if (!same_node) {
                r.status = Status::Fail;
                r.fix = "numabind's topology disagrees with the kernel: re-record topology= on this node "
                        "(lstopo --of xml --whole-io) or check HWLOC_PCI_LOCALITY";
            } else if (!sys_cpus.empty() && a.locality != sys_cpus && !a.locality.is_subset_of(sys_cpus)) {
                r.status = Status::Warn;
                r.fix = "local CPUs differ from sysfs local_cpulist: check the topology file";
            }
        }
        c.add(r);
    }
}

// nvidia-smi and rocm-smi number their GPUs in PCI order, as numabind does per vendor.
void check_vendor_tool(Context& c, Vendor vendor, const std::string& tool, const std::string& args,
                       std::map<int, int> (*parse)(const std::string&)) {
    std::vector<const Accelerator*> mine;
    for (const Accelerator& a : c.accs)
        if (a.vendor == vendor && a.sub_index == 0) mine.push_back(&a);
    if (mine.empty()) return;
    std::vector<std::string> skipped;
    const std::string path = cli::find_program(tool, skipped);
    Row r{"accelerators", tool + " " + args, Status::Ok, "", ""};
    if (path.empty()) {
        if (skipped.empty()) return;  // not present: nothing to compare with
        r.status = Status::Warn;
        r.detail = "not run: " + skipped.front();
        r.fix = "install " + tool + " root-owned in a root-owned directory on an absolute PATH entry";
        c.add(r);
        return;
    }
    std::vector<std::string> argv{path};
    std::istringstream words(args);
    for (std::string w; words >> w;) argv.push_back(w);
    const cli::ToolRun run = cli::run_bounded(argv, kToolSeconds);
    if (run.timed_out) {
        r.status = Status::Warn;
        r.detail = path + " " + args + " did not finish within " + std::to_string(kToolSeconds) +
                   " s; killed with its process group";
        r.fix = "check the driver and the GPUs' state (" + tool + " hangs)";
        c.add(r);
        return;
    }
    const std::map<int, int> numa = run.started && run.status == 0 ? parse(run.out) : std::map<int, int>{};
    if (numa.empty()) {
        r.status = Status::Warn;
        r.detail = "ran " + path + " " + args + " but found no GPU NUMA affinity in its output";
        r.fix = "check the driver (" + tool + " must list the GPUs)";
        c.add(r);
        return;
    }
    std::string bad;
    for (size_t i = 0; i < mine.size(); ++i) {
        auto it = numa.find(static_cast<int>(i));
        if (it == numa.end()) {
            bad += " GPU" + std::to_string(i) + " not listed;";
            continue;
        }
        const std::vector<int>& home = mine[i]->home_nodes;
        if (it->second >= 0 && std::find(home.begin(), home.end(), it->second) == home.end())
            bad += " GPU" + std::to_string(i) + " (" + mine[i]->pci + "): " + tool + " NUMA " +
                   std::to_string(it->second) + ", numabind " + nodes_text(home) + ";";
    }
    if (numa.size() != mine.size())
        bad += " " + tool + " lists " + std::to_string(numa.size()) + " GPU(s), numabind " + std::to_string(mine.size()) + ";";
    if (bad.empty()) {
        r.detail = "NUMA affinity of all " + std::to_string(mine.size()) + " GPU(s) agrees with numabind";
    } else {
        r.status = Status::Fail;
        r.detail = bad.substr(1, bad.size() - 2);
        r.fix = "numabind's topology is not this node's: re-record topology= here, or check HWLOC_PCI_LOCALITY";
    }
    c.add(r);
}

// NVML's CPU affinity of one GPU (nvmlDeviceGetCpuAffinity), through dlopen so that numabind
// needs no NVIDIA library; nullopt without libnvidia-ml or when NVML does not know the GPU.
class Nvml {
public:
    Nvml() {
        // NUMABIND_CHECK_NVML: another library (tests: a stand-in, or none on a machine with NVIDIA's).
        const char* name = std::getenv("NUMABIND_CHECK_NVML");
        lib_ = dlopen(name && *name ? name : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib_) return;
        auto init = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
        by_pci_ = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
        affinity_ = reinterpret_cast<int (*)(void*, unsigned, unsigned long*)>(dlsym(lib_, "nvmlDeviceGetCpuAffinity"));
        shutdown_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlShutdown"));
        ok_ = init && by_pci_ && affinity_ && init() == 0;
    }
    ~Nvml() {
        if (ok_ && shutdown_) shutdown_();
        if (lib_) dlclose(lib_);
    }
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;
    bool present() const { return ok_; }
    std::optional<IdSet> cpu_affinity(const std::string& pci) const {
        void* dev = nullptr;
        if (!ok_ || by_pci_(pci.c_str(), &dev) != 0) return std::nullopt;
        constexpr unsigned kWords = 64;  // 4096 CPUs
        unsigned long set[kWords] = {};
        if (affinity_(dev, kWords, set) != 0) return std::nullopt;
        IdSet cpus;
        for (unsigned w = 0; w < kWords; ++w)
            for (unsigned b = 0; b < 8 * sizeof(unsigned long); ++b)
                if (set[w] >> b & 1UL) cpus.insert(static_cast<int>(w * 8 * sizeof(unsigned long) + b));
        return cpus;
    }

private:
    void* lib_ = nullptr;
    bool ok_ = false;
    int (*by_pci_)(const char*, void**) = nullptr;
    int (*affinity_)(void*, unsigned, unsigned long*) = nullptr;
    int (*shutdown_)() = nullptr;
};

void check_nvml(Context& c) {
    std::vector<const Accelerator*> gpus;
    for (const Accelerator& a : c.accs)
        if (a.vendor == Vendor::Nvidia && a.sub_index == 0) gpus.push_back(&a);
    if (gpus.empty()) return;
    const Nvml nvml;
    if (!nvml.present()) return;  // no NVIDIA driver library: nothing to compare with
    std::string bad;
    for (const Accelerator* a : gpus) {
        const auto cpus = nvml.cpu_affinity(a->pci);
        if (!cpus) bad += " " + a->pci + ": NVML does not know it;";
        else if (*cpus != a->locality)
            bad += " " + a->pci + ": NVML " + cpus->to_string() + ", numabind " + a->locality.to_string() + ";";
    }
    if (bad.empty())
        c.add({"accelerators", "NVML CPU affinity", Status::Ok,
               "nvmlDeviceGetCpuAffinity of all " + std::to_string(gpus.size()) + " GPU(s) agrees with numabind", ""});
    else
        c.add({"accelerators", "NVML CPU affinity", Status::Fail, bad.substr(1, bad.size() - 2),
               "numabind's topology is not this node's: re-record topology= here, or check HWLOC_PCI_LOCALITY"});
}

// The file each accelerator would get without device_files=, and why; "" when none.
std::vector<std::string> check_found_device_files(Context& c) {
    std::vector<std::string> files;
    for (const Accelerator& a : c.accs) {
        const std::string addr = kernel_pci(a.pci);
        const std::string file = device_file_for_pci(a.pci, c.root, c.root);
        files.push_back(file);
        Row r{"device files", gpu_label(a), Status::Ok, "", ""};
        const bool nvidia_info = fs::exists(c.root + "/proc/driver/nvidia/gpus/" + addr + "/information");
        if (file.empty()) {
            r.status = Status::Warn;
            r.detail = "no device file found (no " + std::string(nvidia_info ? "Device Minor in " : "") +
                       "/proc/driver/nvidia/gpus/" + addr + "/information, no DRM render node in sysfs)";
            r.fix = "load the GPU driver, or name the file with device_files= in the plugstack line";
        } else {
            const std::string why = file.rfind("/dev/nvidia", 0) == 0
                                        ? "NVIDIA Device Minor " + file.substr(11) + " in /proc/driver/nvidia/gpus/" + addr
                                        : "DRM render node " + file.substr(9) + " in /sys/bus/pci/devices/" + addr + "/drm";
            r.detail = file + " (" + why + ")";
            if (!fs::exists(c.root + file)) {
                r.status = Status::Warn;
                r.detail += "; but " + file + " does not exist";
                r.fix = "create the device node (nvidia-modprobe, udev) before jobs start";
            }
        }
        c.add(r);
    }
    return files;
}

// device_files= of the plugstack line, each entry against the accelerator it stands for;
// returns how many entries the plugin uses (a missing file is left out, as the engine does).
int check_listed_device_files(Context& c) {
    const std::vector<std::string>& listed = c.site->device_files;
    Row count{"plugstack", "device_files= count", Status::Ok, "", ""};
    if (listed.size() != c.accs.size()) {
        count.status = listed_files_fit(listed.size(), c.accs.size()) ? Status::Ok : Status::Fail;
        count.detail = std::to_string(listed.size()) + " file(s) for " + std::to_string(c.accs.size()) + " accelerator(s)" +
                       (c.accs.empty() ? ": ignored on a node without accelerators" : ": every step on this node fails");
        if (!c.accs.empty()) count.fix = "list exactly one device file per accelerator, in PCI order (numabind topo)";
        c.add(count);
        return 0;
    }
    int used = 0;
    count.detail = std::to_string(listed.size()) + " file(s), one per accelerator";
    c.add(count);
    const std::string node = spank::node_name(), host = spank::short_hostname();
    for (size_t i = 0; i < listed.size(); ++i) {
        const Accelerator& a = c.accs[i];
        const std::string path = spank::expand_path(listed[i], node, host);
        const DeviceFileCheck v = check_device_file(path, a.pci, c.root, c.root);
        Row r{"plugstack", "device_files[" + std::to_string(i) + "] for " + gpu_label(a), Status::Ok, path + ": " + v.detail, ""};
        const ListedFileUse use = listed_file_use(v.verdict);
        used += use != ListedFileUse::FindWithout;
        switch (use) {
            case ListedFileUse::Use: break;
            case ListedFileUse::UseTrusted:
                r.status = Status::Warn;
                r.fix = "cannot be checked here (no driver information); make sure the list is in PCI order";
                break;
            case ListedFileUse::FindWithout:
                r.status = Status::Warn;
                r.detail += "; the plugin notes it and finds that GPU without it";
                r.fix = "name an existing device file, or leave the entry to the driver's file";
                break;
            case ListedFileUse::FailStep: {
                r.status = Status::Fail;
                for (const Accelerator& other : c.accs)
                    if (&other != &a && check_device_file(path, other.pci, c.root, c.root).verdict == DeviceFileVerdict::Matches)
                        r.detail += "; it is the file of " + gpu_label(other);
                r.fix = "device_files= must follow numabind's accelerator order (PCI order, `numabind topo`): "
                        "with this list every task is bound next to the wrong GPU";
                break;
            }
        }
        c.add(r);
    }
    return used;
}

// slurm.conf's directory also holds cgroup.conf and gres.conf.
void check_slurm(Context& c) {
    const char* env = std::getenv("SLURM_CONF");
    const std::string conf = env && *env ? env : c.root + "/etc/slurm/slurm.conf";
    std::string conf_error;
    const auto text = read_file(conf, &conf_error);
    if (!text) {
        c.add({"slurm", "slurm.conf", Status::Warn, "cannot read " + conf_error,
               "set SLURM_CONF, or run on a node with Slurm's configuration"});
        return;
    }
    const std::string dir = fs::path(conf).parent_path().string();
    const auto kv = parse_key_values(*text);
    auto get = [&](const std::map<std::string, std::string>& m, const std::string& k) -> std::optional<std::string> {
        auto it = m.find(k);
        return it == m.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    c.add({"slurm", "slurm.conf", Status::Ok, conf, ""});
    c.add(task_plugin_row(get(kv, "taskplugin")));

    const std::string cgroup_path = dir + "/cgroup.conf";
    std::string cgroup_error;
    const auto cgroup = read_file(cgroup_path, &cgroup_error);
    if (!cgroup && fs::exists(cgroup_path))
        c.add({"slurm", "cgroup.conf", Status::Fail, "cannot read " + cgroup_error, "make it a regular file (Slurm reads it too)"});
    const auto constrain = cgroup ? get(parse_key_values(*cgroup), "constraindevices") : std::nullopt;
    c.devices_constrained = devices_constrained(text, cgroup);  // the plugin's reading
    c.add({"slurm", "ConstrainDevices", Status::Ok,
           *c.devices_constrained
               ? "yes (" + cgroup_path + ", TaskPlugin task/cgroup): a task can open only its step's GPUs, and only "
                                         "its own under --gpus-per-task or --gpu-bind"
           : constrain && is_yes(*constrain)
               ? "yes in " + cgroup_path + " but TaskPlugin has no task/cgroup: devices not constrained; tasks may "
                                          "open every GPU"
           : !cgroup ? "no " + cgroup_path + ": devices not constrained; tasks may open every GPU"
                     : "no (" + cgroup_path + "): tasks may open every GPU; the GPU runtime variables (Slurm's gres "
                                              "index) choose among them",
           ""});

    const std::string gres_path = dir + "/gres.conf";
    std::string gres_error;
    const auto gres_text = read_file(gres_path, &gres_error);
    if (!gres_text) {
        std::error_code ec;
        if (fs::exists(gres_path, ec))
            c.add({"slurm", "gres.conf", Status::Fail, "cannot read " + gres_error,
                   "make gres.conf a regular file of at most " + std::to_string(cli::kMaxConfigBytes) + " bytes"});
        else
            c.add({"slurm", "gres.conf", Status::Ok, "no " + gres_path + " (no GPU gres on this node)", ""});
        return;
    }
    const std::string node = spank::node_name();
    GresGpus gres;
    try {
        gres = parse_gres_conf(*gres_text, node);
    } catch (const UsageError& e) {
        c.add({"slurm", "gres.conf", Status::Fail, gres_path + ": " + e.what(), "fix the line (Slurm refuses it too)"});
        return;
    }
    c.gres_files = gres.files.size();
    if (gres.autodetect && gres.files.empty()) {
        c.gres_in_pci_order = true;
        c.add({"slurm", "gres.conf order", Status::Ok, "AutoDetect=" + gres.autodetect_value + ": Slurm lists the GPUs in PCI order", ""});
        return;
    }
    if (gres.files.empty()) {
        c.add({"slurm", "gres.conf order", Status::Ok, "no Name=gpu File= line for node " + node + " in " + gres_path, ""});
        return;
    }
    // Each File= to a PCI address: NVIDIA minor (char 195:N, or the name's number) -> Device Minor.
    std::map<int, std::string> minor_to_pci;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(c.root + "/proc/driver/nvidia/gpus", ec)) {
        const std::string f = device_file_for_pci(e.path().filename().string(), c.root, c.root);
        if (f.rfind("/dev/nvidia", 0) == 0) minor_to_pci[std::atoi(f.c_str() + 11)] = e.path().filename().string();
    }
    std::vector<std::string> pci;
    std::string order, unmapped;
    for (const std::string& f : gres.files) {
        int minor_number = -1;
        struct stat st {};
        if (stat(f.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 195)
            minor_number = static_cast<int>(minor(st.st_rdev));
        else if (const size_t at = f.rfind("nvidia"); at != std::string::npos && at + 6 < f.size())
            minor_number = std::atoi(f.c_str() + at + 6);
        auto it = minor_to_pci.find(minor_number);
        if (it == minor_to_pci.end()) {
            unmapped += " " + f;
            continue;
        }
        pci.push_back(it->second);
        order += (order.empty() ? "" : ", ") + f + " = " + it->second;
    }
    const OrderCheck oc = pci_order(pci);  // of the entries that map: any pair out of order is enough
    if (!unmapped.empty() && oc.in_order) {
        c.add({"slurm", "gres.conf order", Status::Warn,
               "cannot tell which GPU these File= entries are (no NVIDIA driver information):" + unmapped,
               "check that gres.conf lists File= in PCI order (nvidia-smi's order)"});
        return;
    }
    c.gres_in_pci_order = oc.in_order;
    if (oc.in_order) {
        c.add({"slurm", "gres.conf order", Status::Ok, "File= in PCI order: " + order, ""});
    } else {
        std::vector<std::string> sorted = pci;
        std::sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) { return pci_address_less(a, b); });
        c.add({"slurm", "gres.conf order", Status::Warn,
               "File= not in PCI order (gres index " + std::to_string(oc.first_bad) + " comes after index " +
                   std::to_string(oc.first_bad + 1) + " in PCI order): " + order,
               "list File= in PCI order (" + sorted.front() + " first) or use AutoDetect=nvml: Slurm's GPU index then "
               "matches nvidia-smi's"});
    }
}

void check_plugstack_line(Context& c, const std::string& line, const std::string& where) {
    PlugstackLine p;
    try {
        p = parse_plugstack_line(line);
    } catch (const UsageError& e) {
        c.add({"plugstack", "line", Status::Fail, where + ": " + e.what(), "required|optional /path/spank_numabind.so [key=value ...]"});
        return;
    }
    c.add({"plugstack", "line", Status::Ok, where + ": " + p.control + " " + p.plugin, ""});
    const FileFacts plugin = facts_of(p.plugin);
    // Slurm dlopen()s the plugin as root: the loader's trust rule (policy/file_trust.cpp).
    const std::string untrusted = plugin.exists ? spank::untrusted_file(p.plugin, "the plugin", 0) : "";
    if (!plugin.exists) {
        c.add({"plugstack", "plugin", p.control == "required" ? Status::Fail : Status::Warn,
               p.plugin + " does not exist" +
                   (p.control == "required" ? ": every srun and sbatch fails" : ": jobs run without numabind"),
               "install the plugin there, or fix the path"});
    } else if (!untrusted.empty()) {
        c.add({"plugstack", "plugin", Status::Fail,
               untrusted + ": Slurm loads it as root, so whoever can change it runs code as root",
               "install the plugin owned by root, mode 0755, in directories only root can write"});
    } else {
        c.add({"plugstack", "plugin", Status::Ok, p.plugin, ""});
    }
    // The step engine: the verdict of the front's own loader (slurmstepd runs it as root).
    std::string engine, refusal;
    const int engine_fd = spank::open_step_engine(p.plugin, spank::kStepEngineFile, 0, engine, refusal);
    if (engine_fd >= 0) {
        struct stat st {};
        fstat(engine_fd, &st);
        close(engine_fd);
        std::ostringstream mode;
        mode << std::oct << (st.st_mode & 07777);
        c.add({"plugstack", "step engine", Status::Ok,
               engine + " (uid " + std::to_string(st.st_uid) + ", mode 0" + mode.str() + ")", ""});
    } else {
        c.add({"plugstack", "step engine", Status::Fail, refusal + ": steps that bind fail (fallback=fail) or run unbound",
               "install numabind_stepd.so from the same build beside the plugin's real file, owned by root, mode 0755, "
               "in directories only root can write"});
    }
    try {
        c.site = spank::parse_site_config(p.args);
    } catch (const UsageError& e2) {
        c.add({"plugstack", "arguments", Status::Fail,
               std::string(e2.what()) + (p.control == "required" ? " (the plugin refuses to load: every srun and sbatch stops)" : ""),
               "fix the argument (see man spank_numabind)"});
        return;
    }
    const spank::SiteConfig& s = *c.site;
    std::string parsed = "default=" + std::string(to_string(s.default_mode)) + " mem=" + to_string(s.mem) +
                         " fallback=" + (s.fallback == spank::Fallback::Warn ? "warn" : "fail") +
                         " verbose=" + std::to_string(s.verbose_level) + " respect_user_bind=" + (s.respect_user_bind ? "yes" : "no") +
                         " batch_step=" + (s.batch_step ? "yes" : "no") + " smt=" + (s.one_thread_per_core ? "1" : "all") +
                         " omp=" + (s.omp ? "yes" : "no") + " ucx=" + (s.ucx ? "yes" : "no") +
                         (s.devices.empty() ? "" : " devices=" + s.devices) +
                         (s.topology.empty() ? "" : " topology=" + s.topology) +
                         (s.device_files.empty() ? "" : " device_files=" + std::to_string(s.device_files.size()) + " file(s)");
    c.add({"plugstack", "arguments", Status::Ok, "parsed as the plugin parses them: " + parsed, ""});
    c.matcher = s.matcher;
    if (!s.topology.empty()) {
        const std::string path = spank::expand_path(s.topology, spank::node_name(), spank::short_hostname());
        Row r{"plugstack", "topology=", Status::Ok, "", ""};
        try {
            if (auto died = cli::hwloc_dies_loading(path)) throw Error(*died);
            auto t = load_topology(path, false, [](const std::string&) {});
            const Topology& a = t->model();
            const Topology& b = c.node->model();
            std::string diff;
            if (a.all_pus() != b.all_pus()) diff += " CPUs " + a.all_pus().to_string() + " vs " + b.all_pus().to_string() + ";";
            if (a.cpu_nodes() != b.cpu_nodes()) diff += " NUMA nodes " + nodes_text(a.cpu_nodes()) + " vs " + nodes_text(b.cpu_nodes()) + ";";
            const auto ta = find_accelerators(a, c.matcher), tb = find_accelerators(b, c.matcher);
            c.plugin_accs = ta;
            for (size_t i = 0; i < std::max(ta.size(), tb.size()); ++i) {
                if (i >= ta.size() || i >= tb.size() || ta[i].pci != tb[i].pci || ta[i].home_nodes != tb[i].home_nodes) {
                    diff += " accelerators differ (" + std::to_string(ta.size()) + " in the file, " + std::to_string(tb.size()) + " here);";
                    break;
                }
            }
            r.detail = path + (diff.empty() ? ": loads, and matches this node" : ": loads, but differs from this node:" + diff);
            if (!diff.empty()) {
                r.status = Status::Fail;
                r.fix = "record it on this node: lstopo --of xml --whole-io " + path;
            }
        } catch (const std::exception& ex) {
            r.status = Status::Fail;
            r.detail = ex.what();
            r.fix = "record it on this node: lstopo --of xml --whole-io " + path + "; check with numabind topo --topology";
        }
        c.add(r);
    }
}

// Bounds on reading a plugstack.conf and its includes (check runs as root: files that
// include each other must not take it forever).
constexpr int kMaxIncludeDepth = 8;
constexpr int kMaxPlugstackFiles = 64;

// What the plugstack.conf and the files it includes load, read as slurmstepd reads them.
struct PlugstackScan {
    std::vector<std::pair<std::string, std::string>> numabind;  // line, "file:N"
    std::vector<std::string> stack;                             // real paths being read (cycles)
    int files = 0;
    bool too_many_reported = false;
};

// Each file Slurm reads as root is a way to load code as root: it must be root's, in root's
// directories (the loader's rule); so must every other plugin it names.
void scan_plugstack(Context& c, const std::string& file, const std::string& from, PlugstackScan& scan, int depth) {
    if (depth > kMaxIncludeDepth) {
        c.add({"plugstack", "include", Status::Fail,
               from + ": " + file + " not read: includes nested deeper than " + std::to_string(kMaxIncludeDepth) + " levels",
               "flatten the includes (an include loop?)"});
        return;
    }
    if (++scan.files > kMaxPlugstackFiles) {
        if (!scan.too_many_reported)
            c.add({"plugstack", "include", Status::Fail,
                   from + ": " + file + " and the rest not read: more than " + std::to_string(kMaxPlugstackFiles) +
                       " plugstack files",
                   "include fewer files (an include loop?)"});
        scan.too_many_reported = true;
        return;
    }
    std::error_code ec;
    const std::string real = fs::weakly_canonical(file, ec).string();
    if (std::find(scan.stack.begin(), scan.stack.end(), real) != scan.stack.end()) {
        c.add({"plugstack", "include", Status::Fail, from + ": " + file + " includes itself (an include loop)",
               "remove the include line"});
        return;
    }
    std::string error;
    const auto text = read_file(file, &error);
    if (!text) {
        std::error_code missing;
        if (depth > 0 || fs::exists(file, missing))  // a plugstack.conf that is not there is said below
            c.add({"plugstack", depth ? "include" : "plugstack.conf", Status::Fail,
                   (depth ? from + ": " : "") + "cannot read " + error,
                   "only regular files of at most " + std::to_string(cli::kMaxConfigBytes) + " bytes"});
        return;
    }
    if (const std::string why = spank::untrusted_file(file, "plugstack file", 0); !why.empty())
        c.add({"plugstack", depth ? "include" : "plugstack.conf", Status::Fail,
               why + (depth ? " (included from " + from + ")" : "") +
                   ": whoever can change it adds plugins that Slurm loads as root",
               "make it and its directories root's and closed to others' writes"});
    scan.stack.push_back(real);
    std::istringstream in(*text);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        const std::string where = file + ":" + std::to_string(number);
        const std::vector<std::string> w = words_of(line);
        if (w.size() >= 2 && w[0] == "include") {
            std::string pattern = w[1];
            if (pattern[0] != '/') pattern = fs::path(file).parent_path().string() + "/" + pattern;
            const fs::path pp(pattern);
            const std::string name = pp.filename().string();
            std::vector<std::string> matches;
            if (name.find('*') == std::string::npos) {
                matches.push_back(pattern);
            } else {  // "dir/*.conf": the only glob form sites use
                const std::string suffix = name.substr(name.find('*') + 1), prefix = name.substr(0, name.find('*'));
                for (const fs::directory_entry& e : fs::directory_iterator(pp.parent_path(), ec)) {
                    const std::string n = e.path().filename().string();
                    if (n.size() >= prefix.size() + suffix.size() && n.rfind(prefix, 0) == 0 &&
                        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
                        matches.push_back(e.path().string());
                    if (matches.size() > static_cast<size_t>(kMaxPlugstackFiles)) break;
                }
                std::sort(matches.begin(), matches.end());
            }
            for (const std::string& m : matches) scan_plugstack(c, m, where, scan, depth + 1);
        } else if (w.size() >= 2 && w[1].find("spank_numabind") != std::string::npos) {
            scan.numabind.emplace_back(line, where);
        } else if (w.size() >= 2 && (w[0] == "required" || w[0] == "optional")) {
            // Another plugin: not numabind's to judge, but loaded as root all the same.
            const std::string why = w[1][0] == '/' && fs::exists(w[1], ec) ? spank::untrusted_file(w[1], "plugin", 0) : "";
            if (!why.empty())
                c.add({"plugstack", "other plugin", Status::Fail, where + ": " + why + ": Slurm loads it as root",
                       "install it owned by root, mode 0755, in directories only root can write"});
        }
    }
    scan.stack.pop_back();
}

void check_plugstack(Context& c, const CheckOptions& o) {
    if (!o.plugstack.empty()) return check_plugstack_line(c, o.plugstack, "--plugstack");
    std::string file = o.plugstack_file;
    if (file.empty()) {
        const char* env = std::getenv("SLURM_CONF");
        const std::string conf = env && *env ? env : c.root + "/etc/slurm/slurm.conf";
        const auto text = read_file(conf);
        auto kv = text ? parse_key_values(*text) : std::map<std::string, std::string>{};
        file = kv.count("plugstackconfig") ? kv["plugstackconfig"] : fs::path(conf).parent_path().string() + "/plugstack.conf";
    }
    PlugstackScan scan;
    scan_plugstack(c, file, "", scan, 0);
    const auto& lines = scan.numabind;
    if (lines.empty()) {
        c.add({"plugstack", "line", Status::Warn, "no spank_numabind line in " + file + " (or the files it includes)",
               "add `required /path/spank_numabind.so [args]` (docs/SITE.md section 2), or check with --plugstack LINE"});
        return;
    }
    if (lines.size() > 1)
        c.add({"plugstack", "lines", Status::Fail, std::to_string(lines.size()) + " spank_numabind lines (" + lines[0].second +
                                                     ", " + lines[1].second + "): Slurm loads the plugin twice",
               "keep one"});
    check_plugstack_line(c, lines[0].first, lines[0].second);
}

void check_model_cache(Context& c) {
    auto opts = cache_options();
    Row r{"plugstack", "model cache directory", Status::Ok, "", ""};
    if (!opts) {
        c.add({"plugstack", "model cache directory", Status::Warn, "NUMABIND_TOPOLOGY_CACHE=off in this environment", ""});
        return;
    }
    const std::string dir = opts->dir;
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0) {
        r.detail = dir + " does not exist yet (the first binding step creates it as root)";
    } else if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
        r.status = Status::Warn;
        r.detail = dir + " is not a root-owned directory closed to group and others: its caches are ignored and "
                         "every step discovers the node live";
        r.fix = "rm -rf " + dir + " (the next step recreates it), or chown root and chmod 0755 it";
    } else {
        std::error_code ec;
        int models = 0;
        for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
            models += e.path().filename().string().rfind("model-", 0) == 0;
        r.detail = dir + " (root, mode 0" + [&] { std::ostringstream m; m << std::oct << (st.st_mode & 07777); return m.str(); }() +
                   "), " + std::to_string(models) + " model file(s)";
    }
    c.add(r);
}

void check_kernel(Context& c) {
    const std::string cg = c.root + "/sys/fs/cgroup";
    const std::string version = fs::exists(cg + "/cgroup.controllers") ? "v2"
                                : fs::exists(cg + "/cpuset")            ? "v1"
                                                                        : "";
    if (version.empty())
        c.add({"kernel", "cgroup", Status::Warn, "no cgroup hierarchy under " + cg, "mount cgroups (Slurm's task/cgroup needs them)"});
    else
        c.add({"kernel", "cgroup", Status::Ok,
               version + (version == "v2" ? " (unified): the device cgroup is an eBPF program, so tasks find their GPUs by opening the device files"
                                          : " (legacy or hybrid): tasks find their GPUs by opening the device files"),
               ""});
    const std::string release = first_line(c.root + "/proc/sys/kernel/osrelease");
    const auto kv = kernel_version(release);
    if (!kv)
        c.add({"kernel", "preferred-many", Status::Warn, "cannot read the kernel release", ""});
    else if (*kv >= std::make_pair(5, 15))
        c.add({"kernel", "preferred-many", Status::Ok, release + ": mem=prefer over several home nodes uses MPOL_PREFERRED_MANY", ""});
    else
        c.add({"kernel", "preferred-many", Status::Warn,
               release + " is older than 5.15: mem=prefer over several home nodes prefers only the first",
               "a 5.15 or newer kernel, or mem=bind for tasks spanning nodes"});

    // NUMA nodes and distances as the kernel lists them vs numabind's view.
    const Topology& m = c.node->model();
    std::string node_diff, dist_diff;
    int nodes_seen = 0;
    for (const NumaNode& n : m.numa_nodes) {
        const std::string dir = c.root + "/sys/devices/system/node/node" + std::to_string(n.os_index);
        if (!fs::exists(dir)) {
            node_diff += " node " + std::to_string(n.os_index) + " missing in sysfs;";
            continue;
        }
        ++nodes_seen;
        IdSet cpus;
        try {
            cpus = IdSet::parse(first_line(dir + "/cpulist"));
        } catch (const std::exception&) {
        }
        if (cpus != n.pus) node_diff += " node " + std::to_string(n.os_index) + " CPUs " + cpus.to_string() + " vs " + n.pus.to_string() + ";";
        std::istringstream d(first_line(dir + "/distance"));
        int value, j = 0;
        std::vector<int> sys_nodes;
        for (const NumaNode& k : m.numa_nodes) sys_nodes.push_back(k.os_index);
        std::sort(sys_nodes.begin(), sys_nodes.end());
        while (d >> value && j < static_cast<int>(sys_nodes.size())) {
            const auto it = m.distances.find({n.os_index, sys_nodes[static_cast<size_t>(j)]});
            if (it != m.distances.end() && it->second != value && dist_diff.size() < 200)
                dist_diff += " " + std::to_string(n.os_index) + "->" + std::to_string(sys_nodes[static_cast<size_t>(j)]) +
                             ": " + std::to_string(value) + " vs " + std::to_string(it->second) + ";";
            ++j;
        }
    }
    if (nodes_seen == 0)
        c.add({"kernel", "NUMA nodes", Status::Warn, "cannot read " + c.root + "/sys/devices/system/node", "run on the node itself"});
    else if (!node_diff.empty())
        c.add({"kernel", "NUMA nodes", Status::Fail, "kernel vs numabind:" + node_diff,
               "numabind's topology is not this node's (stale topology= or another BIOS NPS/SNC mode): re-record it"});
    else
        c.add({"kernel", "NUMA nodes", Status::Ok, std::to_string(nodes_seen) + " node(s), same CPUs as the kernel's", ""});
    if (nodes_seen > 0) {
        if (m.distances.empty() && m.numa_nodes.size() < 2)
            c.add({"kernel", "NUMA distances", Status::Ok, "one NUMA node: no distances to compare", ""});
        else if (m.distances.empty())
            c.add({"kernel", "NUMA distances", Status::Warn, "numabind's topology has no distance matrix: fallbacks use 10/20",
                   "record topology= with lstopo (it keeps the distances)"});
        else if (!dist_diff.empty())
            c.add({"kernel", "NUMA distances", Status::Warn, "kernel vs numabind:" + dist_diff, "re-record topology= on this node"});
        else
            c.add({"kernel", "NUMA distances", Status::Ok, "same as the kernel's", ""});
    }
}

}  // namespace

CLI::App* add_check_command(CLI::App& app, CheckOptions& o) {
    CLI::App* c = app.add_subcommand("check", "compare numabind's view of this node with sysfs, the drivers, Slurm's "
                                              "configuration and a plugstack line; OK/WARN/FAIL with a fix per row");
    c->add_flag("--json", o.json, "JSON output");
    auto* line = c->add_option("--plugstack", o.plugstack, "one plugstack.conf line to check (quote it)");
    auto* file = c->add_option("--plugstack-file", o.plugstack_file,
                               "a plugstack.conf to check (default: PlugStackConfig of slurm.conf, or plugstack.conf beside it)");
    line->excludes(file);
    c->add_option("--topology", o.topology, "hwloc XML standing for this node instead of discovering it");
    return c;
}

int run_check(const CheckOptions& o) {
    std::string unreadable;
    if (!o.plugstack_file.empty() && !read_file(o.plugstack_file, &unreadable))
        throw UsageError("--plugstack-file: cannot read " + unreadable);
    Context c;
    c.root = root();
    {
        ScopedQuietHwlocPlugins quiet;
        if (!o.topology.empty())
            if (auto died = cli::hwloc_dies_loading(o.topology)) throw Error("--topology: " + *died);
        c.node = load_topology(o.topology, false, [](const std::string&) {});
    }
    check_plugstack(c, o);  // first: devices= decides what counts as an accelerator
    c.accs = find_accelerators(c.node->model(), c.matcher);
    check_accelerator_list(c);
    check_accelerator_homes(c);
    check_vendor_tool(c, Vendor::Nvidia, "nvidia-smi", "topo -m", parse_nvidia_smi_topo);
    check_vendor_tool(c, Vendor::Amd, "rocm-smi", "--showtoponuma", parse_rocm_smi_numa);
    check_nvml(c);
    check_found_device_files(c);  // one row per accelerator of this node
    check_slurm(c);
    // The accelerators the plugin binds by: its topology= file's where it names one.
    const std::vector<Accelerator>& plugin_accs = c.plugin_accs ? *c.plugin_accs : c.accs;
    int known = 0;
    for (const Accelerator& a : plugin_accs) known += device_file_for_pci(a.pci, c.root, c.root).empty() ? 0 : 1;
    if (c.site && !c.site->device_files.empty()) {
        // The plugin opens the listed files instead; a wrong entry is its own FAIL row above.
        known = check_listed_device_files(c);
    }
    c.add(gpu_rule_row(known, static_cast<int>(plugin_accs.size()), c.gres_files, c.devices_constrained,
                       c.gres_in_pci_order));
    check_kernel(c);
    check_model_cache(c);
    // Node facts first, then the plugstack line, as an admin reads them.
    std::vector<Row> rows = std::move(c.rows);
    std::stable_partition(rows.begin(), rows.end(), [](const Row& r) { return r.area != "plugstack"; });
    if (o.json)
        std::cout << rows_to_json(rows).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";  // bytes of gres.conf names that are no UTF-8
    else
        std::cout << rows_to_table(rows);
    return exit_status(rows);
}

}  // namespace numabind::check
