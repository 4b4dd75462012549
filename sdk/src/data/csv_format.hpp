// CSV text with a header row and numeric cells, parsed from memory (the file reader and the fuzzer
// share it).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kx::data {

struct CsvTable {
  std::vector<std::string> columns;  // the header row's names
  std::vector<double> values;        // rows * columns.size(), row-major
  int64_t rows = 0;
};

// Comma-separated cells, optionally double-quoted (RFC 4180: "" inside quotes is one quote), lines
// ending in \n or \r\n, blank lines ignored. Every data cell must be a finite number. InvalidArgument
// naming `name`, the line (1 = the header) and the column for a bad cell or a row of another width.
CsvTable parse_csv(std::string_view text, const std::string& name);

}  // namespace kx::data
