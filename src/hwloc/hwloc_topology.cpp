// hwloc adapter: everything hwloc-specific lives here.
#include "numabind/hwloc_topology.hpp"
#include "numabind/topology.hpp"

#include <hwloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <sys/stat.h>

#include "numabind/error.hpp"
#include "sys/binding.hpp"

namespace numabind {

struct HwlocTopology::Impl {
    hwloc_topology_t topo = nullptr;
    ~Impl() {
        if (topo) hwloc_topology_destroy(topo);
    }
};

namespace {

constexpr const char* kQuietComponents[] = {"gl", "opencl"};
// CPU and node numbers above IdSet's range (far above any kernel's NR_CPUS) are refused.
constexpr int kMaxOsIndex = IdSet::kMaxId;

IdSet to_idset(hwloc_const_bitmap_t bitmap) {
    IdSet out;
    if (!bitmap || hwloc_bitmap_weight(bitmap) < 0) return out;
    int id;
    hwloc_bitmap_foreach_begin(id, bitmap) { out.insert(id); }
    hwloc_bitmap_foreach_end();
    return out;
}

std::string pci_address(hwloc_obj_t obj) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", obj->attr->pcidev.domain, obj->attr->pcidev.bus,
                  obj->attr->pcidev.dev, obj->attr->pcidev.func);
    return buf;
}

// An OpenFabrics device lists its ports as infos Port<N>State (4 = ACTIVE), Port<N>LID...
NetDevice net_device(hwloc_obj_t osdev, bool rdma) {
    NetDevice n;
    n.name = osdev->name;
    n.rdma = rdma;
    if (osdev->subtype) n.subtype = osdev->subtype;
    for (unsigned i = 0; i < osdev->infos_count; ++i) {
        const char* key = osdev->infos[i].name;
        const char* value = osdev->infos[i].value;
        if (!key || !value || std::strncmp(key, "Port", 4) != 0) continue;
        char* end = nullptr;
        const long port = std::strtol(key + 4, &end, 10);
        if (end == key + 4 || std::strcmp(end, "State") != 0 || port < 0 || port > 255) continue;
        const long state = std::strtol(value, nullptr, 10);
        n.ports.emplace_back(static_cast<int>(port), static_cast<int>(state < 0 || state > 255 ? 0 : state));
    }
    return n;
}

bool is_l3(hwloc_obj_t obj) { return obj->type == HWLOC_OBJ_L3CACHE; }

