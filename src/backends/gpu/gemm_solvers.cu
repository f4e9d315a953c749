// The single-source GPU gemm solvers (check / workspace / run glue over gemm_tc.cu and
// gemm_simt.cu): a problem of any direction is lowered to one strided-batched product
// (dnn/gemm_lowering.hpp); backward_weights with a bias adds the column sums of dC.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "conv_device.cuh"
#include "galley/dnn/gemm_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "gemm_kernels.hpp"
#include "gemm_solvers.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::GemmArgs;
using dnn::GemmCall;
using dnn::GemmProblem;

struct GemmDevice {
  int sm_count = 1;
  int arch_major = 0;  // compute capability major on CUDA (9 for sm_90); 0 elsewhere
};

// properties() may query the driver and check() runs on every call: cache per device name.
GemmDevice gemm_device(const runtime::Device& device) {
  static std::mutex mutex;
  static std::map<std::string, GemmDevice> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(device.name()); it != cache.end()) return it->second;
  const runtime::DeviceProperties props = device.properties();
  GemmDevice info;
  info.sm_count = std::max(1, props.compute_units);
  const std::string& arch = props.arch;
  if (arch.rfind("sm_", 0) == 0 && arch.size() >= 5) {
    // "sm_90", "sm_100": the major is every digit but the last.
    info.arch_major = std::atoi(arch.substr(3, arch.size() - 4).c_str());
  }
  cache[device.name()] = info;
  return info;
}

std::size_t reduction_workspace(const GemmProblem& p) {
  return dnn::has_bias_reduction(p) ? column_sums_workspace(p.batch * p.m, p.n) : 0;
}

// What every gpu gemm solver needs; empty when fine, else the reason.
std::string common_no(const GemmProblem& p, const runtime::Device& device, const std::string& backend) {
  if (device.backend() != backend) return "runs on " + backend + " devices, not " + device.name();
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
    return std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)";
  return {};
}

void require_workspace(const std::string& name, const GemmArgs& a, std::size_t needed) {
  if (a.workspace_bytes < needed)
    throw Error(Status::invalid_argument, name + ": workspace of " + std::to_string(a.workspace_bytes) +
                                              " bytes, needs " + std::to_string(needed));
}

// Enqueues the product (by `product`) and, for backward_weights with a bias, the column sums.
template <typename Product>
void enqueue(runtime::Stream& stream, const std::string& name, const GemmProblem& p, const GemmArgs& a,
             Product product) {
  require_workspace(name, a, reduction_workspace(p));
  const GemmCall c = dnn::lower_gemm(p);
  stream.launch(name, [&] {
    ScopedDevice device(stream.device().index());
    void* s = stream.native_handle();
    product(c, dnn::gemm_pointer(a, c.x_role), dnn::gemm_pointer(a, c.y_role),
            const_cast<void*>(dnn::gemm_pointer(a, c.out_role)), c.bias ? a.bias : nullptr, s);
    if (dnn::has_bias_reduction(p))
      launch_column_sums(p.dtype, a.dc, p.batch * p.m, p.n, a.dbias, a.workspace, s);
  });
}

class TcSolver final : public dnn::TunableSolver<GemmProblem, GemmTile> {
 public:
  explicit TcSolver(std::string backend) : backend_(std::move(backend)) {}
  // The config-less forms (list order, a named solver) run the first candidate.
  using dnn::TunableSolver<GemmProblem, GemmTile>::run;
  using dnn::TunableSolver<GemmProblem, GemmTile>::workspace_bytes;
  std::string_view name() const override { return "gpu.gemm.tc"; }

