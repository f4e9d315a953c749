// Small helpers every `galley bench` kind shares: medians, fixed-point text, size lists.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace galley::cli {

/// The median (mean of the middle two for an even count); NaN for an empty list.
double median(std::vector<double> values);

/// `value` with `digits` decimals; "-" for NaN.
std::string fixed(double value, int digits = 3);

/// How many back-to-back calls one timing sample holds so that it lasts about 1 ms (1 to 200),
/// from one warm call's time, exactly as the PyTorch peer (bench/peer_conv.py) sizes its `inner`:
/// a short GPU call timed alone carries its launch round trip. (The tuner samples the same way with
/// a smaller budget, src/tuning/conv_benchmark.cpp.)
int batch_for(double one_call_ms);

/// "64M,256M,1G" -> bytes. Empty items are skipped; a zero size, a malformed item or an empty list
/// throws Error(invalid_argument) quoting `option` and the text.
std::vector<std::size_t> parse_size_list(const std::string& text, const std::string& option = "--sizes");

}  // namespace galley::cli
