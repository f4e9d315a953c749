// ref.eltwise: the plainest correct broadcasting binary op, in double. It walks dst's logical
// index and finds each input's element from that input's own descriptor strides (a dim of 1 reads
// the same element all along), so it shares no index code with the solvers it judges.
#include "ref_eltwise.hpp"

#include <vector>

#include "galley/core/error.hpp"
#include "tensor_data.hpp"

namespace galley::dnn {
namespace {

std::vector<double> load(const TensorDesc& d, const void* data) {
  const auto count = static_cast<std::int64_t>(d.bytes() / size_of(d.dtype));
  std::vector<float> f(static_cast<std::size_t>(count));
  to_float(d.dtype, data, f.data(), count);
  return {f.begin(), f.end()};
}

void store(const TensorDesc& d, const std::vector<double>& values, void* data) {
  std::vector<float> f(values.begin(), values.end());
  from_float(d.dtype, f.data(), data, static_cast<std::int64_t>(f.size()));
}

// Walks dst's logical index in row-major order, giving each element's memory offset in dst and
// in the inputs: an input's dims are aligned with dst's trailing dims, and a dim of 1 in an input
// contributes nothing (that input is broadcast along it).
class BroadcastWalk {
 public:
  BroadcastWalk(const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) : out_(out), a_(a), b_(b) {}
  std::int64_t out_offset() const { return offset(out_); }
  std::int64_t a_offset() const { return offset(a_); }
  std::int64_t b_offset() const { return offset(b_); }
  void next() {
    for (int i = out_.rank - 1; i >= 0; --i) {
      if (++idx_[i] < out_.dims[i]) return;
      idx_[i] = 0;
    }
  }

 private:
  std::int64_t offset(const TensorDesc& in) const {
    const int shift = out_.rank - in.rank;
    std::int64_t off = 0;
    for (int i = 0; i < in.rank; ++i) {
      if (in.dims[i] != 1) off += idx_[i + shift] * in.strides[i];
    }
    return off;
  }
  const TensorDesc &out_, &a_, &b_;
  std::int64_t idx_[kMaxRank] = {};
};

double apply(EltwiseOp op, double x, double y) {
  switch (op) {
    case EltwiseOp::add:
      return x + y;
    case EltwiseOp::sub:
      return x - y;
    case EltwiseOp::mul:
      return x * y;
    case EltwiseOp::div:
      return x / y;
  }
  return 0;
}

class RefEltwise final : public EltwiseSolver {
 public:
  std::string_view name() const override { return kRefEltwiseName; }
  bool is_reference() const override { return true; }

  Applicability check(const EltwiseProblem&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const EltwiseProblem& p, const EltwiseArgs& args) const override {
    stream.launch(name(), [&] {
      stream.host_task([p, args] {
        if (p.direction == EltwiseDirection::forward) {
          reference_eltwise_forward(p, args.a, args.b, args.dst);
        } else {
          reference_eltwise_backward(p, args.dy, args.a, args.b, args.da, args.db);
        }
      });
    });
  }
};

}  // namespace

void reference_eltwise_forward(const EltwiseProblem& p, const void* a, const void* b, void* dst) {
  p.validate();
  const TensorDesc ad = p.a_desc(), bd = p.b_desc(), od = p.dst_desc();
  const std::vector<double> av = load(ad, a), bv = load(bd, b);
  std::vector<double> out(od.bytes() / size_of(od.dtype));
  BroadcastWalk walk(od, ad, bd);
  for (std::int64_t e = 0, n = od.elements(); e < n; ++e, walk.next()) {
    out[static_cast<std::size_t>(walk.out_offset())] =
        apply(p.op, double(p.alpha) * av[static_cast<std::size_t>(walk.a_offset())],
              double(p.beta) * bv[static_cast<std::size_t>(walk.b_offset())]);
  }
  store(od, out, dst);
}

void reference_eltwise_backward(const EltwiseProblem& p, const void* dy, const void* a, const void* b,
                                void* da, void* db) {
  p.validate();
  const TensorDesc ad = p.a_desc(), bd = p.b_desc(), od = p.dst_desc();
  const bool reads = p.op == EltwiseOp::mul || p.op == EltwiseOp::div;
  if (reads && (a == nullptr || b == nullptr)) {
    throw Error(Status::invalid_argument,
                std::string("reference_eltwise_backward: ") + to_string(p.op) + " needs a and b");
  }
  const std::vector<double> g = load(od, dy);
  const std::vector<double> av = reads ? load(ad, a) : std::vector<double>{};
  const std::vector<double> bv = reads ? load(bd, b) : std::vector<double>{};
  std::vector<double> ga(ad.bytes() / size_of(ad.dtype)), gb(bd.bytes() / size_of(bd.dtype));
  const double alpha = p.alpha, beta = p.beta;
  BroadcastWalk walk(od, ad, bd);
  for (std::int64_t e = 0, n = od.elements(); e < n; ++e, walk.next()) {
    const auto ia = static_cast<std::size_t>(walk.a_offset()), ib = static_cast<std::size_t>(walk.b_offset());
    const double d = g[static_cast<std::size_t>(walk.out_offset())];
    switch (p.op) {
      case EltwiseOp::add:
        ga[ia] += d * alpha;
        gb[ib] += d * beta;
        break;
      case EltwiseOp::sub:
        ga[ia] += d * alpha;
        gb[ib] -= d * beta;
        break;
      case EltwiseOp::mul:
        ga[ia] += d * (alpha * beta * bv[ib]);
        gb[ib] += d * (alpha * beta * av[ia]);
        break;
      case EltwiseOp::div: {
        // y = (alpha a) / (beta b): dy/da = alpha / (beta b), dy/db = -y / b.
        const double bb = beta * bv[ib];
        ga[ia] += d * (alpha / bb);
        gb[ib] -= d * ((alpha * av[ia]) / bb / bv[ib]);
        break;
      }
    }
  }
  store(ad, ga, da);
  store(bd, gb, db);
}

std::unique_ptr<EltwiseSolver> make_ref_eltwise() { return std::make_unique<RefEltwise>(); }

}  // namespace galley::dnn
