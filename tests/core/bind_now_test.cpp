// libgalley is linked with -z now (CMakeLists.txt): every symbol is bound at load time, so a new
// process's first call pays no dynamic-linker lookups (7-11 us on the first pick() on the H200's
// host, bench/RESULTS.md session 10). Lazy binding is the linker's default, so a build change could
// bring it back without any other test noticing: this reads libgalley's dynamic section as loaded.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "galley/core/version.hpp"

namespace {

struct Search {
  std::string path;   // the loaded object to read
  bool found = false;
  bool bind_now = false;
};

int inspect(dl_phdr_info* info, std::size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  if (info->dlpi_name == nullptr || search->path != info->dlpi_name) return 0;
  search->found = true;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_DYNAMIC) continue;
    for (auto* d = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + ph.p_vaddr); d->d_tag != DT_NULL; ++d) {
      if (d->d_tag == DT_BIND_NOW) search->bind_now = true;
      if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_BIND_NOW)) search->bind_now = true;
      if (d->d_tag == DT_FLAGS_1 && (d->d_un.d_val & DF_1_NOW)) search->bind_now = true;
    }
  }
  return 1;
}

TEST(Linking, LibgalleyIsBoundAtLoadTime) {
  Dl_info where{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&galley::version_string), &where), 0)
      << "dladdr found no object for galley::version_string";
  ASSERT_NE(where.dli_fname, nullptr);
  Search search;
  search.path = where.dli_fname;
  dl_iterate_phdr(inspect, &search);
  ASSERT_TRUE(search.found) << search.path << " is not among the loaded objects";
  EXPECT_TRUE(search.bind_now) << search.path << " uses lazy binding: link it with -z now";
}

}  // namespace
