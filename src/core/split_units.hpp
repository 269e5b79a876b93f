// What the exclusive and the core-complex splits hand out (split_exclusive.cpp,
// split_core_complex.cpp): physical cores inside a home.
#pragma once

#include <string>
#include <vector>

#include "core/plan_stages.hpp"
#include "numabind/idset.hpp"
#include "numabind/topology.hpp"

namespace numabind::planning {

// A unit the exclusive split hands out: a physical core (its PUs inside the home).
struct Unit {
    IdSet pus;
    int l3 = -1;
};

// The physical cores with PUs in `within` (only those PUs), in logical order.
std::vector<Unit> cores_in(const Topology& topo, const IdSet& within);

// The physical cores with a PU in `pus`.
int core_count(const Topology& topo, const IdSet& pus);

// A home in messages: its NUMA nodes, or "the allowed CPUs" when it has none.
std::string describe(const Home& home);

}  // namespace numabind::planning
