// cpu.eltwise.direct: binary elementwise ops with broadcasting, forward and backward, over the
// thread pool. Everything walks the merged broadcast geometry (dnn/eltwise_geometry.hpp) in
// segments of consecutive dst elements along its innermost dim, where each input either advances
// with dst (stride 1) or stays on one element (stride 0). So equal shapes are one long segment, a
// scalar or a row vector (NHWC bias) is read in place or as one repeated value, and a channel
// vector (NCHW bias) is one value per H*W segment; any other broadcast is the same loop with the
// outer offsets found per segment. f32 is computed in place; f16/bf16 through small float buffers.
//
// Backward reduces each broadcast input deterministically (the result does not depend on the
// thread count): when the input keeps an outer dim of dst, tasks own distinct values of that dim
// and sum privately; otherwise fixed parts of dst sum into private partials that are added in order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/datamove_shares.hpp"
#include "backends/cpu/eltwise_loops.hpp"
#include "backends/cpu/eltwise_solvers.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "dnn/eltwise_geometry.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::EltwiseArgs;
using dnn::EltwiseGeometry;
using dnn::EltwiseOp;
using dnn::EltwiseProblem;

constexpr std::int64_t kSegment = 1024;           // elements staged at once
constexpr std::int64_t kBlock = 64 * 1024;        // dst elements per parallel task
constexpr std::int64_t kPartialBudget = 1 << 22;  // doubles of private partial sums, all parts together

// Where segment [e, e + n) of dst starts in a and b; n is cut at the end of its innermost row.
struct Segment {
  std::int64_t e = 0, n = 0, a = 0, b = 0;
};

// `longest` is kSegment where values are staged through buffers; dense f32 needs none.
Segment segment_at(const EltwiseGeometry& g, std::int64_t e, std::int64_t end, std::int64_t longest) {
  const int last = g.rank - 1;
  const std::int64_t inner = g.dims[last];
  std::int64_t row = e / inner;
  const std::int64_t col = e - row * inner;
  Segment s{e, std::min({end - e, inner - col, longest}), col * g.a_stride[last], col * g.b_stride[last]};
  for (int k = last - 1; k >= 0 && row > 0; --k) {
    const std::int64_t i = row % g.dims[k];
    row /= g.dims[k];
    s.a += i * g.a_stride[k];
    s.b += i * g.b_stride[k];
  }
  return s;
}

std::int64_t longest_segment(DType dtype) { return dtype == DType::f32 ? kBlock : kSegment; }

// `n` values of `dtype` at `base + offset` as floats: the memory itself for f32, else `buf`. Where
// `stride` is 0 that is one value, which the loops read as x[0] for every element.
const float* load(DType dtype, const void* base, std::int64_t offset, std::int64_t stride, std::int64_t n,
                  float* buf) {
  const std::size_t elem = size_of(dtype);
  const auto* p = static_cast<const unsigned char*>(base) + static_cast<std::size_t>(offset) * elem;
  if (dtype == DType::f32) return reinterpret_cast<const float*>(p);
  if (stride == 0) {
    convert_to_f32(dtype, p, buf, 1);
    return buf;
  }
  convert_to_f32(dtype, p, buf, static_cast<std::size_t>(n));
  return buf;
}

void store(DType dtype, const float* values, void* base, std::int64_t offset, std::int64_t n) {
  auto* p = static_cast<unsigned char*>(base) + static_cast<std::size_t>(offset) * size_of(dtype);
  if (dtype == DType::f32 && reinterpret_cast<const void*>(values) == p) return;
  convert_from_f32(dtype, values, p, static_cast<std::size_t>(n));
}

void forward(const EltwiseProblem& p, const EltwiseArgs& args) {
  const EltwiseGeometry g = dnn::eltwise_geometry(p);
  const int last = g.rank - 1;
  const std::int64_t blocks = (g.elements + kBlock - 1) / kBlock;
  const EltwiseLoops& loops = eltwise_loops();
  parallel_for(0, blocks, [&](std::int64_t lo, std::int64_t hi) {
    thread_local std::vector<float> bufs(3 * kSegment);
    float* xa = bufs.data();
    float* xb = xa + kSegment;
    float* xo = xb + kSegment;
    const std::int64_t end = std::min(hi * kBlock, g.elements);
    for (std::int64_t e = lo * kBlock; e < end;) {
      const Segment s = segment_at(g, e, end, longest_segment(p.dtype));
      const float* x = load(p.dtype, args.a, s.a, g.a_stride[last], s.n, xa);
      const float* y = load(p.dtype, args.b, s.b, g.b_stride[last], s.n, xb);
      float* out = p.dtype == DType::f32 ? static_cast<float*>(args.dst) + s.e : xo;
      loops.forward(p.op, x, g.a_stride[last] != 0, y, g.b_stride[last] != 0, out, s.n, p.alpha, p.beta);
      store(p.dtype, out, args.dst, s.e, s.n);
      e += s.n;
    }
  });
}