  Applicability check(const GemmProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, backend_); !why.empty()) return Applicability::no(why);
    if (auto why = gemm_tc_refusal(dnn::lower_gemm(p), p.dtype, device); !why.empty())
      return Applicability::no(why);
    return Applicability::yes();
  }

  // The tuner times them all.
  std::vector<GemmTile> candidates(const GemmProblem& p, const runtime::Device& device) const override {
    return gemm_tc_candidates(dnn::lower_gemm(p), p.dtype, device);
  }

  std::size_t workspace_bytes(const GemmProblem& p, const runtime::Device&, const GemmTile&) const override {
    return reduction_workspace(p);
  }

  void run(runtime::Stream& stream, const GemmProblem& p, const GemmArgs& a,
           const GemmTile& tile) const override {
    enqueue(stream, std::string(name()), p, a,
            [&](const GemmCall& c, const void* x, const void* y, void* out, const void* bias, void* s) {
              // 16-byte copies need 16-byte aligned operands; a caller's view at an odd offset
              // (Tensor::wrap) takes the SIMT kernel, which reads elements.
              if (((reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(y)) & 15) != 0) {
                launch_gemm_simt(c, p.dtype, x, y, out, bias, s);
              } else {
                launch_gemm_tc(c, p.dtype, tile, x, y, out, bias, s);
              }
            });
  }

  std::string detail(const GemmProblem& p, const runtime::Device&) const override {
    const GemmCall c = dnn::lower_gemm(p);
    const bool wgmma = !gemm_tc_wgmma_tiles(p.dtype).empty();
    return std::string(p.dtype == DType::f32
                           ? "3xTF32 mma.sync m16n8k8"
                           : (wgmma ? "wgmma m64nNk16 or mma.sync m16n8k16" : "mma.sync m16n8k16")) +
           ", f32 accumulation, " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
           std::to_string(c.k) +
           (c.batch > 1 ? (c.sum_batches ? " summed over " : " x ") + std::to_string(c.batch) : "");
  }

 private:
  std::string backend_;
};

class SimtSolver final : public dnn::GemmSolver {
 public:
  explicit SimtSolver(std::string backend) : backend_(std::move(backend)) {}
  std::string_view name() const override { return "gpu.gemm.simt"; }

  Applicability check(const GemmProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, backend_); !why.empty()) return Applicability::no(why);
    if (auto why = gemm_simt_unfit(dnn::lower_gemm(p)); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const GemmProblem& p, const runtime::Device&) const override {
    return reduction_workspace(p);
  }

  void run(runtime::Stream& stream, const GemmProblem& p, const GemmArgs& a) const override {
    enqueue(stream, std::string(name()), p, a,
            [&](const GemmCall& c, const void* x, const void* y, void* out, const void* bias, void* s) {
              launch_gemm_simt(c, p.dtype, x, y, out, bias, s);
            });
  }

  std::string detail(const GemmProblem&, const runtime::Device&) const override {
    return "128x128x8 tiles, f32 FMA (no TF32)";
  }

 private:
  std::string backend_;
};

}  // namespace

std::string gemm_tc_refusal(const GemmCall& call, DType dtype, const runtime::Device& device) {
  if (!gemm_tc_available()) return "no tensor-core GEMM in this build (mma.sync is NVIDIA's)";
  if (gemm_device(device).arch_major < 8) return "mma.sync needs sm_80 or newer";
  return gemm_tc_unfit(call, dtype);
}

std::vector<GemmTile> gemm_tc_candidates(const GemmCall& call, DType dtype, const runtime::Device& device) {
  std::size_t count = 0;
  const GemmTile* tiles = gemm_tc_tiles(&count);
  std::vector<GemmTile> all = gemm_tc_wgmma_tiles(dtype);
  all.insert(all.end(), tiles, tiles + count);
  // Each tile's time: the waves of blocks the output needs, each wave as long as one block takes
  // while every slot of the device is busy (its area over its share of the device's rate). A
  // product that fills the device many times over takes the fastest tile; one of few output tiles
  // a smaller tile that spreads it over more multiprocessors.
  const std::int64_t batches = call.sum_batches ? 1 : call.batch;
  const int sms = gemm_device(device).sm_count;
  const auto estimate = [&](const GemmTile& t) {
    const GemmTilePace pace = gemm_tc_tile_pace(t, dtype);
    const std::int64_t blocks = (call.m + t.bm - 1) / t.bm * ((call.n + t.bn - 1) / t.bn) * batches;
    const std::int64_t slots = std::int64_t(sms) * pace.blocks_per_sm;
    const std::int64_t waves = (blocks + slots - 1) / slots;
    return double(waves) * t.bm * t.bn * double(slots) / pace.rate;
  };
  std::vector<std::pair<double, GemmTile>> timed;
  for (const GemmTile& t : all) timed.emplace_back(estimate(t), t);
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < timed.size(); ++i) all[i] = timed[i].second;
  return all;
}

std::unique_ptr<dnn::GemmSolver> make_gemm_tc(std::string_view backend) {
  return std::make_unique<TcSolver>(std::string(backend));
}
std::unique_ptr<dnn::GemmSolver> make_gemm_simt(std::string_view backend) {
  return std::make_unique<SimtSolver>(std::string(backend));
}

}  // namespace galley::backends::gpu
