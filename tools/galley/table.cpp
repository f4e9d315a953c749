#include "table.hpp"

#include <algorithm>
#include <cstdio>

namespace galley::cli {

void Table::print() const {
  std::vector<std::size_t> widths(headers_.size(), 0);
  for (std::size_t i = 0; i < headers_.size(); ++i) widths[i] = headers_[i].size();
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  const auto print_row = [&](const std::vector<std::string>& row) {
    std::string line = " ";
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += " " + cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - cell.size() + 1, ' ');
    }
    std::printf("%s\n", line.c_str());
  };
  print_row(headers_);
  std::size_t total = 1;
  for (auto w : widths) total += w + 2;
  std::printf("  %s\n", std::string(total - 2, '-').c_str());
  for (const auto& row : rows_) print_row(row);
}

}  // namespace galley::cli
