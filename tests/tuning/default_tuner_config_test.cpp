// configure_default_tuner(): options set in code before the first op are what the default tuner
// uses (and what a call reports); after its first use it refuses. Runs in its own process (the
// default tuner is process-wide), as a ctest case of its own.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "dnn/conv_grid.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/galley.hpp"

namespace galley {
namespace {

TEST(DefaultTunerConfig, OptionsFromCodeThenRefusedOnceInUse) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("default_tuner_config_" + std::to_string(::getpid()));
  tuning::TunerOptions options;
  options.find.mode = tuning::FindMode::normal;
  options.db_paths.user = dir / "app-finddb.sqlite";
  options.only_solvers = {"cpu.conv.im2col_gemm", "cpu.conv.direct"};
  ASSERT_NO_THROW(tuning::configure_default_tuner(options));

  runtime::Stream stream(runtime::device("cpu"));
  const dnn::ConvProblem p = test::geometry(1, 5, 9, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  const auto hx = dnn::random_tensor(p.dtype, p.x_desc().elements(), 1);
  const auto hw = dnn::random_tensor(p.dtype, p.w_desc().elements(), 2);
  Tensor x = Tensor::empty(stream, p.x_desc()), w = Tensor::empty(stream, p.w_desc());
  Tensor y = Tensor::empty(stream, p.y_desc());
  x.copy_from_host(stream, hx.data(), hx.size());
  w.copy_from_host(stream, hw.data(), hw.size());

  dnn::CallReport first, second;
  dnn::convolution_forward(stream, p, x, w, y, nullptr, &first);
  dnn::convolution_forward(stream, p, x, w, y, nullptr, &second);
  stream.synchronize();
  // Only the configured solvers were candidates; the first call tuned, the second was a hit.
  EXPECT_TRUE(first.solver == "cpu.conv.im2col_gemm" || first.solver == "cpu.conv.direct") << first.solver;
  EXPECT_EQ(first.source, "tuned");
  EXPECT_FALSE(first.tuner_hit);
  EXPECT_EQ(second.solver, first.solver);
  EXPECT_TRUE(second.tuner_hit);
  EXPECT_EQ(second.source, "cache");
  EXPECT_TRUE(std::filesystem::exists(options.db_paths.user)) << "the configured find-db was not used";
  EXPECT_EQ(tuning::default_tuner().options().db_paths.user, options.db_paths.user);

  try {
    tuning::configure_default_tuner(options);
    ADD_FAILURE() << "configured after first use";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("already in use"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace galley
