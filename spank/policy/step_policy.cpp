// numabind SPANK plugin: see step_policy.hpp.
#include "step_policy.hpp"

#include <cctype>

namespace numabind::spank {

namespace {

bool shell_step(StepKind k) { return k == StepKind::Batch || k == StepKind::Interactive || k == StepKind::PtyShell; }

const char* kind_name(StepKind k) {
    switch (k) {
        case StepKind::Batch: return "the batch step";
        case StepKind::Interactive: return "the interactive step";
        case StepKind::PtyShell: return "an srun --pty shell";
        default: return "this step";
    }
}

}  // namespace

StepDecision decide_step(const SiteConfig& site, const StepFacts& f) {
    using A = StepDecision::Action;
    StepDecision d;
    d.kind = f.kind;
    if (f.kind == StepKind::Extern) return d;
    // A shell (batch script, salloc's or srun --pty's) is bound only where the site asks:
    // the steps started from it are bound one by one.
    if (shell_step(f.kind) && !site.batch_step) return d;

    d.explicit_choice = f.option_given;
    d.verbose = site.verbose_level > 0 || (f.option_given && f.choice.verbose_level > 0);
    d.detail = site.verbose_level > 1 || (f.option_given && f.choice.verbose_level > 1);
    if (f.option_seen && !f.option_given) {
        d.action = A::OptionError;
        d.message = f.option_error;
        return d;
    }
    d.mode = f.option_given ? f.choice.mode : site.default_mode;
    d.mem = f.option_given && f.choice.mem ? *f.choice.mem : site.mem;
    // --hint=nomultithread always means one thread per core; else smt= of the user, else the site's.
    const bool user = f.option_given;
    d.one_thread_per_core = f.hint_nomultithread || (user && f.choice.one_thread_per_core ? *f.choice.one_thread_per_core
                                                                                          : site.one_thread_per_core);
    d.omp = user && f.choice.omp ? *f.choice.omp : site.omp;
    d.min_cpus_in_cores = f.hint_nomultithread;
    d.ucx = user && f.choice.ucx ? *f.choice.ucx : site.ucx;
    if (d.mode == Mode::None) {
        d.action = f.option_given ? A::ExplicitNone : A::Unbound;
        return d;
    }
    const std::string site_default = "site default " + to_string(d.mode) + " not applied";
    if (!f.option_given && site.respect_user_bind && (f.user_cpu_bind || f.user_mem_bind)) {
        d.action = A::Unbound;
        d.message = std::string(f.user_cpu_bind ? "--cpu-bind" : "--mem-bind") + " given; " + site_default +
                    " (respect_user_bind=yes)";
        return d;
    }
    if (!f.option_given && !f.has_gpus) {
        // Decided before the engine loads: a CPU-only step never depends on it.
        d.action = A::Unbound;
        d.message = std::string("no GPU in ") + kind_name(f.kind) + "; " + site_default;
        return d;
    }
    d.action = A::Bind;
    return d;
}

bool is_shell_program(const std::string& argv0, const std::optional<std::string>& shell) {
    auto base = [](const std::string& path) {
        std::string b = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
        return !b.empty() && b[0] == '-' ? b.substr(1) : b;  // a login shell's "-bash"
    };
    const std::string name = base(argv0);
    if (name.empty()) return false;
    for (const char* sh : {"sh", "bash", "zsh", "ksh", "mksh", "dash", "csh", "tcsh", "fish"})
        if (name == sh) return true;
    return shell && base(*shell) == name;
}

std::string normalise_bind_value(const std::string& value) {
    std::string out;
    for (size_t i = 0; i < value.size(); ++i) {
        const bool at_item = i == 0 || value[i - 1] == ',' || value[i - 1] == ':';
        if (at_item && i + 1 < value.size() && value[i] == '0' && (value[i + 1] == 'x' || value[i + 1] == 'X')) {
            ++i;
            continue;
        }
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(value[i])));
    }
    return out;
}

bool selects_binding(const std::string& value) {
    size_t start = 0;
    while (start <= value.size()) {
        size_t end = value.find(',', start);
        if (end == std::string::npos) end = value.size();
        std::string item = normalise_bind_value(value.substr(start, end - start));
        if (!item.empty() && item != "verbose" && item != "v" && item != "quiet" && item != "q") return true;
        start = end + 1;
    }
    return false;
}

bool typed_not_inherited(const std::optional<std::string>& step_value, const std::optional<std::string>& inherited) {
    if (!step_value) return false;
    if (!inherited) return true;
    return normalise_bind_value(*step_value) != normalise_bind_value(*inherited);
}

}  // namespace numabind::spank
