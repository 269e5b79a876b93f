// The planner's node model (topology.hpp) as text and back: what the step engine keeps in
// its per-boot model cache, so that a step that finds it never initialises hwloc. A line
// format, read without a document tree: under memory pressure nothing but the model's own
// vectors allocates, and an allocation failure is an ordinary std::bad_alloc (a JSON tree's
// destructor allocates, and would end slurmstepd).
//
//   numabind-model 1
//   cache_level <name>
//   core <pus> <l3 index> <package index>
//   l3 <pus>
//   package <os index> <pus>
//   numa <os index> <pus|-> <locality|-> <subtype, rest of line>
//   pci <address> <vendor> <device> <class> <machine level 0|1> <l3 index> <locality|-> <os devices a,b|-> <name, rest of line>
//   distance <from os> <to os> <value>
#pragma once

#include <string>
#include <string_view>

#include "numabind/topology.hpp"

namespace numabind {

std::string model_to_text(const Topology& model);
// Throws Error naming the bad line (never returns a half-filled model).
Topology model_from_text(std::string_view text);

}  // namespace numabind
