// The table of Keras 3's model.summary(): Keras hands its rows to the `rich` library, which draws a
// box table (heavy head, a line between rows) of a fixed total width. This reproduces rich's layout as
// Keras configures it, for text without colour: the column widths (Keras's positions, then rich's
// even reduction to fit the borders and padding), word wrapping inside a cell, and "…" where one word
// is wider than its column.
#pragma once
#include <string>
#include <vector>

namespace kx::core {

struct SummaryColumn {
  std::string header;
  bool right_aligned = false;
};

// line_length: the table's total width in characters, as Keras's summary(line_length); positions:
// where each column ends, as fractions of it (Keras's [0.45, 0.80, 1.0] ...); one per column.
// Each row holds one cell per column. Returns the table's lines, each ending in '\n'.
std::string render_summary_table(int line_length, const std::vector<double>& positions,
                                 const std::vector<SummaryColumn>& columns,
                                 const std::vector<std::vector<std::string>>& rows);

// The lines of one cell of `width` characters (rich's word wrap, overflow "ellipsis"), each exactly
// `width` characters: left- or right-justified. Exposed for tests.
std::vector<std::string> wrap_summary_cell(const std::string& text, int width, bool right_aligned);

// Python's format(n, ",") and Keras's readable_memory_size: "101,770", "397.54 KB".
std::string with_thousands(long long n);
std::string readable_memory_size(double bytes);

}  // namespace kx::core
