// gpu.conv.gemm_1x1_tc: NHWC 1x1 convolutions of unit stride, no padding and one group, forward and
// backward data, as one product on gpu.gemm.tc's kernel. With pixels as rows and channels
// contiguous, both directions are plain row-major GEMMs over every image at once:
//   forward        y[pixels][K]  = x[pixels][C]  * w[K][C]^T   (w read K-major, as stored)
//   backward data  dx[pixels][C] = dy[pixels][K] * w[K][C]     (w read N-major, as stored)
// so no filter transform or im2col runs, and on Hopper the product takes the GEMM's TMA-fed wgmma
// tiles. Backward data with a stride (a ResNet downsample) touches only dx's stride grid: the
// product of dy's pixels goes compact into the workspace and one pass scatters it, zeros between.
// The GEMM's tiles are the tuner's configs (their text as gpu.gemm.tc's); a forward epilogue runs as
// one pass over y after the product.
#include <cstdint>
#include <memory>
#include <string>

#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"
#include "conv_epilogue.hpp"
#include "conv_solvers.hpp"
#include "dnn/conv_backward_args.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "gemm_kernels.hpp"
#include "gemm_solvers.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::ConvArgs;
using dnn::ConvDirection;
using dnn::ConvProblem;

bool strided(const ConvProblem& p) { return p.stride_h != 1 || p.stride_w != 1; }

/// The product a problem is: X (pixels x reduction) times Y, into pixels x out channels (dy's
/// pixels, the compact stride grid of dx, for a strided backward data).
dnn::GemmCall gemm_of(const ConvProblem& p) {
  dnn::GemmCall c;
  c.m = p.n * p.out_h() * p.out_w();
  if (p.direction == ConvDirection::forward) {
    c.n = p.k, c.k = p.c;
    c.trans_y = true;  // w stored K x C: n x k
    c.ldx = p.c, c.ldy = p.c, c.ldo = p.k;
  } else {
    c.n = p.c, c.k = p.k;
    c.ldx = p.k, c.ldy = p.c, c.ldo = p.c;  // w stored K x C: k x n
  }
  return c;
}

class Gemm1x1TcSolver final : public dnn::TunableSolver<ConvProblem, GemmTile> {
 public:
  using dnn::TunableSolver<ConvProblem, GemmTile>::run;
  using dnn::TunableSolver<ConvProblem, GemmTile>::workspace_bytes;
  explicit Gemm1x1TcSolver(std::string backend) : backend_(std::move(backend)) {}
  std::string_view name() const override { return "gpu.conv.gemm_1x1_tc"; }
  bool implements_fused_parts() const override { return true; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (device.backend() != backend_)
      return Applicability::no("runs on " + backend_ + " devices, not " + device.name());
    if (p.direction == ConvDirection::backward_weights)
      return Applicability::no("forward and backward_data only, not backward_weights");
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)");
    if (p.layout != dnn::Layout::nhwc) return Applicability::no("needs nhwc layout (pixels as rows)");
    if (p.y != 1 || p.x != 1)
      return Applicability::no("filter " + std::to_string(p.y) + "x" + std::to_string(p.x) + " (needs 1x1)");
    if (p.pad_h != 0 || p.pad_w != 0)
      return Applicability::no("needs no padding (x and y pixels one to one)");
    if (strided(p) && p.direction == ConvDirection::forward)
      return Applicability::no("forward needs unit stride (x's pixels read as rows of one matrix)");
    if (p.groups != 1) return Applicability::no("groups " + std::to_string(p.groups) + " (needs 1)");
    if (auto why = gemm_tc_refusal(gemm_of(p), p.dtype, device); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  std::vector<GemmTile> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    return gemm_tc_candidates(gemm_of(p), p.dtype, device);
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device&, const GemmTile&) const override {
    return strided(p) ? compact_bytes(p) : 0;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a,
           const GemmTile& tile) const override {
    const dnn::GemmCall c = gemm_of(p);
    const void *x = a.x, *w = a.w;
    void* out = a.y;
    void* dx = nullptr;
    if (p.direction == ConvDirection::backward_data) {
      const dnn::BackwardDataArgs t = dnn::backward_data_args(a);
      x = t.dy, w = t.w, out = t.dx;
      if (strided(p)) {
        if (a.workspace_bytes < compact_bytes(p))
          throw Error(Status::invalid_argument, std::string(name()) + ": workspace of " +
                                                    std::to_string(a.workspace_bytes) + " bytes, needs " +
                                                    std::to_string(compact_bytes(p)));
        dx = out, out = a.workspace;
      }
    }
    stream.launch(std::string(name()), [&] {
      ScopedDevice device(stream.device().index());
      void* s = stream.native_handle();
      // 16-byte copies need 16-byte aligned operands; a caller's view at an odd offset takes the
      // SIMT kernel, which reads elements.
      if (((reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(w)) & 15) != 0)
        launch_gemm_simt(c, p.dtype, x, w, out, nullptr, s);
      else
        launch_gemm_tc(c, p.dtype, tile, x, w, out, nullptr, s);
      if (dx != nullptr) launch_scatter_stride_grid(make_params(p), out, dx, s);
      if (p.has_epilogue()) launch_conv_epilogue(p, out, a.bias, a.residual, s);
    });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const dnn::GemmCall c = gemm_of(p);
    const std::vector<GemmTile> tiles = candidates(p, device);
    return std::string("one ") + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
           " product on gpu.gemm.tc" + (tiles.empty() ? "" : ", tile " + tiles.front().to_string()) +
           (strided(p) ? ", scattered onto dx's stride grid" : "") +
           (p.has_epilogue() ? ", then the epilogue pass" : "");
  }

 private:
  static std::size_t compact_bytes(const ConvProblem& p) {
    return std::size_t(p.n * p.out_h() * p.out_w() * p.c) * size_of(p.dtype);
  }
  std::string backend_;
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_conv_gemm_1x1_tc(std::string_view backend) {
  return std::make_unique<Gemm1x1TcSolver>(std::string(backend));
}

}  // namespace galley::backends::gpu
