#include "core/model/summary_table.hpp"

#include <cmath>
#include <cstdio>

#include "kx/error.hpp"

namespace kx::core {
namespace {

// Text as a sequence of characters (UTF-8 code points), each taking one cell, as rich counts ASCII and
// most scripts.
using Chars = std::vector<std::string>;

Chars split_chars(const std::string& s) {
  Chars out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0xF0) n = 4;
    else if (c >= 0xE0) n = 3;
    else if (c >= 0xC0) n = 2;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string join(const Chars& c, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to && i < c.size(); ++i) s += c[i];
  return s;
}

bool is_space(const std::string& ch) { return ch == " " || ch == "\t"; }

// rich's ratio_reduce: takes `total` off `values` in proportion to `ratios` (each at most its maximum),
// rounding as Python's round() does (halves to even).
std::vector<int> ratio_reduce(int total, std::vector<int> ratios, const std::vector<int>& maximums,
                              const std::vector<int>& values) {
  for (size_t i = 0; i < ratios.size(); ++i)
    if (maximums[i] == 0) ratios[i] = 0;
  int total_ratio = 0;
  for (int r : ratios) total_ratio += r;
  if (total_ratio == 0) return values;
  int remaining = total;
  std::vector<int> result;
  for (size_t i = 0; i < values.size(); ++i) {
    if (ratios[i] != 0 && total_ratio > 0) {
      const double share = static_cast<double>(ratios[i]) * remaining / total_ratio;
      const int distributed = std::min(maximums[i], static_cast<int>(std::nearbyint(share)));
      result.push_back(values[i] - distributed);
      remaining -= distributed;
      total_ratio -= ratios[i];
    } else {
      result.push_back(values[i]);
    }
  }
  return result;
}

// The widths of the columns with their padding (one space each side), as rich gives a table of
// `line_length` whose columns have Keras's fixed widths: too wide for the borders, they are reduced
// evenly.
std::vector<int> column_widths(int line_length, const std::vector<double>& positions) {
  const int n = static_cast<int>(positions.size());
  std::vector<int> widths;
  int current = 0;
  for (double p : positions) {
    const int w = static_cast<int>(p * line_length) - current;  // Python's int(): toward zero
    require(w >= 4, Status::InvalidArgument,
            "summary line length " + std::to_string(line_length) + " is too small for its columns");
    widths.push_back(w);
    current += w;
  }
  const int max_width = line_length - (n + 1);  // the borders
  int table = 0;
  for (int& w : widths) {
    w = std::min(w + 2, max_width);  // padding, then rich's Measurement.with_maximum
    table += w;
  }
  if (table > max_width) widths = ratio_reduce(table - max_width, std::vector<int>(widths.size(), 1), widths, widths);
  return widths;
}

std::string repeat(const char* s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// A border line: left, the fill over each column, the joints, right.
std::string rule(const char* left, const char* fill, const char* joint, const char* right, const std::vector<int>& widths) {
  std::string line = left;
  for (size_t i = 0; i < widths.size(); ++i) {
    if (i) line += joint;
    line += repeat(fill, widths[i]);
  }
  return line + right + "\n";
}

// One row of cells, as many lines as its tallest cell, cells top-aligned.
std::string row_lines(const std::vector<std::string>& cells, const std::vector<SummaryColumn>& columns,
                      const std::vector<int>& widths, const char* edge) {
  std::vector<std::vector<std::string>> wrapped;
  size_t height = 1;
  for (size_t i = 0; i < cells.size(); ++i) {
    wrapped.push_back(wrap_summary_cell(cells[i], widths[i] - 2, columns[i].right_aligned));
    height = std::max(height, wrapped.back().size());
  }
  std::string out;
  for (size_t line = 0; line < height; ++line) {
    out += edge;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) out += edge;
      out += " ";
      out += line < wrapped[i].size() ? wrapped[i][line] : std::string(static_cast<size_t>(widths[i] - 2), ' ');
      out += " ";
    }
    out += edge;
    out += "\n";
  }
  return out;
}

}  // namespace

std::vector<std::string> wrap_summary_cell(const std::string& text, int width, bool right_aligned) {
  const Chars c = split_chars(text);
  const int w = std::max(width, 1);
  // rich's divide_line without folding: words (leading and trailing blanks kept with them) go on the
  // line while they fit; a word wider than the line gets a line of its own, cut later.
  std::vector<size_t> breaks;
  int offset = 0;
  for (size_t i = 0; i < c.size();) {
    const size_t start = i;
    while (i < c.size() && is_space(c[i])) ++i;
    if (i == c.size()) break;  // only blanks left: part of the last word
    while (i < c.size() && !is_space(c[i])) ++i;
    const int word_length = static_cast<int>(i - start);
    while (i < c.size() && is_space(c[i])) ++i;
    const int full_length = static_cast<int>(i - start);
    if (w - offset >= word_length) {
      offset += full_length;
    } else if (word_length > w || (offset && start)) {
      if (start) breaks.push_back(start);
      offset = full_length;
    }
  }
  breaks.push_back(c.size());
  std::vector<std::string> lines;
  size_t from = 0;
  for (size_t to : breaks) {
    Chars line(c.begin() + static_cast<std::ptrdiff_t>(from), c.begin() + static_cast<std::ptrdiff_t>(to));
    from = to;
    // rstrip_end: blanks beyond the width go.
    while (static_cast<int>(line.size()) > w && is_space(line.back())) line.pop_back();
    if (right_aligned)
      while (!line.empty() && is_space(line.back())) line.pop_back();
    if (static_cast<int>(line.size()) > w) {  // overflow "ellipsis"
      line.resize(static_cast<size_t>(w - 1));
      line.push_back("\u2026");
    }
    const std::string body = join(line, 0, line.size());
    const std::string pad(static_cast<size_t>(w) - line.size(), ' ');
    lines.push_back(right_aligned ? pad + body : body + pad);
  }
  return lines;
}

std::string render_summary_table(int line_length, const std::vector<double>& positions,
                                  const std::vector<SummaryColumn>& columns,
                                  const std::vector<std::vector<std::string>>& rows) {
  require(positions.size() == columns.size() && !columns.empty(), Status::Internal, "summary table: bad columns");
  const std::vector<int> widths = column_widths(line_length, positions);
  std::vector<std::string> header;
  for (const auto& col : columns) header.push_back(col.header);
  std::string out = rule("\u250f", "\u2501", "\u2533", "\u2513", widths);  // ┏━┳┓
  out += row_lines(header, columns, widths, "\u2503");                      // ┃
  out += rule("\u2521", "\u2501", "\u2547", "\u2529", widths);              // ┡━╇┩
  for (size_t r = 0; r < rows.size(); ++r) {
    if (r) out += rule("\u251c", "\u2500", "\u253c", "\u2524", widths);    // ├─┼┤
    out += row_lines(rows[r], columns, widths, "\u2502");                  // │
  }
  out += rule("\u2514", "\u2500", "\u2534", "\u2518", widths);              // └─┴┘
  return out;
}

std::string with_thousands(long long n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string readable_memory_size(double bytes) {
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  char buf[64];
  for (const char* unit : kUnits) {
    if (bytes / 1024 < 1) {
      std::snprintf(buf, sizeof buf, "%.2f %s", bytes, unit);
      return buf;
    }
    bytes /= 1024;
  }
  std::snprintf(buf, sizeof buf, "%.2f PB", bytes);
  return buf;
}

}  // namespace kx::core
