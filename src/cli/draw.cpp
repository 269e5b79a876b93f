// Placement pictures (draw.hpp): styles written into an exported hwloc XML, lstopo renders.
#include "draw.hpp"

#include <fcntl.h>
#include <hwloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bounded_io.hpp"
#include "numabind/error.hpp"

namespace numabind::draw {

namespace {

struct TopologyHandle {
    hwloc_topology_t t = nullptr;
    ~TopologyHandle() {
        if (t) hwloc_topology_destroy(t);
    }
};

// lstopo renders within this bound (a hung lstopo is killed with its process group).
constexpr int kLstopoSeconds = 30;

// The picture's new file, created unnamed in the target's directory (O_TMPFILE, or an
// O_EXCL temporary removed on every exit when the file system has no O_TMPFILE) and renamed
// over the target only when complete. The target itself is never opened: a symlink, a FIFO
// or a device in its place is refused, and rename() replaces a name, never what it points
// at. A killed run leaves nothing behind (an O_TMPFILE has no name until committed).
class OutputFile {
public:
    explicit OutputFile(const std::string& target) : target_(target) {
        const size_t slash = target.rfind('/');
        dir_ = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
        name_ = slash == std::string::npos ? target : target.substr(slash + 1);
        // Everything below is relative to this one directory: a swap of the path's
        // directories between the steps cannot move where the file lands.
        dir_fd_ = open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd_ < 0) throw Error("cannot open the directory of '" + target + "': " + std::strerror(errno));
        struct stat st {};
        if (fstatat(dir_fd_, name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
            close(dir_fd_);
            throw UsageError("invalid --draw file '" + target + "': it is " + kind(st.st_mode) +
                             "; not replaced (name a new file or a regular file)");
        }
        fd_ = openat(dir_fd_, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        if (fd_ < 0) {  // no O_TMPFILE here: a named temporary, removed by the destructor
            std::string tmpl = dir_ + "/." + name_ + ".numabind-XXXXXX";
            std::vector<char> buf(tmpl.begin(), tmpl.end());
            buf.push_back('\0');
            fd_ = mkostemp(buf.data(), O_CLOEXEC);
            if (fd_ < 0) {
                const int error = errno;
                close(dir_fd_);
                throw Error("cannot create a file in " + dir_ + ": " + std::strerror(error));
            }
            temp_ = buf.data();
            const mode_t mask = umask(0);
            umask(mask);
            fchmod(fd_, 0666 & ~mask);
        }
    }
    ~OutputFile() {
        // only a named temporary not renamed into place
        if (!temp_.empty()) unlinkat(dir_fd_, temp_.substr(temp_.rfind('/') + 1).c_str(), 0);
        if (fd_ >= 0) close(fd_);
        if (dir_fd_ >= 0) close(dir_fd_);
    }
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;
    int fd() const { return fd_; }

    void commit() {
        if (fsync(fd_) != 0) throw Error("cannot write '" + target_ + "': " + std::strerror(errno));
        std::string from = temp_.empty() ? "" : temp_.substr(temp_.rfind('/') + 1);
        if (from.empty()) {  // give the unnamed file a temporary name, then rename it
            const std::string via = "/proc/self/fd/" + std::to_string(fd_);
            for (unsigned attempt = 0;; ++attempt) {
                from = "." + name_ + ".numabind-" + std::to_string(getpid()) + "-" + std::to_string(attempt);
                if (linkat(AT_FDCWD, via.c_str(), dir_fd_, from.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
                if (errno != EEXIST || attempt > 100) throw Error("cannot write '" + target_ + "': " + std::strerror(errno));
            }
            temp_ = dir_ + "/" + from;
        }
        if (renameat(dir_fd_, from.c_str(), dir_fd_, name_.c_str()) != 0)
            throw Error("cannot write '" + target_ + "': " + std::strerror(errno));
        temp_.clear();
    }

private:
    static std::string kind(mode_t mode) {
        if (S_ISLNK(mode)) return "a symlink";
        if (S_ISFIFO(mode)) return "a FIFO";
        if (S_ISDIR(mode)) return "a directory";
        if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
        return "not a regular file";
    }
    std::string target_, dir_, name_, temp_;
    int dir_fd_ = -1;
    int fd_ = -1;
};

void write_all(int fd, const char* data, size_t size, const std::string& what) {
    while (size > 0) {
        const ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error("cannot write " + what + ": " + std::strerror(errno));
        data += n;
        size -= static_cast<size_t>(n);
    }
}

// The styled XML, written to `out_fd`.
void styled_xml(const std::string& topology, const Styles& styles, const std::string& title, int out_fd, const std::string& out) {
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
    char* xml = nullptr;
    int length = 0;
    if (hwloc_topology_export_xmlbuffer(h.t, &xml, &length, 0) != 0 || !xml)
        throw Error("cannot export the topology for '" + out + "': " + std::strerror(errno));
    const std::unique_ptr<char, void (*)(char*)> keep(xml, [](char* b) { hwloc_free_xmlbuffer(nullptr, b); });
    // length counts the terminating NUL
    write_all(out_fd, xml, length > 0 ? static_cast<size_t>(length) - 1 : 0, "'" + out + "'");
}

// lstopo --input /proc/self/fd/N --of FORMAT --no-factorize - > the new file, its stderr
// passed through, bounded in time.
void run_lstopo(int xml_fd, const std::string& format, int out_fd, const std::string& file) {
    std::vector<std::string> skipped;
    const std::string lstopo = cli::find_program("lstopo", skipped);
    if (lstopo.empty())
        throw Error("--draw needs hwloc's lstopo (with cairo: Debian/Ubuntu package hwloc, RHEL hwloc-gui) in PATH" +
                    (skipped.empty() ? std::string() : "; not run: " + skipped.front()));
    // --no-default-legend: our legend lines only (no date or host name: the same plan draws the same picture)
    const cli::ToolRun run = cli::run_bounded({lstopo, "--input", "/proc/self/fd/" + std::to_string(xml_fd), "--if", "xml",
                                               "--of", format, "--no-factorize", "--no-default-legend", "-"},
                                              kLstopoSeconds, out_fd, true, xml_fd);
    if (!run.started) throw Error(std::string("cannot run ") + lstopo + ": " + std::strerror(errno));
    if (run.timed_out)
        throw Error("lstopo did not write '" + file + "' within " + std::to_string(kLstopoSeconds) + " s; killed");
    if (run.status != 0)
        throw Error("lstopo could not write '" + file + "' (exit status " + std::to_string(run.status) + ")");
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
    OutputFile out(file);
    if (format == "xml") {
        styled_xml(topology, styles, title, out.fd(), file);
    } else {
        // The intermediate XML lives in memory only: nothing to leave in $TMPDIR.
        const int xml_fd = memfd_create("numabind-draw.xml", MFD_CLOEXEC);
        if (xml_fd < 0) throw Error(std::string("memfd_create: ") + std::strerror(errno));
        const std::unique_ptr<int, void (*)(int*)> keep(new int(xml_fd), [](int* fd) { close(*fd); delete fd; });
        styled_xml(topology, styles, title, xml_fd, file);
        run_lstopo(xml_fd, format, out.fd(), file);
    }
    out.commit();
}

}  // namespace numabind::draw
