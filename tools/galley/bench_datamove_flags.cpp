#include "bench_datamove_flags.hpp"

#include "strict_options.hpp"

namespace galley::cli {

std::vector<std::int64_t> parse_int_list(std::string_view option, std::string_view text, std::int64_t min,
                                         std::int64_t max) {
  std::vector<std::int64_t> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(',', start);
    const std::string_view entry =
        text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out.push_back(parse_integer(option, entry, min, max));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

DType bench_dtype(const OpBenchFlags& flags) {
  return flags.dtype.empty() ? DType::f32 : parse_dtype(flags.dtype);
}

dnn::Layout bench_layout(const OpBenchFlags& flags) {
  return flags.layout.empty() ? dnn::Layout::nchw : dnn::parse_layout(flags.layout);
}

}  // namespace galley::cli
