// Placement pictures: the node's hwloc topology with each task's CPUs and devices styled
// (lstopoStyle infos, legend as lstopoLegend infos), rendered by lstopo. No drawing here.
#pragma once

#include <string>
#include <vector>

#include "draw_style.hpp"

namespace numabind::draw {

// Writes FILE: .png, .svg or .pdf through lstopo, .xml as the styled hwloc XML itself.
// `topology`: an hwloc XML, "" for this machine. Throws UsageError for an unknown
// extension, Error when lstopo is missing or fails.
void draw_placement(const std::string& topology, const std::vector<TaskPaint>& tasks, const std::string& title,
                    const std::string& file);

// The output format for a file name ("png", "svg", "pdf", "xml"); throws UsageError.
std::string format_of(const std::string& file);

}  // namespace numabind::draw