void build_model(hwloc_topology_t t, Topology& m) {
    // Cache groups: L3 where the machine has one, else the deepest shared level below it.
    hwloc_obj_type_t cache_type = HWLOC_OBJ_L3CACHE;
    m.cache_level_name = "L3";
    if (hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_L3CACHE) == 0) {
        cache_type = HWLOC_OBJ_L2CACHE;
        m.cache_level_name = "L2";
        if (hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_L2CACHE) == 0) m.cache_level_name = "L3";
    }
    const int ncache = hwloc_get_nbobjs_by_type(t, cache_type);
    for (int i = 0; i < ncache; ++i) {
        hwloc_obj_t c = hwloc_get_obj_by_type(t, cache_type, i);
        m.l3_groups.push_back({to_idset(c->cpuset)});
    }
    const int npkg = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < npkg; ++i) {
        hwloc_obj_t p = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, i);
        m.packages.push_back({static_cast<int>(p->os_index), to_idset(p->cpuset)});
    }
    auto index_of_ancestor = [&](hwloc_obj_t obj, hwloc_obj_type_t type) {
        hwloc_obj_t a = hwloc_get_ancestor_obj_by_type(t, type, obj);
        return a ? static_cast<int>(a->logical_index) : -1;
    };
    // Cores; PUs without a Core parent (some exports) count as their own core.
    const int npu = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    int last_core = -2;
    for (int i = 0; i < npu; ++i) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, i);
        hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu);
        int core_id = core ? static_cast<int>(core->logical_index) : -1;
        if (core && core_id == last_core) {
            m.cores.back().pus.insert(static_cast<int>(pu->os_index));
            continue;
        }
        Core c;
        c.pus.insert(static_cast<int>(pu->os_index));
        c.l3 = ncache ? index_of_ancestor(pu, cache_type) : -1;
        c.package = index_of_ancestor(pu, HWLOC_OBJ_PACKAGE);
        m.cores.push_back(c);
        last_core = core_id;
    }
    // Core objects with PUs in logical order are normally consecutive; merge any
    // that are not (seen in hand-edited XML) so a core is never counted twice.
    const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < nnuma; ++i) {
        hwloc_obj_t n = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
        NumaNode node;
        node.os_index = static_cast<int>(n->os_index);
        node.locality = to_idset(n->cpuset);
        if (n->subtype) node.subtype = n->subtype;
        m.numa_nodes.push_back(node);
    }
    // hwloc gives a memory-only node the cpuset of where it is attached, so several
    // nodes can claim a PU. The kernel puts each PU on exactly one node: the most
    // specific one, plain memory before a subtyped one (GPUMemory, MCDRAM, HBM),
    // then the lowest OS index.
    for (int pu : m.all_pus().ids()) {
        NumaNode* owner = nullptr;
        for (NumaNode& node : m.numa_nodes) {
            if (!node.locality.contains(pu)) continue;
            if (!owner) {
                owner = &node;
                continue;
            }
            auto key = [](const NumaNode& x) {
                return std::make_tuple(x.locality.size(), !x.subtype.empty(), x.os_index);
            };
            if (key(node) < key(*owner)) owner = &node;
        }
        if (owner) owner->pus.insert(pu);
    }
    // Distances between NUMA nodes, latency-like first.
    unsigned nr = 1;
    hwloc_distances_s* dist = nullptr;
    if (hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &nr, &dist, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) == 0 &&
        nr == 1 && dist) {
        for (unsigned a = 0; a < dist->nbobjs; ++a)
            for (unsigned b = 0; b < dist->nbobjs; ++b)
                m.distances[{static_cast<int>(dist->objs[a]->os_index), static_cast<int>(dist->objs[b]->os_index)}] =
                    static_cast<int>(dist->values[a * dist->nbobjs + b]);
        hwloc_distances_release(t, dist);
    }
    // PCI functions with their locality.
    for (hwloc_obj_t p = hwloc_get_next_pcidev(t, nullptr); p; p = hwloc_get_next_pcidev(t, p)) {
        PciDevice d;
        d.address = pci_address(p);
        d.vendor = p->attr->pcidev.vendor_id;
        d.device = p->attr->pcidev.device_id;
        d.class_id = p->attr->pcidev.class_id;
        if (const char* name = hwloc_obj_get_info_by_name(p, "PCIDevice")) d.name = name;
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, p);
        d.locality = to_idset(anc->cpuset);
        d.machine_level = anc->type == HWLOC_OBJ_MACHINE || anc->parent == nullptr;
        for (hwloc_obj_t a = anc; a; a = a->parent) {
            if (is_l3(a)) {
                d.l3 = static_cast<int>(a->logical_index);
                break;
            }
        }
        if (cache_type != HWLOC_OBJ_L3CACHE) d.l3 = -1;
        for (hwloc_obj_t c = p->io_first_child; c; c = c->next_sibling) {
            if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
            d.os_devices.push_back(c->name);
            const auto kind = c->attr->osdev.type;
            if (kind == HWLOC_OBJ_OSDEV_OPENFABRICS || kind == HWLOC_OBJ_OSDEV_NETWORK)
                d.net_devices.push_back(net_device(c, kind == HWLOC_OBJ_OSDEV_OPENFABRICS));
        }
        // Bridge ancestry, host bridge first: what "sharing a PCIe switch" is decided on.
        for (hwloc_obj_t a = p->parent; a && a->type == HWLOC_OBJ_BRIDGE; a = a->parent)
            d.bridges.insert(d.bridges.begin(), static_cast<int>(a->logical_index));
        m.pci_devices.push_back(d);
    }
}

// Every PU and NUMA node needs its OS index (the CPU and node numbers the kernel uses):
// hwloc accepts an XML object without one (HWLOC_UNKNOWN_INDEX), but nothing can be bound
// to it, and the planner would silently lose it.
void check_os_indexes(hwloc_topology_t t, const std::string& source) {
    for (hwloc_obj_type_t type : {HWLOC_OBJ_PU, HWLOC_OBJ_NUMANODE}) {
        const int n = hwloc_get_nbobjs_by_type(t, type);
        for (int i = 0; i < n; ++i) {
            hwloc_obj_t obj = hwloc_get_obj_by_type(t, type, static_cast<unsigned>(i));
            const char* what = type == HWLOC_OBJ_PU ? "PU" : "NUMANode";
            if (obj->os_index == HWLOC_UNKNOWN_INDEX)
                throw Error("topology " + source + ": " + what + " L#" + std::to_string(i) +
                            " has no os_index (the OS's " + (type == HWLOC_OBJ_PU ? "CPU" : "node") +
                            " number); every " + what + " object of the XML needs one");
            if (obj->os_index > static_cast<unsigned>(kMaxOsIndex))
                throw Error("topology " + source + ": " + what + " L#" + std::to_string(i) + " has os_index " +
                            std::to_string(obj->os_index) + " (valid: 0-" + std::to_string(kMaxOsIndex) + ")");
        }
    }
}

}  // namespace

