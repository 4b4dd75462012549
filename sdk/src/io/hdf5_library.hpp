// libhdf5's C API, opened at run time (never linked: libkx stays small and runs where HDF5 is
// missing). Only the entry points Keras's files need are declared, with the types of HDF5 1.10 and
// later (hid_t is 64-bit there); names are resolved unversioned, so Debian's renamed serial build,
// upstream builds and JetPack's all fit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

namespace kx::io::h5 {

using hid_t = int64_t;
using herr_t = int;
using htri_t = int;
using hsize_t = unsigned long long;
using hssize_t = long long;

// The few constants of HDF5's headers that kx uses (their values are part of HDF5's ABI).
inline constexpr hid_t kDefault = 0;  // H5P_DEFAULT, H5S_ALL, H5E_DEFAULT
inline constexpr unsigned kReadOnly = 0, kTruncate = 2;
inline constexpr int kScopeGlobal = 1;
inline constexpr int kClassInteger = 0, kClassFloat = 1, kClassString = 3;
inline constexpr int kIdGroup = 2, kIdDataset = 5;
inline constexpr int kLinkHard = 0;
inline constexpr int kLayoutVirtual = 3;
inline constexpr int kSpaceScalar = 0;
inline constexpr int kCsetUtf8 = 1;
inline constexpr size_t kVariable = static_cast<size_t>(-1);

// H5G_info_t (unchanged from 1.8 to 1.14).
struct GroupInfo {
  int storage_type;
  hsize_t nlinks;
  int64_t max_corder;
  bool mounted;
};

struct Api {
  herr_t (*open)();
  herr_t (*get_libversion)(unsigned*, unsigned*, unsigned*);
  herr_t (*eset_auto2)(hid_t, void*, void*);
  herr_t (*free_memory)(void*);
  hid_t (*pcreate)(hid_t);
  herr_t (*pclose)(hid_t);
  herr_t (*pset_fapl_core)(hid_t, size_t, unsigned);  // hbool_t: bool or unsigned by build; 0 or 1 fits both
  herr_t (*pset_file_image)(hid_t, void*, size_t);
  int (*pget_external_count)(hid_t);
  int (*pget_layout)(hid_t);
  hid_t (*fopen)(const char*, unsigned, hid_t);
  hid_t (*fcreate)(const char*, unsigned, hid_t, hid_t);
  herr_t (*fflush)(hid_t, int);
  long (*fget_file_image)(hid_t, void*, size_t);
  herr_t (*fclose)(hid_t);
  hid_t (*gopen2)(hid_t, const char*, hid_t);
  hid_t (*gcreate2)(hid_t, const char*, hid_t, hid_t, hid_t);
  herr_t (*gget_info)(hid_t, GroupInfo*);
  herr_t (*gclose)(hid_t);
  htri_t (*lexists)(hid_t, const char*, hid_t);
  // H5Lget_info (1.10) or H5Lget_info2 (1.12 on): both structs start with the link type, and kx reads
  // nothing else of it.
  herr_t (*lget_info)(hid_t, const char*, void*, hid_t);
  long (*lget_name_by_idx)(hid_t, const char*, int, int, hsize_t, char*, size_t, hid_t);
  hid_t (*oopen)(hid_t, const char*, hid_t);
  herr_t (*oclose)(hid_t);
  int (*iget_type)(hid_t);
  htri_t (*aexists)(hid_t, const char*);
  // H5Aiterate2 by name, increasing; the callback's H5A_info_t is not read (its layout is HDF5's).
  herr_t (*aiterate2)(hid_t, int, int, hsize_t*, herr_t (*)(hid_t, const char*, const void*, void*), void*);
  hid_t (*aopen)(hid_t, const char*, hid_t);
  hid_t (*acreate2)(hid_t, const char*, hid_t, hid_t, hid_t, hid_t);
  hid_t (*aget_type)(hid_t);
  hid_t (*aget_space)(hid_t);
  hsize_t (*aget_storage_size)(hid_t);
  herr_t (*aread)(hid_t, hid_t, void*);
  herr_t (*awrite)(hid_t, hid_t, const void*);
  herr_t (*aclose)(hid_t);
  hid_t (*dopen2)(hid_t, const char*, hid_t);
  hid_t (*dcreate2)(hid_t, const char*, hid_t, hid_t, hid_t, hid_t, hid_t);
  hid_t (*dget_type)(hid_t);
  hid_t (*dget_space)(hid_t);
  hid_t (*dget_create_plist)(hid_t);
  hsize_t (*dget_storage_size)(hid_t);
  herr_t (*dread)(hid_t, hid_t, hid_t, hid_t, hid_t, void*);
  herr_t (*dwrite)(hid_t, hid_t, hid_t, hid_t, hid_t, const void*);
  herr_t (*dclose)(hid_t);
  hid_t (*screate)(int);
  hid_t (*screate_simple)(int, const hsize_t*, const hsize_t*);
  int (*sget_simple_extent_ndims)(hid_t);
  int (*sget_simple_extent_dims)(hid_t, hsize_t*, hsize_t*);
  hssize_t (*sget_simple_extent_npoints)(hid_t);
  herr_t (*sclose)(hid_t);
  int (*tget_class)(hid_t);
  size_t (*tget_size)(hid_t);
  htri_t (*tis_variable_str)(hid_t);
  hid_t (*tcopy)(hid_t);
  herr_t (*tset_size)(hid_t, size_t);
  herr_t (*tset_cset)(hid_t, int);
  herr_t (*tclose)(hid_t);
  // HDF5's predefined types and property-list classes: global ids, valid once H5open ran.
  const hid_t* native_float;
  const hid_t* native_int64;
  const hid_t* c_s1;
  const hid_t* ieee_f32le;
  const hid_t* std_i64le;
  const hid_t* file_access_class;
};

// A stretch of HDF5 use. Default builds of libhdf5 are not thread-safe (h5py serialises every call),
// so a session holds kx's one HDF5 lock for its lifetime, and makes HDF5 keep its error stack to
// itself (kx reports errors). The first session opens the library ($KX_HDF5_LIBRARY, else the
// usual sonames) and keeps it for the process; Unsupported naming every file tried when none opens,
// so a session cannot exist without the library.
class Session {
 public:
  Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  const Api& api() const { return *api_; }
  // What was opened: "libhdf5_serial.so.103 (HDF5 1.10.8)".
  const std::string& library() const { return *library_; }

 private:
  std::unique_lock<std::mutex> lock_;
  const Api* api_ = nullptr;
  const std::string* library_ = nullptr;
};

// An HDF5 id and the call that closes it (H5Dclose, H5Gclose, ...), closed when it goes.
class Id {
 public:
  Id() = default;
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Id(Id&& o) noexcept : id_(std::exchange(o.id_, -1)), close_(o.close_) {}
  Id& operator=(Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, -1);
      close_ = o.close_;
    }
    return *this;
  }
  Id(const Id&) = delete;
  ~Id() { reset(); }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

}  // namespace kx::io::h5