struct BackwardContext {
  const EltwiseProblem& p;
  const EltwiseArgs& args;
  const EltwiseGeometry& g;
  const EltwiseLoops& loops;
  bool reads_inputs;
  // A gradient over dy, a or b: the first gradient of a segment, written out, would change what
  // the second reads, so both are staged through buffers as for f16.
  bool outputs_alias_inputs;
};

// The gradients of dst elements [lo, hi) for input `which`, per segment: fn(segment, values,
// factor), the gradients being values[j] * factor.
// With `also` >= 0, the gradient of that input (which has dst's shape) is written on the way, so
// dy is read once for both. With `which_dense` (input `which` has dst's shape too) and f32, the
// values are computed straight into that gradient, as `also`'s are, so fn finds them in place.
template <typename Fn>
void walk_gradients(const BackwardContext& c, int which, int also, bool which_dense, std::int64_t lo,
                    std::int64_t hi, Fn fn) {
  thread_local std::vector<float> bufs(5 * kSegment);
  float *bdy = bufs.data(), *ba = bdy + kSegment, *bb = ba + kSegment, *bo = bb + kSegment,
        *bo2 = bo + kSegment;
  const int last = c.g.rank - 1;
  // What the gradient loops read: mul's gradient of one input is the other; div's of b needs both.
  const auto reads_a = [&](int w) { return c.reads_inputs && w == 1; };
  const auto reads_b = [&](int w) { return c.reads_inputs && (w == 0 || c.p.op == EltwiseOp::div); };
  const bool needs_a = reads_a(which) || (also >= 0 && reads_a(also));
  const bool needs_b = reads_b(which) || (also >= 0 && reads_b(also));
  const bool f32 = c.p.dtype == DType::f32 && !c.outputs_alias_inputs;
  void* which_grad = which == 0 ? c.args.da : c.args.db;
  void* also_grad = also == 0 ? c.args.da : c.args.db;
  const bool x_steps = c.g.a_stride[last] != 0, y_steps = c.g.b_stride[last] != 0;
  // add and sub send dy times a constant to each input: where input `which` is one value for the
  // whole segment (a bias), its share is that constant times the sum of dy, with no pass that
  // writes the products out first.
  const bool additive = c.p.op == EltwiseOp::add || c.p.op == EltwiseOp::sub;
  const bool sums_dy = additive && !which_dense && (which == 0 ? !x_steps : !y_steps);
  // f32 segments that stage nothing (dense gradients written in place, or a bias's sum of dy) run
  // to the end of their row: per-segment work is then paid once per row, not per kSegment.
  const std::int64_t longest = f32 && (which_dense || sums_dy) ? kBlock : kSegment;
  const float add_factor = which == 0 ? c.p.alpha : (c.p.op == EltwiseOp::add ? c.p.beta : -c.p.beta);
  for (std::int64_t e = lo; e < hi;) {
    const Segment s = segment_at(c.g, e, hi, longest);
    const float* dy = load(c.p.dtype, c.args.dy, s.e, 1, s.n, bdy);
    const float* x = needs_a ? load(c.p.dtype, c.args.a, s.a, c.g.a_stride[last], s.n, ba) : nullptr;
    const float* y = needs_b ? load(c.p.dtype, c.args.b, s.b, c.g.b_stride[last], s.n, bb) : nullptr;
    float* out = f32 && which_dense ? static_cast<float*>(which_grad) + s.e : bo;
    float* out2 = f32 ? static_cast<float*>(also_grad) + s.e : bo2;
    if (sums_dy) {
      fn(s, dy, add_factor);
    } else {
      c.loops.gradient(c.p.op, which, c.p.alpha, c.p.beta, dy, x, x_steps, y, y_steps, out, s.n);
      fn(s, out, 1.0f);
    }
    if (also >= 0) {
      c.loops.gradient(c.p.op, also, c.p.alpha, c.p.beta, dy, x, x_steps, y, y_steps, out2, s.n);
      store(c.p.dtype, out2, also_grad, s.e, s.n);
    }
    e += s.n;
  }
}

