#include "core/visible.hpp"

#include <algorithm>

#include "core/local_rank.hpp"
#include "core/text.hpp"
#include "numabind/error.hpp"

namespace numabind {

namespace {

bool is_uuid(const std::string& s) { return s.rfind("GPU-", 0) == 0 || s.rfind("MIG-", 0) == 0; }

// The accelerators a runtime numbers: those of its vendor where there are any
// (CUDA does not count AMD GPUs), otherwise all of them (Slurm's generic index).
std::vector<int> runtime_devices(const std::vector<Accelerator>& accs, Vendor vendor) {
    std::vector<int> out;
    for (const Accelerator& a : accs)
        if (a.vendor == vendor) out.push_back(a.index);
    if (out.empty())
        for (const Accelerator& a : accs) out.push_back(a.index);
    return out;
}

// Maps one variable's entries onto physical indexes. `pool` is what the runtime counts.
std::vector<int> resolve(const std::string& var, const std::string& value, const std::vector<int>& pool,
                         const std::vector<Accelerator>& accs, const UuidResolver& resolver,
                         std::vector<std::string>& warnings, bool ze_mask) {
    std::vector<int> out;
    if (trimmed(value).empty()) return out;  // set but empty: nothing visible
    for (std::string_view piece : split(value, ',')) {
        std::string entry(trimmed(piece));
        if (ze_mask) entry = entry.substr(0, entry.find('.'));  // "1.0" -> device 1 (tile 0)
        if (entry == "-1" || entry == "NoDevFiles") return {};
        int position = -1;
        if (is_uuid(entry)) {
            std::optional<std::string> pci = resolver ? resolver(entry) : std::nullopt;
            if (!pci) {
                warnings.push_back(var + " entry '" + entry +
                                   "' is a UUID and NVML is not available to resolve it; "
                                   "falling back to local-rank order over all accelerators");
                return {};
            }
            for (int idx : pool)
                if (accs[idx].pci == *pci && accs[idx].sub_index == 0) position = idx;
            if (position < 0) {
                throw UsageError(var + " entry '" + entry + "' is device " + *pci +
                                 ", which is not an accelerator in the topology");
            }
            out.push_back(position);
            continue;
        }
        int n;
        try {
            n = parse_nonnegative(entry, var + " entry");
        } catch (const UsageError&) {
            throw UsageError("invalid " + var + " entry '" + entry + "' in '" + value +
                             "' (expected device indexes or GPU-/MIG- UUIDs, comma-separated)");
        }
        if (n >= static_cast<int>(pool.size())) {
            throw UsageError(var + " entry " + std::to_string(n) + " out of range (" +
                             std::to_string(pool.size()) + " device(s) on this node)");
        }
        out.push_back(pool[n]);
    }
    // A device listed twice is one device.
    std::vector<int> unique;
    for (int d : out)
        if (std::find(unique.begin(), unique.end(), d) == unique.end()) unique.push_back(d);
    return unique;
}

}  // namespace

VisibleDevices visible_from_env(const std::vector<Accelerator>& accs, const EnvLookup& env,
                                const UuidResolver& resolver) {
    VisibleDevices v;
    if (auto cuda = env(kCudaVisibleDevices)) {
        v.source = kCudaVisibleDevices;
        v.indexes = resolve(v.source, *cuda, runtime_devices(accs, Vendor::Nvidia), accs, resolver, v.warnings, false);
        v.restricted = v.warnings.empty();
        return v;
    }
    auto rocr = env(kRocrVisibleDevices);
    auto hip = env(kHipVisibleDevices);
    if (rocr || hip) {
        std::vector<int> pool = runtime_devices(accs, Vendor::Amd);
        if (rocr) {
            v.source = kRocrVisibleDevices;
            pool = resolve(v.source, *rocr, pool, accs, resolver, v.warnings, false);
        }
        if (hip && v.warnings.empty()) {
            // HIP numbers the devices ROCr left visible.
            v.source = rocr ? std::string(kRocrVisibleDevices) + "+" + kHipVisibleDevices : kHipVisibleDevices;
            pool = resolve(kHipVisibleDevices, *hip, pool, accs, resolver, v.warnings, false);
        }
        v.indexes = pool;
        v.restricted = v.warnings.empty();
        return v;
    }
    if (auto ze = env(kZeAffinityMask)) {
        v.source = kZeAffinityMask;
        v.indexes = resolve(v.source, *ze, runtime_devices(accs, Vendor::Intel), accs, resolver, v.warnings, true);
        v.restricted = true;
        return v;
    }
    return v;
}

std::vector<int> parse_device_list(const std::string& text, int accelerator_count, const std::string& what) {
    std::vector<int> list = parse_id_list(text, what);
    if (list.empty()) throw UsageError("empty device list (expected physical indexes like 0,1 or 0-3)");
    for (int d : list) {
        if (d >= accelerator_count) {
            throw UsageError("device index " + std::to_string(d) + " in " + what + " '" + text + "' out of range (" +
                             (accelerator_count ? "0-" + std::to_string(accelerator_count - 1)
                                                : std::string("no accelerator found")) +
                             ")");
        }
    }
    return list;
}

}  // namespace numabind
