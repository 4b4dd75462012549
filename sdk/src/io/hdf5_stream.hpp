// The stream kx-hdf5-reader writes and libkx reads (io/hdf5_tree.*): an HDF5 file as libhdf5 sees
// it, reduced to what Keras's files hold. libhdf5 parses the file in that child process, so a file
// that crashes or hangs libhdf5 costs the child, never the caller's process.
//
// Layout (host byte order: both ends run on one machine), after the header "KXH5" and a u32 version:
//   'N' node      u32 parent (kNoParent for the root, which comes first), str name, u8 NodeKind
//   'A' attribute of the last node: str name, u8 AttributeForm, then
//                 Strings: u32 count, count x str | NotString: nothing | Unreadable: str why
//   'D' dataset body of the last node (a dataset), u8 DatasetForm, then
//                 Numbers:    u32 rank, rank x u64 dims, u64 count (their product), count x f32,
//                             u8 has_exact, i64 exact (an integer scalar's value, not rounded to f32)
//                 NotNumbers: u32 rank, rank x u64 dims, i32 HDF5 type class
//                 Unreadable: str why
//   'E' end       u64 number of nodes
//   'X' error     i32 kx status, str message (the whole file is refused; ends the stream)
// str = u32 length, then the bytes. Messages name no file: libkx puts the file's name in front.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kx::io::hdf5_stream {

inline constexpr char kMagic[4] = {'K', 'X', 'H', '5'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kNoParent = 0xffffffffu;

enum class Tag : uint8_t { Node = 'N', Attribute = 'A', Dataset = 'D', End = 'E', Error = 'X' };
enum class NodeKind : uint8_t { Group = 1, Dataset = 2, Other = 3 };
enum class AttributeForm : uint8_t { Strings = 0, NotString = 1, Unreadable = 2 };
enum class DatasetForm : uint8_t { Numbers = 0, NotNumbers = 1, Unreadable = 2 };

// What a file of `file_size` bytes may become. Keras's files are float32 data and names, so the
// stream is about the file's size; float16 data doubles, int8 data quadruples: past 16 times (and a
// floor for small files' names), the file is a bomb (compressed zeros, hard links that repeat a group),
// not weights.
inline constexpr uint64_t max_stream_bytes(uint64_t file_size) { return (uint64_t{1} << 20) + 16 * file_size; }
// Room kept for the error record that ends an over-long stream.
inline constexpr uint64_t kErrorReserve = uint64_t{1} << 16;
// Objects a file can hold: each is reached by a link, a 40-byte symbol-table entry and its name (8
// bytes or more) in a local heap; more means hard links that repeat groups (a cycle), which the
// reader refuses. It also bounds libkx's memory for the tree (a few hundred bytes per object).
inline constexpr uint64_t max_nodes(uint64_t file_size) { return 64 + file_size / 48; }
inline constexpr int kMaxDepth = 64;
inline constexpr int kMaxRank = 32;
inline constexpr uint32_t kMaxName = 1 << 16;
inline constexpr uint32_t kMaxAttributes = 4096;
inline constexpr uint32_t kMaxStrings = 1 << 20;

}  // namespace kx::io::hdf5_stream