// The gradient of input `which`, and of input `also` (>= 0: it has dst's shape) in the same pass.
void backward_input(const BackwardContext& c, int which, int also) {
  const EltwiseGeometry& g = c.g;
  const std::int64_t* xs = which == 0 ? g.a_stride : g.b_stride;
  void* grad = which == 0 ? c.args.da : c.args.db;
  const std::int64_t count = which == 0 ? g.a_elements : g.b_elements;
  const int last = g.rank - 1;
  const DType dtype = c.p.dtype;

  if (count == g.elements) {  // not broadcast: a map over dst
    const std::int64_t blocks = (g.elements + kBlock - 1) / kBlock;
    parallel_for(0, blocks, [&](std::int64_t lo, std::int64_t hi) {
      walk_gradients(c, which, also, true, lo * kBlock, std::min(hi * kBlock, g.elements),
                     [&](const Segment& s, const float* v, float) { store(dtype, v, grad, s.e, s.n); });
    });
    return;
  }

  // Adds one segment's gradients into `acc`, which holds x's elements from `base` on.
  const auto accumulate = [&](double* acc, std::int64_t base) {
    return [&, acc, base](const Segment& s, const float* v, float factor) {
      const std::int64_t xo = (which == 0 ? s.a : s.b) - base;
      if (xs[last] == 0) {
        acc[xo] += factor * c.loops.lane_sum(v, s.n);
      } else {
        for (std::int64_t j = 0; j < s.n; ++j) acc[xo + j] += factor * v[j];
      }
    };
  };
  const auto write = [&](const double* acc, std::int64_t base, std::int64_t n) {
    std::vector<float> f(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) f[static_cast<std::size_t>(i)] = static_cast<float>(acc[i]);
    convert_from_f32(dtype, f.data(), static_cast<unsigned char*>(grad) + base * size_of(dtype),
                     static_cast<std::size_t>(n));
  };

  // x keeps dst's outer dim k0: tasks own distinct indices of it, so no two write one element.
  int k0 = -1;
  for (int k = 0; k < g.rank; ++k) {
    if (xs[k] != 0) {
      k0 = k;
      break;
    }
  }
  std::int64_t outer = 1, inner = 1;
  if (k0 >= 0) {
    for (int k = 0; k < k0; ++k) outer *= g.dims[k];
    for (int k = k0 + 1; k < g.rank; ++k) inner *= g.dims[k];
  }
  // Only worth it with enough indices to share out and long runs of dst behind each.
  if (k0 >= 0 && g.dims[k0] >= 4 && inner >= kSegment) {
    const std::int64_t per_index = xs[k0];  // x elements behind one index of dim k0
    // Split as datamove_shares.hpp says, by the bytes of dy and the gradients.
    const std::int64_t indices = g.dims[k0];
    const std::int64_t shares =
        thread_shares(indices, (also >= 0 ? 2 : 1) * g.elements * static_cast<std::int64_t>(size_of(dtype)));
    parallel_for(0, shares, [&](std::int64_t first_share, std::int64_t end_share) {
      std::vector<double> acc(static_cast<std::size_t>(per_index));
      for (std::int64_t i = share_begin(indices, shares, first_share),
                        end = share_begin(indices, shares, end_share);
           i < end; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const std::int64_t base = i * xs[k0];
        for (std::int64_t o = 0; o < outer; ++o) {
          const std::int64_t start = (o * g.dims[k0] + i) * inner;
          walk_gradients(c, which, also, false, start, start + inner, accumulate(acc.data(), base));
        }
        write(acc.data(), base, per_index);
      }
    });
    return;
  }

  // Fixed parts of dst, each summed into its own partials, added part by part.
  std::int64_t parts = std::clamp<std::int64_t>(g.elements / kBlock, 1, 16);
  parts = std::max<std::int64_t>(1, std::min(parts, kPartialBudget / count));
  std::vector<double> partial(static_cast<std::size_t>(parts * count), 0.0);
  const std::int64_t span = (g.elements + parts - 1) / parts;
  parallel_for(0, parts, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t part = lo; part < hi; ++part) {
      const std::int64_t start = part * span;
      const std::int64_t end = std::min(g.elements, start + span);
      walk_gradients(c, which, also, false, start, end, accumulate(partial.data() + part * count, 0));
    }
  });
  for (std::int64_t part = 1; part < parts; ++part) {
    for (std::int64_t i = 0; i < count; ++i)
      partial[static_cast<std::size_t>(i)] += partial[static_cast<std::size_t>(part * count + i)];
  }
  write(partial.data(), 0, count);
}

void backward(const EltwiseProblem& p, const EltwiseArgs& args) {
  const EltwiseGeometry g = dnn::eltwise_geometry(p);
  const auto aliases = [&](const void* grad) {
    return grad != nullptr && (grad == args.dy || grad == args.a || grad == args.b);
  };
  const BackwardContext c{p,
                          args,
                          g,
                          eltwise_loops(),
                          p.op == EltwiseOp::mul || p.op == EltwiseOp::div,
                          aliases(args.da) || aliases(args.db)};
  // One pass over dy where an input has dst's shape (equal shapes, a bias, a residual).
  if (g.a_full()) {
    backward_input(c, 1, 0);
  } else if (g.b_full()) {
    backward_input(c, 0, 1);
  } else {
    backward_input(c, 0, -1);
    backward_input(c, 1, -1);
  }
}

class CpuEltwise final : public dnn::EltwiseSolver {
 public:
  std::string_view name() const override { return "cpu.eltwise.direct"; }

  dnn::Applicability check(const EltwiseProblem&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return dnn::Applicability::no("runs on cpu only, not " + device.name());
    return dnn::Applicability::yes();
  }

  void run(runtime::Stream& stream, const EltwiseProblem& problem, const EltwiseArgs& args) const override {
    stream.launch(name(), [&] {
      stream.host_task([problem, args] {
        if (problem.direction == dnn::EltwiseDirection::forward) {
          forward(problem, args);
        } else {
          backward(problem, args);
        }
      });
    });
  }
};

}  // namespace

std::unique_ptr<dnn::EltwiseSolver> make_eltwise_direct() { return std::make_unique<CpuEltwise>(); }

}  // namespace galley::backends::cpu
