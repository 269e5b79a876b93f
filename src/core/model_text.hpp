// The planner's node model (topology.hpp) as text and back: what the step engine keeps in
// its per-boot model cache, so that a step that finds it never initialises hwloc. A line
// format, read without a document tree: under memory pressure nothing but the model's own
// vectors allocates, and an allocation failure is an ordinary std::bad_alloc (a JSON tree's
// destructor allocates, and would end slurmstepd).
//
//   numabind-model 2
//   cache_level <name>
//   core <pus> <l3 index> <package index>
//   l3 <pus>
//   package <os index> <pus>
//   numa <os index> <pus|-> <locality|-> <subtype, rest of line>
//   pci <address> <vendor> <device> <class> <machine level 0|1> <l3 index> <locality|-> <os devices a,b|-> <bridges a,b|-> <name, rest of line>
//   net <rdma 0|1> <ports n=state,...|-> <subtype|-> <name, rest of line>   (of the pci line above)
//   distance <from os> <to os> <value>
//   end <lines before this one> <FNV-1a 64 of the text before this line, 16 hex digits>
// The end line makes a file cut short (even at a line boundary) or changed an error, not a
// smaller model; ModelLimits bound what a damaged or hostile file can cost.
#pragma once

#include <string>
#include <string_view>

#include "numabind/topology.hpp"

namespace numabind {

// What a model may hold: ids within the machine's possible CPUs and NUMA nodes, and a size
// cap, so that reading one costs no more than the machine it describes.
struct ModelLimits {
    int max_pu = 32767;           // highest PU os index (this machine: /sys/.../cpu/possible)
    int max_node = 4095;          // highest NUMA node os index
    size_t max_bytes = 16 << 20;  // the whole text
    size_t max_pci = 1 << 16;     // PCI devices
};

std::string model_to_text(const Topology& model);
// Throws Error naming the bad line (never returns a half-filled model), or saying that the
// end line is missing or does not match (cut short or changed) or that a limit was passed.
Topology model_from_text(std::string_view text, const ModelLimits& limits = {});

}  // namespace numabind
