// Files written so that a crash never leaves half of one: model files, checkpoints, ONNX exports.
#pragma once
#include <string>

namespace kx::io {

// Writes bytes to path so that a crash leaves either the old file or the new one: path.tmp, fsync,
// rename, fsync of the directory. Throws Error(Io) naming the path.
void write_file_durably(const std::string& path, const std::string& bytes);

}  // namespace kx::io
