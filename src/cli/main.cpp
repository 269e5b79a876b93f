// The numabind command: run (bind, then exec), show, plan, topo.
// Adapter only: option parsing and printing around libnumabind.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/placement_report.hpp"
#include "api/process_report.hpp"
#include "api/task_planner.hpp"
#include "check.hpp"
#include "core/binding_env.hpp"
#include "core/local_rank.hpp"
#include "core/omp.hpp"
#include "core/text.hpp"
#include "core/visible.hpp"
#include "draw.hpp"
#include "hwloc/topology_cache.hpp"
#include "numabind/error.hpp"
#include "numabind/hwloc_topology.hpp"
#include "numabind/plan.hpp"
#include "numabind/report.hpp"
#include "pmix_rank.hpp"
#include "sys/binding.hpp"
#include "xml_probe.hpp"

namespace nb = numabind;

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

// std::cerr writes each << piece separately; ranks started together by mpirun or srun share
// one stderr, so their lines would interleave mid-line. This buffer emits whole lines with
// one write(2) each.
class LineAtomicBuf : public std::streambuf {
public:
    explicit LineAtomicBuf(std::ostream& stream) : stream_(stream), previous_(stream.rdbuf(this)) {}
    // The stream outlives this buffer (iostreams flush at exit, after main's statics are
    // gone): hand it its own buffer back first.
    ~LineAtomicBuf() override {
        flush_line();
        stream_.rdbuf(previous_);
    }
    LineAtomicBuf(const LineAtomicBuf&) = delete;
    LineAtomicBuf& operator=(const LineAtomicBuf&) = delete;

protected:
    int overflow(int c) override {
        if (c == traits_type::eof()) return 0;
        line_.push_back(static_cast<char>(c));
        if (c == '\n') flush_line();
        return c;
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
        for (std::streamsize i = 0; i < n; ++i) overflow(static_cast<unsigned char>(s[i]));
        return n;
    }
    int sync() override { return 0; }  // partial lines wait for their newline

private:
    void flush_line() {
        const char* p = line_.data();
        size_t left = line_.size();
        while (left > 0) {
            ssize_t w = ::write(STDERR_FILENO, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            p += w;
            left -= static_cast<size_t>(w);
        }
        line_.clear();
    }
    std::ostream& stream_;
    std::streambuf* previous_;
    std::string line_;
};

// What the engine needs (TaskRequest, shared with the C API) plus the CLI's own flags.
struct Options : nb::TaskRequest {
    std::string fallback = "fail";
    bool verbose = false;
    bool json = false;
    bool export_cache = false;
    std::string pid;       // show --pid
    bool threads = false;  // show --threads
    std::string draw;      // plan/show --draw FILE
    bool ucx = false;      // run --ucx: UCX_NET_DEVICES from the task's nearest NICs
    bool probe_xml = false;  // topo, plan: load --topology in a child first (xml_probe.hpp)
};

void note(const Options& o, const std::string& msg) {
    if (o.verbose) std::cerr << "numabind: " << msg << "\n";
}

[[noreturn]] void exec_program(const std::vector<std::string>& program) {
    std::vector<char*> argv;
    for (const std::string& a : program) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::cerr.flush();
    execvp(argv[0], argv.data());
    const int err = errno;  // the error message's write may change errno
    std::cerr << "numabind: cannot execute '" << program[0] << "': " << std::strerror(err) << "\n";
    std::exit(err == ENOENT ? 127 : 126);
}

std::unique_ptr<nb::HwlocTopology> load_topology(const Options& o, bool xml_is_this_system) {
    nb::ScopedQuietHwlocPlugins quiet;  // single-threaded here: no dlopen of hwloc's GL/OpenCL plugins
    // topo and plan are how an admin tries a topology= file: hwloc dying on it is reported.
    if (o.probe_xml && !o.topology.empty())
        if (auto died = nb::cli::hwloc_dies_loading(o.topology)) throw nb::Error(*died);
    return nb::load_topology(o.topology, xml_is_this_system, [&](const std::string& m) { note(o, m); });
}

// Everything `run` decides before touching the process (shared with the C API); throws.
nb::TaskPlan plan_this_task(const Options& o, nb::NodePlan& plan_out, std::vector<nb::OmpVariable>* omp = nullptr) {
    const nb::TaskRequest& req = o;
    return nb::plan_this_task(req, plan_out, nb::pmix_rank_source(),
                              [&](const std::string& m) { note(o, m); },
                              [](const std::string& w) { std::cerr << "numabind: warning: " << w << "\n"; }, omp);
}

int cmd_run(const Options& o, const std::vector<std::string>& program) {
    const nb::Mode mode = nb::parse_mode(o.mode);
    (void)nb::parse_mem_policy(o.mem);  // bad values are usage errors before anything else
    if (!o.smt.empty()) (void)nb::parse_smt(o.smt, "--smt");
    if (o.fallback != "fail" && o.fallback != "warn")
        throw nb::UsageError("invalid --fallback '" + o.fallback + "' (valid: fail, warn)");
    if (program.empty()) throw nb::UsageError("run: missing program (usage: numabind run [OPTIONS] -- PROGRAM [ARGS...])");
    if (!o.omp_threads.empty()) (void)nb::parse_threads(o.omp_threads, "--threads");
    const bool omp_torchrun = nb::omp_is_torchrun_default(nb::getenv_lookup);  // before --omp sets anything
    nb::NodePlan plan;
    std::string failure;
    try {
        std::vector<nb::OmpVariable> omp;
        nb::TaskPlan task = plan_this_task(o, plan, &omp);
        for (const std::string& w : task.warnings) std::cerr << "numabind: warning: " << w << "\n";
        for (const std::string& w : plan.warnings) note(o, "warning: " + w);
        if (mode != nb::Mode::None) {
            nb::ApplyResult applied = nb::apply_binding(task);
            for (const std::string& w : applied.warnings) std::cerr << "numabind: warning: " << w << "\n";
            if (!applied.ok) throw nb::Error(applied.error);
        }
        nb::export_binding_env(mode, task, [](const char* k, const std::string& v) { setenv(k, v.c_str(), 1); });
        nb::export_nic_env(task, o.ucx, nb::getenv_lookup("UCX_NET_DEVICES"), nb::getenv_lookup(nb::kUcxMarker),
                           [](const char* k, const std::string& v) { setenv(k, v.c_str(), 1); },
                           [](const char* k) { unsetenv(k); });
        if (!task.nics.empty()) note(o, "rank " + std::to_string(task.local_rank) + ": nics " + nb::nic_names(task.nics));
        if (mode != nb::Mode::None && !omp.empty()) {  // --omp: the user's own values stay
            for (const nb::OmpVariable& v : omp)
                if (!v.kept) setenv(v.name.c_str(), v.value.c_str(), 1);
            note(o, "omp: " + nb::omp_summary(omp));
            if (omp_torchrun && o.omp_threads.empty() && task.cpus.size() > 1)
                std::cerr << "numabind: warning: " << nb::torchrun_omp_notice(static_cast<int>(task.cpus.size()), "--threads N")
                          << "\n";
        }
        if (mode != nb::Mode::None && !o.omp_threads.empty()) {
            setenv("OMP_NUM_THREADS", o.omp_threads.c_str(), 1);
            note(o, "OMP_NUM_THREADS=" + o.omp_threads + " (--threads)");
        }
        note(o, "rank " + std::to_string(task.local_rank) + ": device" + (task.devices.size() > 1 ? "s " : " ") +
                    (task.device ? nb::join_ints(task.devices) + " (first " + task.device->pci + ")" : "-") +
                    ", cpus " + task.cpus.to_string() + ", mems " + nb::join_ints(task.mems) + " (" +
                    nb::to_string(task.mem) + ")");
    } catch (const nb::UsageError&) {
        throw;
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) {
        if (o.fallback == "fail") {
            std::cerr << "numabind: error: " << failure << "\n";
            return kExitFailure;
        }
        std::cerr << "numabind: warning: " << failure << "; running unbound (--fallback warn)\n";
        setenv(nb::kEnvMode, "none", 1);
        unsetenv(nb::kEnvNics);
    }
    exec_program(program);
}

int cmd_plan(const Options& o) {
    const nb::Mode mode = nb::parse_mode(o.mode);
    const nb::MemPolicy mem = nb::parse_mem_policy(o.mem);
    nb::PlanRequest req;
    req.mode = mode;
    req.mem = mem;
    req.ntasks = nb::parse_task_count(o.ntasks, "--ntasks");
    if (req.ntasks < 1) throw nb::UsageError("invalid --ntasks '0' (must be at least 1)");
    auto topo_ptr = load_topology(o, false);
    const nb::HwlocTopology& topo = *topo_ptr;
    auto accs = nb::find_accelerators(topo.model(), nb::make_matcher(o.device_match));
    if (!o.devices.empty()) req.visible_devices = nb::parse_device_list(o.devices, static_cast<int>(accs.size()));
    nb::HwlocTopology::Allowed allowed = topo.allowed();
    req.allowed_cpus = o.allowed_cpus.empty() ? std::move(allowed.cpus) : nb::IdSet::parse(o.allowed_cpus);
    req.allowed_mems = std::move(allowed.mems);
    req.min_cpus = nb::cpus_per_task(o, false);
    req.one_thread_per_core = !o.smt.empty() && nb::parse_smt(o.smt, "--smt");
    if (req.one_thread_per_core) req.min_cpus = nb::min_cpus_one_thread(topo.model(), req.allowed_cpus, req.min_cpus);
    nb::NodePlan plan = nb::plan_node(topo.model(), accs, req);
    if (!o.draw.empty()) {
        std::vector<nb::draw::TaskPaint> tasks;
        for (const nb::TaskPlan& t : plan.tasks) {
            nb::draw::TaskPaint k{"task " + std::to_string(t.local_rank), t.cpus, {}, ""};
            for (int d : t.devices) k.pci.push_back(plan.accelerators.at(static_cast<size_t>(d)).pci);
            if (!t.devices.empty()) k.note = std::string(t.devices.size() > 1 ? "GPUs " : "GPU ") + nb::join_ints(t.devices);
            tasks.push_back(std::move(k));
        }
        nb::draw::draw_placement(o.topology, tasks, "numabind plan --mode " + o.mode + " --ntasks " + o.ntasks, o.draw);
    }
    if (o.json)
        std::cout << nb::plan_to_json(plan).dump(2) << "\n";
    else
        std::cout << nb::plan_to_table(plan);
    return 0;
}

int cmd_topo(const Options& o) {
    if (o.export_cache) {
        if (!o.topology.empty()) throw nb::UsageError("--export-cache writes this machine's topology; drop --topology");
        auto c = nb::cache_options();
        if (!c) throw nb::UsageError("--export-cache: NUMABIND_TOPOLOGY_CACHE=off");
        std::cout << nb::write_topology_cache(*c) << "\n";
        return 0;
    }
    auto topo_ptr = load_topology(o, false);
    const nb::HwlocTopology& topo = *topo_ptr;
    auto accs = nb::find_accelerators(topo.model(), nb::make_matcher(o.device_match));
    if (o.json) {
        nlohmann::ordered_json numa = nlohmann::ordered_json::array();
        for (const nb::NumaNode& n : topo.model().numa_nodes)
            numa.push_back({{"os_index", n.os_index}, {"cpus", n.pus.ids()}, {"subtype", n.subtype}});
        std::cout << nlohmann::ordered_json{{"numa_nodes", numa},
                                    {"accelerators", nb::accelerators_to_json(topo.model(), accs)}}
                         .dump(2)
                  << "\n";
        return 0;
    }
    for (const nb::NumaNode& n : topo.model().numa_nodes)
        std::cout << "numa " << n.os_index << ": cpus " << (n.has_cpus() ? n.pus.to_string() : "(none)")
                  << (n.subtype.empty() ? "" : " [" + n.subtype + "]") << "\n";
    if (accs.empty()) {
        std::cout << "no accelerator found among " << topo.model().pci_devices.size()
                  << " PCI device(s) (use --device-match VVVV[:DDDD] or class=0xCCSS to name them)\n";
        return 0;
    }
    std::cout << nb::accelerators_to_table(topo.model(), accs);
    return 0;
}

// show --pid PID: another running process, read from /proc (process_report).
int cmd_show_pid(const Options& o) {
    const int pid = nb::parse_nonnegative(o.pid, "--pid");
    const nb::ProcessReport r = nb::inspect_report(pid, o.topology, o.device_match, [&](const std::string& m) { note(o, m); });
    if (!o.draw.empty()) {
        nb::draw::TaskPaint k{"pid " + std::to_string(pid) + " (" + r.process.name + ")", r.cpus, {}, ""};
        for (const nb::Accelerator& a : r.devices) k.pci.push_back(a.pci);
        nb::draw::draw_placement(o.topology, {k}, "numabind show --pid " + std::to_string(pid), o.draw);
    }
    if (o.json)
        std::cout << nb::process_report_to_json(r).dump(2) << "\n";
    else
        std::cout << nb::process_report_to_text(r, o.threads);
    return 0;
}

int cmd_show(const Options& o) {
    if (!o.pid.empty()) return cmd_show_pid(o);
    if (o.threads) throw nb::UsageError("--threads needs --pid PID");
    const nb::PlacementReport r = nb::current_placement_report(o.topology, o.device_match, [&](const std::string& m) { note(o, m); });
    if (!o.draw.empty()) {
        nb::draw::TaskPaint k{"pid " + std::to_string(r.pid), r.placement.cpus, {}, ""};
        if (r.device) k.pci.push_back(r.device->pci);
        nb::draw::draw_placement(o.topology, {k}, "numabind show", o.draw);
    }
    if (o.json)
        std::cout << nb::placement_to_json(r).dump(2) << "\n";
    else
        std::cout << nb::placement_to_text(r);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    static LineAtomicBuf stderr_lines(std::cerr);
    // `run` takes its program after "--"; split there so CLI11 never sees its arguments.
    std::vector<std::string> args(argv + 1, argv + argc);
    std::vector<std::string> program;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") {
            program.assign(args.begin() + static_cast<long>(i) + 1, args.end());
            args.resize(i);
            break;
        }
    }

    Options o;
    CLI::App app{"numabind: bind GPU tasks to the CPUs and memory local to their accelerator", "numabind"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "numabind " NUMABIND_VERSION);  // project() in CMakeLists.txt

    auto add_topology = [&](CLI::App* c) {
        c->add_option("--topology", o.topology, "hwloc XML topology instead of discovering this machine");
        c->add_option("--device-match", o.device_match, "accelerator match spec: VVVV[:DDDD] or class=0xCCSS, comma-separated");
    };
    CLI::App* run = app.add_subcommand("run", "bind this process to its accelerator's CPUs and memory, then exec PROGRAM");
    run->add_option("--mode", o.mode, std::string("binding mode: ") + nb::kModeChoices + " (default node)");
    run->add_option("--mem", o.mem, std::string("memory policy: ") + nb::kMemPolicyChoices + " (default prefer)");
    run->add_option("--local-rank", o.local_rank, "this process's rank on the node");
    run->add_option("--ntasks", o.ntasks, "number of tasks on the node");
    run->add_option("--devices", o.devices, "visible physical accelerator indexes, e.g. 0,1");
    run->add_option("--fallback", o.fallback, "when binding fails: fail (default) or warn (run unbound)");
    run->add_option("--rank-source", o.rank_source, "where the local rank comes from: auto (default), env, pmix");
    run->add_option("--cpus-per-task", o.cpus_per_task,
                    "no task gets fewer CPUs: its GPU's node, then the nearest (default under srun: $SLURM_CPUS_PER_TASK)");
    run->add_flag("--ucx", o.ucx, "also set UCX_NET_DEVICES to the task's nearest fabric NICs (unless already set)");
    run->add_option("--smt", o.smt, "hardware threads per core: 1 (the first sibling of each core) or all (default: 1 under srun --hint=nomultithread, else all)");
    run->add_flag("--omp", o.omp,
                  "set OMP_NUM_THREADS (one per core), OMP_PLACES (one place per core) and OMP_PROC_BIND=close "
                  "where not already set");
    run->add_option("--threads", o.omp_threads,
                    "OMP_NUM_THREADS for PROGRAM (1-65536), replacing any value (torchrun sets 1 for its workers)");
    run->add_flag("-v,--verbose", o.verbose, "say which sources were used and the binding");
    add_topology(run);

    CLI::App* show = app.add_subcommand("show", "show this process's (or --pid PID's) CPUs, memory policy and device");
    show->add_flag("--json", o.json, "JSON output");
    show->add_option("--pid", o.pid, "a running process: CPUs per thread, memory, devices, mismatches with its plan");
    show->add_flag("--threads", o.threads, "with --pid: list every thread");
    show->add_option("--draw", o.draw, "also draw the placement with lstopo into FILE (.png, .svg, .pdf; .xml: the styled hwloc XML)");
    add_topology(show);

    CLI::App* plan = app.add_subcommand("plan", "dry run: the binding of every task of a node");
    plan->add_option("--mode", o.mode, std::string("binding mode: ") + nb::kModeChoices)->required();
    plan->add_option("--ntasks", o.ntasks, "number of tasks on the node")->required();
    plan->add_option("--mem", o.mem, std::string("memory policy: ") + nb::kMemPolicyChoices);
    plan->add_option("--devices", o.devices, "visible physical accelerator indexes, e.g. 0,1");
    plan->add_option("--allowed-cpus", o.allowed_cpus, "CPUs the tasks may use, e.g. 0-23 (default: this process's cpuset)");
    plan->add_option("--cpus-per-task", o.cpus_per_task, "no task gets fewer CPUs: its GPU's node, then the nearest");
    plan->add_option("--smt", o.smt, "hardware threads per core: 1 (the first sibling of each core) or all (default)");
    plan->add_flag("--json", o.json, "JSON output");
    plan->add_option("--draw", o.draw, "also draw every task's CPUs and GPUs in its colour with lstopo into FILE (.png, .svg, .pdf; .xml: the styled hwloc XML)");
    add_topology(plan);

    CLI::App* topo = app.add_subcommand("topo", "list accelerators with their NUMA nodes, CPUs and L3 groups");
    topo->add_flag("--json", o.json, "JSON output");
    topo->add_flag("--export-cache", o.export_cache,
                   "discover this machine and write the per-boot topology cache (root; directory "
                   "$NUMABIND_TOPOLOGY_CACHE or /run/numabind); prints its path");
    add_topology(topo);

    nb::check::CheckOptions check_options;
    CLI::App* check = nb::check::add_check_command(app, check_options);

    // CLI11 says only "A subcommand is required" for an unknown verb: name it and the valid ones.
    std::string valid;
    bool known = false;
    const auto verb = std::find_if(args.begin(), args.end(), [](const std::string& a) { return a.empty() || a[0] != '-'; });
    for (const CLI::App* c : app.get_subcommands({})) {
        valid += (valid.empty() ? "" : ", ") + c->get_name();
        known = known || (verb != args.end() && c->check_name(*verb));
    }
    if (args.empty() || (verb != args.end() && !known)) {
        std::cerr << "numabind: " << (args.empty() ? std::string("no command given") : "unknown command '" + *verb + "'")
                  << " (valid: " << valid << ")\n";
        return kExitUsage;
    }

    try {
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        app.parse(reversed);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::string msg = e.what();
        std::cerr << "numabind: " << msg << " (see numabind --help)\n";
        return kExitUsage;
    }

    try {
        if (run->parsed()) return cmd_run(o, program);
        if (!program.empty()) throw nb::UsageError("unexpected arguments after '--' (only 'run' takes a program)");
        if (show->parsed()) return cmd_show(o);
        o.probe_xml = plan->parsed() || topo->parsed();
        if (plan->parsed()) return cmd_plan(o);
        if (topo->parsed()) return cmd_topo(o);
        if (check->parsed()) return nb::check::run_check(check_options);
    } catch (const nb::UsageError& e) {
        std::cerr << "numabind: " << e.what() << "\n";
        return kExitUsage;
    } catch (const std::exception& e) {
        std::cerr << "numabind: error: " << e.what() << "\n";
        return kExitFailure;
    }
    return kExitFailure;
}
