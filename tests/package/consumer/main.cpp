// Uses the installed libnumabind: load an hwloc XML, plan a node, print the plan.
//   consumer TOPOLOGY.xml MODE NTASKS
#include <iostream>
#include <string>

#include "numabind/accelerators.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"
#include "numabind/report.hpp"

int main(int argc, char** argv) {
    if (argc != 4) {
        std::cerr << "usage: consumer TOPOLOGY.xml MODE NTASKS\n";
        return 2;
    }
    try {
        numabind::HwlocTopology topo({argv[1], false});
        auto accs = numabind::find_accelerators(topo.model(), numabind::DeviceMatcher::builtin());
        numabind::PlanRequest req;
        req.mode = numabind::parse_mode(argv[2]);
        req.ntasks = std::stoi(argv[3]);
        req.allowed_cpus = topo.allowed_cpus();
        req.allowed_mems = topo.allowed_mems();
        numabind::NodePlan plan = numabind::plan_node(topo.model(), accs, req);
        std::cout << numabind::plan_to_table(plan);
    } catch (const std::exception& e) {
        std::cerr << "consumer: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
