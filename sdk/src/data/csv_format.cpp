#include "data/csv_format.hpp"

#include <charconv>
#include <cmath>

#include "kx/error.hpp"

namespace kx::data {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && (is_blank(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Splits one record into cells, unquoting quoted ones. `pos` moves past the record's line end (a quoted
// cell may span lines). false when the quotes are unbalanced.
bool next_record(std::string_view text, size_t& pos, std::vector<std::string>& cells) {
  cells.clear();
  std::string cell;
  bool quoted = false, was_quoted = false;
  while (pos < text.size()) {
    const char c = text[pos++];
    if (quoted) {
      if (c == '"') {
        if (pos < text.size() && text[pos] == '"') {
          cell += '"';
          ++pos;
        } else {
          quoted = false;
        }
      } else {
        cell += c;
      }
      continue;
    }
    if (c == '"' && trim(cell).empty()) {
      quoted = was_quoted = true;
      cell.clear();
    } else if (c == ',') {
      cells.push_back(was_quoted ? cell : std::string(trim(cell)));
      cell.clear();
      was_quoted = false;
    } else if (c == '\n') {
      break;
    } else {
      cell += c;
    }
  }
  if (quoted) return false;
  cells.push_back(was_quoted ? cell : std::string(trim(cell)));
  return true;
}

bool blank_record(const std::vector<std::string>& cells) { return cells.size() == 1 && trim(cells[0]).empty(); }

}  // namespace

CsvTable parse_csv(std::string_view text, const std::string& name) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a spreadsheet's BOM
  CsvTable t;
  std::vector<std::string> cells;
  size_t pos = 0;
  int64_t line = 0;
  auto where = [&](size_t column) {
    return name + ": line " + std::to_string(line) + ", column " + std::to_string(column + 1) + " ('" +
           t.columns[column] + "')";
  };
  while (pos < text.size()) {
    const size_t start = pos;
    ++line;
    if (!next_record(text, pos, cells))
      fail(Status::InvalidArgument, name + ": line " + std::to_string(line) + ": a quoted cell is not closed");
    // Lines a quoted cell spanned count too.
    for (size_t i = start; i + 1 < pos; ++i) line += text[i] == '\n' ? 1 : 0;
    if (blank_record(cells)) continue;
    if (t.columns.empty()) {
      t.columns = cells;
      continue;
    }
    if (cells.size() != t.columns.size())
      fail(Status::InvalidArgument, name + ": line " + std::to_string(line) + " has " + std::to_string(cells.size()) +
                                        " cells, the header has " + std::to_string(t.columns.size()));
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string_view cell = trim(cells[c]);
      double v = 0;
      const char* end = cell.data() + cell.size();
      auto [ptr, ec] = std::from_chars(cell.data() + (cell.size() > 1 && cell[0] == '+' ? 1 : 0), end, v);
      if (cell.empty()) fail(Status::InvalidArgument, where(c) + " is empty");
      if (ec != std::errc() || ptr != end || !std::isfinite(v))
        fail(Status::InvalidArgument, where(c) + ": '" + std::string(cell) + "' is not a finite number");
      t.values.push_back(v);
    }
    ++t.rows;
  }
  if (t.columns.empty()) fail(Status::InvalidArgument, name + ": empty file (no header row)");
  return t;
}

}  // namespace kx::data
