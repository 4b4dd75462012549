// Datasets from CSV files: one column is the label, every other column a feature.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "data/csv_format.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"

namespace kx {

Dataset Dataset::from_csv(const std::string& path, const std::string& label_column) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::Io, path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(Status::Io, path + ": cannot read");
  const data::CsvTable t = data::parse_csv(text.view(), path);
  const auto label = std::find(t.columns.begin(), t.columns.end(), label_column);
  if (label == t.columns.end())
    fail(Status::InvalidArgument, path + ": no column named '" + label_column + "' in the header");
  if (std::count(t.columns.begin(), t.columns.end(), label_column) > 1)
    fail(Status::InvalidArgument, path + ": more than one column is named '" + label_column + "'");
  require(t.columns.size() >= 2, Status::InvalidArgument, path + ": no feature column besides the label");
  require(t.rows > 0, Status::InvalidArgument, path + ": no data rows after the header");
  const size_t columns = t.columns.size(), label_at = static_cast<size_t>(label - t.columns.begin());
  std::vector<float> x, y;
  x.reserve(static_cast<size_t>(t.rows) * (columns - 1));
  y.reserve(static_cast<size_t>(t.rows));
  for (int64_t r = 0; r < t.rows; ++r)
    for (size_t c = 0; c < columns; ++c) {
      const float v = static_cast<float>(t.values[static_cast<size_t>(r) * columns + c]);
      (c == label_at ? y : x).push_back(v);
    }
  return from_arrays(x.data(), DType::F32, {t.rows, static_cast<int64_t>(columns - 1)}, y.data(), DType::F32, {t.rows});
}

}  // namespace kx
