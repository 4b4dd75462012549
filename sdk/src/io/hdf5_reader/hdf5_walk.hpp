// kx-hdf5-reader's work: an HDF5 file (its bytes) opened with libhdf5 and written to the stream of
// io/hdf5_stream.hpp, every group, dataset and attribute reached through hard links, depth first in
// HDF5's name order. What the caller must not trust is bounded here before it is allocated: names,
// ranks, the number of objects and attributes (by the file's size), a dataset's values (by what the
// file stores and the stream's budget). A problem with one attribute or dataset travels with it (kx
// refuses the file only if it needs that one); a problem with the file's structure is a kx::Error.
#pragma once
#include <string>

#include "io/hdf5_reader/stream_writer.hpp"

namespace kx::io::hdf5_stream {

void walk_hdf5(const std::string& bytes, StreamWriter& out);

}  // namespace kx::io::hdf5_stream