ScopedQuietHwlocPlugins::ScopedQuietHwlocPlugins() {
    if (!std::getenv(kVariable)) set_ = setenv(kVariable, kValue, 0) == 0;
}

ScopedQuietHwlocPlugins::~ScopedQuietHwlocPlugins() {
    if (set_) unsetenv(kVariable);
}

HwlocTopology::HwlocTopology(const LoadOptions& options) : impl_(std::make_unique<Impl>()) {
    hwloc_topology_t& t = impl_->topo;
    if (hwloc_topology_init(&t) != 0) throw Error("hwloc: cannot initialise a topology");
    // GL (X displays) and OpenCL discovery are never needed here and cost milliseconds on a
    // live discovery. Per topology, not through the process environment: slurmstepd runs
    // other threads (setenv is not thread-safe). Fails only where the component is not
    // installed, which is what we want anyway.
    for (const char* component : kQuietComponents)
        (void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
    // PCI devices are filtered out by default, from the live machine and from XML alike.
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    unsigned long flags = HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED;
    if (!options.xml_buffer.empty()) {
        if (options.xml_buffer.size() > (1u << 30) ||
            hwloc_topology_set_xmlbuffer(t, options.xml_buffer.data(), static_cast<int>(options.xml_buffer.size())) != 0)
            throw Error("hwloc could not load the topology from the XML buffer (not a valid hwloc XML?)");
        this_system_ = options.this_system;
        source_ = "xml buffer";
        if (this_system_) flags |= HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM;
    } else if (!options.xml_path.empty()) {
        struct stat st;
        if (stat(options.xml_path.c_str(), &st) != 0)
            throw Error("cannot read topology file '" + options.xml_path + "': " + std::strerror(errno));
        if (!S_ISREG(st.st_mode))
            throw Error("cannot read topology file '" + options.xml_path + "': not a regular file");
        if (hwloc_topology_set_xml(t, options.xml_path.c_str()) != 0)
            throw Error("hwloc could not load the topology from '" + options.xml_path + "' (not a valid hwloc XML?)");
        this_system_ = options.this_system;
        source_ = options.xml_path;
        // Without this flag hwloc treats the XML as foreign and binding calls through it
        // silently do nothing; we also need it to read this process's allowed cpuset.
        if (this_system_) flags |= HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM;
    } else {
        source_ = "live";
    }
    hwloc_topology_set_flags(t, flags);
    if (hwloc_topology_load(t) != 0) {
        throw Error("hwloc could not load the topology" +
                    (source_ == "live" ? std::string() : " from '" + source_ + "'") +
                    " (not a valid hwloc XML?)");
    }
    if (hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU) <= 0)
        throw Error("topology " + source_ + " has no processing units");
    check_os_indexes(t, source_);
    build_model(t, model_);
}

HwlocTopology::~HwlocTopology() = default;

HwlocTopology::Allowed HwlocTopology::allowed() const {
    // This machine: the kernel's cpuset, read in a few system calls (src/sys/binding.cpp)
    // rather than by hwloc_topology_allow(LOCAL_RESTRICTIONS), which parses cgroup files
    // and rewrites the topology (~150 us per task in slurmstepd). A foreign XML: what it
    // records as allowed.
    if (this_system_) return allowed_in(model_, kernel_allowed(), source_);
    hwloc_topology_t t = impl_->topo;
    return allowed_in(model_,
                      {to_idset(hwloc_topology_get_allowed_cpuset(t)), to_idset(hwloc_topology_get_allowed_nodeset(t))},
                      source_);
}

IdSet HwlocTopology::allowed_cpus() const { return allowed().cpus; }

IdSet HwlocTopology::allowed_mems() const { return allowed().mems; }

std::string HwlocTopology::export_xml(const std::vector<std::pair<std::string, std::string>>& root_infos) const {
    hwloc_topology_t t = impl_->topo;
    hwloc_obj_t root = hwloc_get_root_obj(t);
    for (const auto& [name, value] : root_infos) {
        if (hwloc_obj_add_info(root, name.c_str(), value.c_str()) != 0)
            throw Error("hwloc: cannot add info '" + name + "' to the topology");
    }
    char* buf = nullptr;
    int len = 0;
    if (hwloc_topology_export_xmlbuffer(t, &buf, &len, 0) != 0 || !buf)
        throw Error("hwloc: cannot export the topology as XML");
    std::string xml(buf, len > 0 ? static_cast<size_t>(len - 1) : 0);  // len counts the final NUL
    hwloc_free_xmlbuffer(t, buf);
    return xml;
}

std::string HwlocTopology::root_info(const std::string& name) const {
    const char* v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(impl_->topo), name.c_str());
    return v ? v : "";
}

}  // namespace numabind
