// Keys travel through the find-db as text: every benchmark problem, in every dtype and layout,
// comes back from a stored row as the same problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "galley/dnn/conv_problem.hpp"
#include "galley/tuning/find_db.hpp"
#include "tuning_fixtures.hpp"

namespace galley::tuning {
namespace {

TEST(FindDbKeys, ProblemsRoundTripThroughStoredRows) {
  std::ifstream file(GALLEY_SOURCE_DIR "/../shared/bench/conv_problems.txt");
  if (!file) GTEST_SKIP() << "shared/bench/conv_problems.txt is not beside the repository";
  std::vector<dnn::ConvProblem> problems;
  for (std::string line; std::getline(file, line);) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    problems.push_back(dnn::ConvProblem::parse_driver_line(line));
  }
  problems.push_back(dnn::ConvProblem{.n = 3, .c = 17, .h = 31, .w = 29, .k = 23, .y = 1, .x = 7, .pad_h = 0,
                                      .pad_w = 3, .stride_h = 2, .stride_w = 1, .dilation_h = 2, .dilation_w = 1});
  testing::TempDir dir;
  FindDb db({dir.path() / "finddb.sqlite", {}});
  const DeviceIdentity id{"Round Trip Device", "sm_90", 132, "13.0", "0.1.0"};
  std::vector<dnn::ConvProblem> all;
  for (auto p : problems) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (dnn::Layout layout : {dnn::Layout::nchw, dnn::Layout::nhwc}) {
        p.dtype = dtype;
        p.layout = layout;
        all.push_back(p);
        db.store(p.key(), id, {FindRecord{"s", 1.0, 0, 0}});
      }
    }
  }
  ASSERT_GT(all.size(), 6u);
  std::set<std::string> stored;
  for (const FindRow& row : db.rows()) {
    const auto parsed = dnn::ConvProblem::parse_key(row.problem);
    EXPECT_EQ(parsed.key(), row.problem);
    EXPECT_NE(std::find(all.begin(), all.end(), parsed), all.end()) << row.problem;
    stored.insert(row.problem);
  }
  std::set<std::string> wanted;
  for (const auto& p : all) wanted.insert(p.key());
  EXPECT_EQ(stored, wanted);
}

}  // namespace
}  // namespace galley::tuning
