// `galley db import`: FindDb::import_json over a file holding the input, into a db file of this
// process (import refuses a db it cannot write), emptied before each run.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_check.hpp"
#include "galley/tuning/find_db.hpp"

namespace {

// One file per process (libFuzzer's -jobs run several), removed at exit.
struct InputFile {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("galley-fuzz-import-" + std::to_string(::getpid()));
  std::filesystem::path path = (std::filesystem::create_directories(dir), dir / "input.json");
  ~InputFile() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static InputFile input;
  {
    std::ofstream out(input.path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) galley::fuzz::finding("cannot write the input file");
  }
  static galley::tuning::FindDb db(galley::tuning::FindDbPaths{input.dir / "finddb.sqlite", {}});
  if (!db.clear()) galley::fuzz::finding("cannot empty the fuzz db");
  galley::fuzz::expect_result_or_error("FindDb::import_json", [&] {
    const galley::tuning::WriteResult imported = db.import_json(input.path);
    // What import reports must be what the db now holds: rows with the same key, device,
    // versions and rank replace each other, so never more rows than reported, none when refused.
    if (db.rows().size() > imported.rows) galley::fuzz::finding("the db holds more rows than import_json reported");
  });
  return 0;
}
