// Placement pictures (draw.hpp): styles written into an exported hwloc XML, lstopo renders.
#include "draw.hpp"

#include <hwloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "numabind/error.hpp"

namespace numabind::draw {

namespace {

struct TopologyHandle {
    hwloc_topology_t t = nullptr;
    ~TopologyHandle() {
        if (t) hwloc_topology_destroy(t);
    }
};

// A temporary file removed when this goes out of scope.
struct TempFile {
    std::string path;
    TempFile() {
        const char* dir = std::getenv("TMPDIR");
        std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/numabind-draw-XXXXXX.xml";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        const int fd = mkstemps(buf.data(), 4);
        if (fd < 0) throw Error("cannot create a temporary file in " + std::string(dir && *dir ? dir : "/tmp") + ": " + std::strerror(errno));
        close(fd);
        path = buf.data();
    }
    ~TempFile() { unlink(path.c_str()); }
};

void styled_xml(const std::string& topology, const Styles& styles, const std::string& title, const std::string& out) {
    TopologyHandle h;
    if (hwloc_topology_init(&h.t) != 0) throw Error("hwloc_topology_init failed");
    hwloc_topology_set_io_types_filter(h.t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);  // the GPUs and NICs
    if (!topology.empty() && hwloc_topology_set_xml(h.t, topology.c_str()) != 0)
        throw Error("cannot read topology '" + topology + "': " + std::strerror(errno));
    if (hwloc_topology_load(h.t) != 0) throw Error("cannot load the topology: " + std::string(std::strerror(errno)));
    for (const auto& [os_index, style] : styles.pu) {
        hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(h.t, static_cast<unsigned>(os_index));
        if (pu) hwloc_obj_add_info(pu, "lstopoStyle", style.c_str());
    }
    for (const auto& [pci, style] : styles.pci) {
        hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(h.t, pci.c_str());
        if (!dev) continue;
        hwloc_obj_add_info(dev, "lstopoStyle", style.c_str());
        for (hwloc_obj_t os = dev->io_first_child; os; os = os->next_sibling)  // cuda0, nvml0, rsmi0...
            hwloc_obj_add_info(os, "lstopoStyle", style.c_str());
    }
    hwloc_obj_t root = hwloc_get_root_obj(h.t);
    if (!title.empty()) hwloc_obj_add_info(root, "lstopoLegend", title.c_str());
    for (const std::string& line : styles.legend) hwloc_obj_add_info(root, "lstopoLegend", line.c_str());
    if (hwloc_topology_export_xml(h.t, out.c_str(), 0) != 0)
        throw Error("cannot write '" + out + "': " + std::strerror(errno));
}

std::string find_lstopo() {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        const std::string p = dirs.substr(start, end - start) + "/lstopo";
        if (access(p.c_str(), X_OK) == 0) return p;
        start = end + 1;
    }
    return "";
}

// lstopo --input XML --of FORMAT --no-factorize -f FILE, its stderr passed through.
void run_lstopo(const std::string& xml, const std::string& format, const std::string& file) {
    const std::string lstopo = find_lstopo();
    if (lstopo.empty())
        throw Error("--draw needs hwloc's lstopo (with cairo: Debian/Ubuntu package hwloc, RHEL hwloc-gui) in PATH");
    // --no-default-legend: our legend lines only (no date or host name: the same plan draws the same picture)
    std::vector<std::string> args = {lstopo, "--input", xml, "--if", "xml", "--of", format, "--no-factorize", "--no-default-legend", "-f", file};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw Error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        execv(argv[0], argv.data());
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw Error("lstopo could not write '" + file + "' (exit status " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) + ")");
}

}  // namespace

std::string format_of(const std::string& file) {
    const size_t dot = file.rfind('.');
    const std::string ext = dot == std::string::npos ? "" : file.substr(dot + 1);
    for (const char* f : {"png", "svg", "pdf", "xml"})
        if (ext == f) return ext;
    throw UsageError("invalid --draw file '" + file + "' (its extension chooses the format: .png, .svg, .pdf, .xml)");
}

void draw_placement(const std::string& topology, const std::vector<TaskPaint>& tasks, const std::string& title,
                    const std::string& file) {
    const std::string format = format_of(file);
    const Styles styles = paint(tasks);
    if (format == "xml") return styled_xml(topology, styles, title, file);
    TempFile xml;
    styled_xml(topology, styles, title, xml.path);
    run_lstopo(xml.path, format, file);
}

}  // namespace numabind::draw
