// Placement pictures (`plan --draw`, `show --draw`): which colour each task's CPUs and
// devices get, as lstopo "lstopoStyle" info values, and the legend lines naming the tasks.
// Pure: draw.cpp puts these into an hwloc XML and lstopo renders it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "numabind/idset.hpp"

namespace numabind::draw {

struct TaskPaint {
    std::string label;             // "task 3", "pid 1234"
    IdSet cpus;                    // OS PU indexes
    std::vector<std::string> pci;  // its devices' PCI addresses
    std::string note;              // extra legend text, e.g. "GPU 3"
};

struct Colour {
    std::string hex;   // "#rrggbb"
    std::string name;  // for the legend: lstopo's legend text cannot be coloured
    std::string text;  // readable text colour on it
};
// Distinct colours, cycled when there are more tasks; `shared_colour` marks objects that
// several tasks use (node/socket modes share CPUs, tasks may share a GPU).
const std::vector<Colour>& palette();
const Colour& shared_colour();

// "Background=#rrggbb;Text=#rrggbb"
std::string style_of(const Colour& c);

struct Styles {
    std::map<int, std::string> pu;           // PU os_index -> lstopoStyle
    std::map<std::string, std::string> pci;  // PCI address -> lstopoStyle
    std::vector<std::string> legend;         // one line per task (+ one for shared objects)
};
Styles paint(const std::vector<TaskPaint>& tasks);

}  // namespace numabind::draw
