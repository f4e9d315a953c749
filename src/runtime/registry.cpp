// The registry: the one place that knows which backends exist. cpu is built in; cuda and hip are
// plugins found at run time with dlopen. A plugin that cannot load is reported, never fatal.
#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/config.hpp"
#include "galley/core/env.hpp"
#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/runtime/device.hpp"

namespace galley::runtime {

namespace {
constexpr const char* kPluginBackends[] = {"cuda", "hip"};

std::string trim(std::string text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// The folder holding libgalley itself, so plugins installed beside it are found without setup.
std::filesystem::path libgalley_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&libgalley_folder), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(info.dli_fname, ec);
    return (ec ? std::filesystem::path(info.dli_fname) : canonical).parent_path();
  }
  return {};
}
}  // namespace

class Registry {
 public:
  static Registry& instance() {
    static Registry registry;
    return registry;
  }

  void add(std::unique_ptr<Backend> backend) {
    std::lock_guard lock(mutex_);
    for (const auto& b : backends_) {
      if (b->name() == backend->name())
        throw Error(Status::invalid_argument, "backend '" + backend->name() + "' is already registered");
    }
    backends_.push_back(std::move(backend));
  }

  void ensure_loaded() {
    // The first call into the library: every GALLEY_* variable is validated here, before plugins
    // load or any work is queued. A bad value throws on every call (call_once retries after a throw).
    env::check();
    std::call_once(loaded_, [this] { load_all(); });
  }

  std::vector<Device> visible_devices() {
    ensure_loaded();
    std::lock_guard lock(mutex_);
    return devices_;
  }

  std::vector<BackendReport> reports() {
    ensure_loaded();
    std::lock_guard lock(mutex_);
    return reports_;
  }

 private:
  void load_all() {
    add(backends::cpu::make_backend());
    reports_.push_back({"cpu", "built in", true, 1, ""});
    for (const char* name : kPluginBackends) reports_.push_back(load_plugin(name));
    build_device_list();
  }

  BackendReport load_plugin(const std::string& name) {
    BackendReport report{name, "", false, 0, ""};
    const std::string file = "libgalley_backend_" + name + ".so";
    std::vector<std::filesystem::path> folders;
    for (const auto& p : env::config().plugin_path) folders.emplace_back(p);
    folders.push_back(libgalley_folder());
    std::string tried;
    for (const auto& folder : folders) {
      const auto path = folder / file;
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) {
        tried += (tried.empty() ? "" : ", ") + path.string();
        continue;
      }
      report.library = path.string();
      // RTLD_LOCAL: vendor libraries stay private to the plugin. RTLD_NOW: a missing symbol is a
      // load failure we can report, not a crash later.
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* why = dlerror();
        report.reason = std::string("dlopen failed: ") + (why ? why : "unknown error");
        return report;
      }
      using RegisterFn = int (*)(int, char*, std::size_t);
      auto fn = reinterpret_cast<RegisterFn>(dlsym(handle, "galley_plugin_register"));
      if (fn == nullptr) {
        report.reason = "not a Galley plugin (no galley_plugin_register symbol)";
        dlclose(handle);
        return report;
      }
      char error[512] = {0};
      const std::size_t before = backends_.size();
      int rc = 0;
      try {
        rc = fn(kBackendAbiVersion, error, sizeof error);
      } catch (const std::exception& e) {
        rc = -1;
        std::snprintf(error, sizeof error, "%s", e.what());
      } catch (...) {
        // The entry point is extern "C" and must not throw; one that does is refused, not fatal.
        rc = -1;
        std::snprintf(error, sizeof error, "galley_plugin_register threw a non-standard exception");
      }
      if (rc != 0) {
        report.reason = std::string("plugin refused to register: ") + (error[0] ? error : "no reason given");
        // Keep the library mapped: a partially registered plugin may have left callbacks.
        return report;
      }
      if (backends_.size() == before || backends_.back()->name() != name) {
        report.reason = "plugin registered no backend named '" + name + "'";
        return report;
      }
      report.loaded = true;
      Backend& backend = *backends_.back();
      try {
        report.device_count = backend.device_count();
        if (report.device_count == 0) report.reason = backend.unavailable_reason();
      } catch (const std::exception& e) {
        report.device_count = 0;
        report.reason = std::string("device query failed: ") + e.what();
      }
      log::debug("loaded plugin " + path.string() + " with " + std::to_string(report.device_count) + " device(s)");
      return report;
    }
    report.library = file;
    report.reason = "plugin not found (looked for " + tried + ")";
    return report;
  }

  // GALLEY_VISIBLE_DEVICES: comma list of "backend" or "backend:index"; cpu is always visible.
  void build_device_list() {
    const auto& visible = env::config().visible_devices;  // entries validated with the configuration
    const bool filtered = visible.has_value();
    const std::vector<std::string> filter = visible.value_or(std::vector<std::string>{});
    for (const auto& backend : backends_) {
      int count = 0;
      try {
        count = backend->device_count();
      } catch (const std::exception&) {
        count = 0;
      }
      for (int i = 0; i < count; ++i) {
        const std::string indexed = backend->name() + ":" + std::to_string(i);
        bool visible = backend->name() == "cpu" || !filtered;
        for (const auto& f : filter) visible = visible || f == backend->name() || f == indexed;
        if (!visible) continue;
        devices_.push_back(Device(backend->name(), i, &backend->device(i)));
      }
    }
  }

  std::mutex mutex_;
  std::once_flag loaded_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<BackendReport> reports_;
  std::vector<Device> devices_;

};

