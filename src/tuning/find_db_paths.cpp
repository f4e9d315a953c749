// Where the find-db lives: the user cache folder (XDG rules) and the system db beside the install.
#include <dlfcn.h>

#include <cstdlib>

#include "core/config.hpp"
#include "galley/core/version.hpp"
#include "galley/tuning/find_db.hpp"

namespace galley::tuning {
namespace {

// Non-GALLEY variables are outside env's table by design; they are read directly.
std::optional<std::filesystem::path> plain_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::filesystem::path(value);
}

}  // namespace

std::filesystem::path default_cache_dir() {
  if (const auto& dir = env::config().cache_dir; !dir.empty()) return dir;
  if (const auto xdg = plain_env("XDG_CACHE_HOME")) return *xdg / "galley";
  if (const auto home = plain_env("HOME")) return *home / ".cache" / "galley";
  // No home at all (some batch systems): the working folder is better than failing.
  return std::filesystem::path(".galley-cache");
}

std::filesystem::path default_system_db_path() {
  // The folder of libgalley itself, found from the address of one of its functions, so an install
  // anywhere (prefix/lib/libgalley.so -> prefix/share/galley) finds its shipped db.
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&default_system_db_path), &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  std::error_code ec;
  auto lib = std::filesystem::weakly_canonical(std::filesystem::path(info.dli_fname), ec);
  if (ec) lib = info.dli_fname;
  return lib.parent_path().parent_path() / "share" / "galley" / "finddb.sqlite";
}

FindDbPaths default_find_db_paths() {
  return FindDbPaths{default_cache_dir() / "finddb.sqlite", default_system_db_path()};
}

}  // namespace galley::tuning
