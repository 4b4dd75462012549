// libFuzzer target for the CSV parser: any text gives a table or a kx::Error, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "data/csv_format.hpp"
#include "kx/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const kx::data::CsvTable t =
        kx::data::parse_csv(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input");
    if (t.values.size() != static_cast<size_t>(t.rows) * t.columns.size()) __builtin_trap();  // the table's invariant
  } catch (const kx::Error&) {
  }
  return 0;
}
