// What the three front-ends share: the --version flag from the one version source,
// a table of subcommands (help and dispatch come from the same table), and the
// mapping of outcomes to exit codes: 0 success, 1 failure at run time, 2 invalid input.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <iostream>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "popkit/version.h"

namespace popkit::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitInvalid = 2;

inline std::string version_line(const std::string& tool) {
  return fmt::format("{} {} (git {}, {})", tool, kVersion, kGitRevision, kBuildType);
}

inline std::string exit_code_help() {
  return "Exit codes: 0 success, 1 failure at run time, 2 invalid input.";
}

class Tool {
 public:
  Tool(std::string name, const std::string& description)
      : name_(std::move(name)), app_(description, name_) {
    app_.set_version_flag("--version", version_line(name_));
    app_.footer(exit_code_help());
    app_.require_subcommand(0, 1);
  }

  CLI::App& app() { return app_; }

  // Adds a line to --version, computed when asked (poprun: the kernel level).
  void add_version_detail(std::function<std::string()> detail) {
    app_.set_version_flag("--version", [name = name_, detail = std::move(detail)] {
      return version_line(name) + "\n" + detail();
    });
  }
  const std::string& name() const { return name_; }

  // poprun under mpirun: `prefix` goes before every error message ("rank 1: "), `before`
  // runs before a failure is printed and `after` after it, with the exit code (it ends
  // every rank).
  void on_failure(std::function<std::string()> prefix, std::function<void(int)> after,
                  std::function<void()> before) {
    error_prefix_ = std::move(prefix);
    after_failure_ = std::move(after);
    before_failure_ = std::move(before);
  }

  // Adds a verb; `run` is called after parsing when the verb was given and returns the
  // exit code.
  CLI::App* add(const std::string& verb, const std::string& description, std::function<int()> run) {
    CLI::App* sub = app_.add_subcommand(verb, description);
    verbs_.emplace_back(sub, std::move(run));
    return sub;
  }

  int main(int argc, char** argv) {
    try {
      app_.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app_.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app_.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app_.exit(e);
    } catch (const CLI::ParseError& e) {
      app_.exit(e);
      return kExitInvalid;
    }
    for (auto& [sub, run] : verbs_) {
      if (!sub->parsed()) continue;
      try {
        return run();
      } catch (const AgreedError& e) {  // every rank knows; one prints
        if (e.print()) std::cerr << name_ << ": error: " << e.what() << '\n';
        return e.exit_code();
      } catch (const std::bad_alloc&) {
        if (before_failure_) before_failure_();
        // The last resort: poprun estimates the host memory a run needs and refuses
        // it up front (planner/host_memory.h), so this is an estimate that fell short.
        std::cerr << name_ << ": error: " << prefix()
                  << "out of host memory: an allocation failed (std::bad_alloc); "
                     "make the run smaller (datasets, model, replication.factor) or use a "
                     "machine with more memory\n";
        return failed(kExitFailure);
      } catch (const std::exception& e) {  // popkit::Error among them
        if (before_failure_) before_failure_();
        std::cerr << name_ << ": error: " << prefix() << e.what() << '\n';
        return failed(kExitFailure);
      }
    }
    std::cout << app_.help();
    return verbs_.empty() ? kExitOk : kExitInvalid;
  }

 private:
  std::string prefix() const { return error_prefix_ ? error_prefix_() : std::string(); }
  int failed(int code) {
    std::cerr.flush();
    if (after_failure_) after_failure_(code);
    return code;
  }

  std::function<std::string()> error_prefix_;
  std::function<void(int)> after_failure_;
  std::function<void()> before_failure_;
  std::string name_;
  CLI::App app_;
  std::vector<std::pair<CLI::App*, std::function<int()>>> verbs_;
};

}  // namespace popkit::cli
