// The device-file adapter on a fake /proc and /sys tree, and open(2) probing of real files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "sys/device_files.hpp"

namespace nb = numabind;

namespace {

std::string temp_dir() {
    char tmpl[] = "/tmp/nb-devfiles.XXXXXX";
    const char* d = mkdtemp(tmpl);
    return d ? d : "";
}

void write_file(const std::string& path, const std::string& text) {
    std::system(("mkdir -p '" + path.substr(0, path.rfind('/')) + "'").c_str());
    std::ofstream(path) << text;
}

}  // namespace

TEST(DeviceFiles, NvidiaMinorFromProcDriverInformation) {
    const std::string root = temp_dir();
    write_file(root + "/proc/driver/nvidia/gpus/0000:3b:00.0/information",
               "Model: \t\t NVIDIA H100\nIRQ:   \t\t 150\nGPU UUID: \t GPU-x\nVideo BIOS: \t ??.??\n"
               "Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDevice Minor: \t 5\n");
    EXPECT_EQ(nb::device_file_for_pci("0000:3B:00.0", root, root), "/dev/nvidia5");  // case as the kernel has it
    EXPECT_EQ(nb::device_file_for_pci("3b:00.0", root, root), "/dev/nvidia5");       // domain 0 implied
    EXPECT_EQ(nb::device_file_for_pci("0000:3c:00.0", root, root), "");
    EXPECT_EQ(nb::device_file_for_pci("../../etc", root, root), "");
    std::system(("rm -rf '" + root + "'").c_str());
}

TEST(DeviceFiles, RenderNodeFromSysfsDrm) {
    const std::string root = temp_dir();
    write_file(root + "/sys/bus/pci/devices/0000:c1:00.0/drm/card1/uevent", "");
    write_file(root + "/sys/bus/pci/devices/0000:c1:00.0/drm/renderD129/uevent", "");
    EXPECT_EQ(nb::device_file_for_pci("0000:c1:00.0", root, root), "/dev/dri/renderD129");
    std::system(("rm -rf '" + root + "'").c_str());
}

TEST(DeviceFiles, ProbeTellsHeldFromMissing) {
    EXPECT_EQ(nb::probe_device_file("/dev/null").access, nb::DeviceAccess::Held);
    EXPECT_EQ(nb::probe_device_file("/nonexistent/nvidia0").access, nb::DeviceAccess::Missing);
    // a character device with no driver behind its major number: ENXIO, i.e. the cgroup let us in
    const std::string root = temp_dir();
    const std::string dev = root + "/nvidia0";
    if (mknod(dev.c_str(), S_IFCHR | 0666, makedev(195, 250)) == 0) {
        nb::DeviceProbe p = nb::probe_device_file(dev);
        EXPECT_EQ(p.access, nb::DeviceAccess::Held) << p.error;
    }
    if (geteuid() != 0) {
        write_file(root + "/private", "");
        chmod((root + "/private").c_str(), 0);
        EXPECT_EQ(nb::probe_device_file(root + "/private").access, nb::DeviceAccess::Denied);
    }
    std::system(("rm -rf '" + root + "'").c_str());
}

// device_files= entries checked against what the file is: the expected
// verdicts follow from the fake tree built here (minor numbers, sysfs links), not from
// numabind.
TEST(DeviceFiles, CheckAgainstNvidiaMinorAndSysfs) {
    const std::string root = temp_dir();
    const std::string nv3 = root + "/dev/nvidia3", nv5 = root + "/dev/nvidia5", render = root + "/dev/renderD128";
    std::system(("mkdir -p '" + root + "/dev'").c_str());
    if (mknod(nv3.c_str(), S_IFCHR | 0666, makedev(195, 3)) != 0 || mknod(nv5.c_str(), S_IFCHR | 0666, makedev(195, 5)) != 0 ||
        mknod(render.c_str(), S_IFCHR | 0666, makedev(226, 128)) != 0) {
        std::system(("rm -rf '" + root + "'").c_str());
        GTEST_SKIP() << "mknod needs root";
    }
    write_file(root + "/proc/driver/nvidia/gpus/0000:3b:00.0/information", "Model: x\nDevice Minor: \t 5\n");
    using V = nb::DeviceFileVerdict;
    EXPECT_EQ(nb::check_device_file(nv5, "0000:3B:00.0", root, root).verdict, V::Matches);
    nb::DeviceFileCheck wrong = nb::check_device_file(nv3, "0000:3b:00.0", root, root);
    EXPECT_EQ(wrong.verdict, V::Mismatch);
    EXPECT_NE(wrong.detail.find("195:3"), std::string::npos) << wrong.detail;
    EXPECT_NE(wrong.detail.find("5"), std::string::npos) << wrong.detail;
    EXPECT_EQ(nb::check_device_file(root + "/dev/nvidia9", "0000:3b:00.0", root, root).verdict, V::Missing);
    // No driver information for the address and no sysfs entry: cannot be told.
    EXPECT_EQ(nb::check_device_file(nv3, "0000:af:00.0", root, root).verdict, V::Unverifiable);
    // A DRM render node: /sys/dev/char/226:128 leads to its PCI function.
    write_file(root + "/sys/devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0/drm/renderD128/uevent", "");
    std::system(("mkdir -p '" + root + "/sys/dev/char' && ln -s ../../devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0/drm/renderD128 '" +
                 root + "/sys/dev/char/226:128'").c_str());
    EXPECT_EQ(nb::check_device_file(render, "0000:c1:00.0", root, root).verdict, V::Matches);
    nb::DeviceFileCheck other = nb::check_device_file(render, "0000:c2:00.0", root, root);
    EXPECT_EQ(other.verdict, V::Mismatch);
    EXPECT_NE(other.detail.find("0000:c1:00.0"), std::string::npos) << other.detail;
    // Not a device at all.
    write_file(root + "/plain", "x");
    EXPECT_EQ(nb::check_device_file(root + "/plain", "0000:c1:00.0", root, root).verdict, V::Mismatch);

    // What the plugin (and `numabind check`) makes of each of those entries.
    using U = nb::ListedFileUse;
    EXPECT_EQ(nb::listed_file_use(nb::check_device_file(nv5, "0000:3b:00.0", root, root).verdict), U::Use);
    EXPECT_EQ(nb::listed_file_use(nb::check_device_file(nv3, "0000:af:00.0", root, root).verdict), U::UseTrusted);
    EXPECT_EQ(nb::listed_file_use(nb::check_device_file(root + "/dev/nvidia9", "0000:3b:00.0", root, root).verdict),
              U::FindWithout);
    EXPECT_EQ(nb::listed_file_use(wrong.verdict), U::FailStep);
    EXPECT_EQ(nb::listed_file_use(other.verdict), U::FailStep);
    std::system(("rm -rf '" + root + "'").c_str());
}

// One device_files= entry per accelerator; a node without accelerators ignores the list.
TEST(DeviceFiles, ListedFilesFitOnePerAccelerator) {
    EXPECT_TRUE(nb::listed_files_fit(2, 2));
    EXPECT_FALSE(nb::listed_files_fit(1, 2));
    EXPECT_FALSE(nb::listed_files_fit(3, 2));
    EXPECT_TRUE(nb::listed_files_fit(3, 0));
}
