// CRC-32C (Castagnoli), the checksum of TFRecord files, and TFRecord's masked form of it.
#pragma once
#include <cstdint>
#include <string_view>

namespace kx::io {

uint32_t crc32c(std::string_view data);
// TFRecord stores ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC of data holding CRCs
// does not degenerate.
uint32_t masked_crc32c(std::string_view data);

}  // namespace kx::io