Device::Device(std::string backend, int index, DeviceImpl* impl)
    : name_(backend == "cpu" ? std::string("cpu") : backend + ":" + std::to_string(index)),
      backend_(std::move(backend)),
      index_(index),
      impl_(impl) {}

void register_backend(std::unique_ptr<Backend> backend) {
  if (!backend) throw Error(Status::invalid_argument, "register_backend: null backend");
  Registry::instance().add(std::move(backend));
}

std::vector<Device> devices() { return Registry::instance().visible_devices(); }

std::vector<BackendReport> backend_reports() { return Registry::instance().reports(); }

Device device(std::string_view name) {
  const auto all = devices();
  std::string wanted(trim(std::string(name)));
  if (wanted == "cpu:0") wanted = "cpu";
  const auto list = [&] {
    std::string names;
    for (const auto& d : all) names += (names.empty() ? "" : ", ") + d.name();
    return names;
  };
  const auto colon = wanted.find(':');
  const std::string backend = wanted.substr(0, colon);
  if (backend != "cpu" && backend != "cuda" && backend != "hip") {
    throw Error(Status::not_found, "unknown device '" + std::string(name) +
                                       "': backend must be cpu, cuda or hip (devices here: " + list() + ")");
  }
  if (colon == std::string::npos && backend != "cpu") {
    for (const auto& d : all) {
      if (d.backend() == backend) return d;
    }
  }
  if (colon != std::string::npos) {
    const std::string index = wanted.substr(colon + 1);
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) {
      throw Error(Status::invalid_argument,
                  "malformed device '" + std::string(name) + "': expected backend:index such as cuda:0");
    }
  }
  for (const auto& d : all) {
    if (d.name() == wanted) return d;
  }
  std::string why;
  for (const auto& r : backend_reports()) {
    if (r.name == backend && !r.reason.empty()) why = " (" + backend + ": " + r.reason + ")";
  }
  throw Error(Status::not_found, "no device '" + std::string(name) + "'" + why + "; devices here: " + list());
}

Device default_device() {
  if (const std::string& wanted = env::config().device; !wanted.empty()) {
    try {
      return device(wanted);
    } catch (const Error& e) {
      throw Error(e.status(), std::string("GALLEY_DEVICE: ") + e.what());
    }
  }
  for (const auto& d : devices()) {
    if (!d.is_cpu()) return d;
  }
  return device("cpu");
}

}  // namespace galley::runtime
