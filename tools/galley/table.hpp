// Aligned text tables for people (every subcommand also has --json for machines).
#pragma once

#include <string>
#include <vector>

namespace galley::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  /// Prints headers, a rule and rows, each column padded to its widest cell.
  void print() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace galley::cli
