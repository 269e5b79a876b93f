// Renders plans and accelerator tables for people (tables) and programs (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numabind/plan.hpp"

namespace numabind {

nlohmann::ordered_json plan_to_json(const NodePlan& plan);
std::string plan_to_table(const NodePlan& plan);

nlohmann::ordered_json accelerators_to_json(const Topology& topo, const std::vector<Accelerator>& accs);
std::string accelerators_to_table(const Topology& topo, const std::vector<Accelerator>& accs);

// L3 groups (indexes into Topology::l3_groups) that intersect the given PUs.
std::vector<int> l3_groups_of(const Topology& topo, const IdSet& pus);

// "0,2,3" (the library's own code calls join_ints, which this is).
std::string join(const std::vector<int>& values, const char* sep = ",");

}  // namespace numabind
