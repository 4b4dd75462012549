#include "io/hdf5_library.hpp"

#include <memory>
#include <optional>
#include <vector>

#include "config/env_switches.hpp"
#include "io/shared_library.hpp"
#include "kx/error.hpp"

namespace kx::io::h5 {

namespace {

// The sonames of HDF5 1.10 to 1.14: Debian's serial build renames libhdf5 (libhdf5_serial.so.103
// is Debian 12's and JetPack's), upstream keeps the name; the unversioned name last (a -dev package).
constexpr const char* kCandidates[] = {"libhdf5_serial.so.103", "libhdf5.so.103", "libhdf5_serial.so.310",
                                       "libhdf5.so.310",        "libhdf5_serial.so.200", "libhdf5.so.200",
                                       "libhdf5_serial.so",     "libhdf5.so"};

struct Loaded {
  std::unique_ptr<SharedLibrary> library;
  Api api{};
  std::string description;
};

// Resolves every entry point; returns why not (empty when all are there). The globals are read only
// after H5open, which initialises them.
std::string resolve(SharedLibrary& lib, Api& a) {
  lib.resolve("H5open", a.open);
  lib.resolve("H5get_libversion", a.get_libversion);
  lib.resolve("H5Eset_auto2", a.eset_auto2);
  lib.resolve("H5free_memory", a.free_memory);
  lib.resolve("H5Pcreate", a.pcreate);
  lib.resolve("H5Pclose", a.pclose);
  lib.resolve("H5Pset_fapl_core", a.pset_fapl_core);
  lib.resolve("H5Pset_file_image", a.pset_file_image);
  lib.resolve("H5Pget_external_count", a.pget_external_count);
  lib.resolve("H5Pget_layout", a.pget_layout);
  lib.resolve("H5Fopen", a.fopen);
  lib.resolve("H5Fcreate", a.fcreate);
  lib.resolve("H5Fflush", a.fflush);
  lib.resolve("H5Fget_file_image", a.fget_file_image);
  lib.resolve("H5Fclose", a.fclose);
  lib.resolve("H5Gopen2", a.gopen2);
  lib.resolve("H5Gcreate2", a.gcreate2);
  lib.resolve("H5Gget_info", a.gget_info);
  lib.resolve("H5Gclose", a.gclose);
  lib.resolve("H5Lexists", a.lexists);
  lib.resolve(lib.symbol("H5Lget_info2") ? "H5Lget_info2" : "H5Lget_info", a.lget_info);
  lib.resolve("H5Lget_name_by_idx", a.lget_name_by_idx);
  lib.resolve("H5Oopen", a.oopen);
  lib.resolve("H5Oclose", a.oclose);
  lib.resolve("H5Iget_type", a.iget_type);
  lib.resolve("H5Aexists", a.aexists);
  lib.resolve("H5Aiterate2", a.aiterate2);
  lib.resolve("H5Aopen", a.aopen);
  lib.resolve("H5Acreate2", a.acreate2);
  lib.resolve("H5Aget_type", a.aget_type);
  lib.resolve("H5Aget_space", a.aget_space);
  lib.resolve("H5Aget_storage_size", a.aget_storage_size);
  lib.resolve("H5Aread", a.aread);
  lib.resolve("H5Awrite", a.awrite);
  lib.resolve("H5Aclose", a.aclose);
  lib.resolve("H5Dopen2", a.dopen2);
  lib.resolve("H5Dcreate2", a.dcreate2);
  lib.resolve("H5Dget_type", a.dget_type);
  lib.resolve("H5Dget_space", a.dget_space);
  lib.resolve("H5Dget_create_plist", a.dget_create_plist);
  lib.resolve("H5Dget_storage_size", a.dget_storage_size);
  lib.resolve("H5Dread", a.dread);
  lib.resolve("H5Dwrite", a.dwrite);
  lib.resolve("H5Dclose", a.dclose);
  lib.resolve("H5Screate", a.screate);
  lib.resolve("H5Screate_simple", a.screate_simple);
  lib.resolve("H5Sget_simple_extent_ndims", a.sget_simple_extent_ndims);
  lib.resolve("H5Sget_simple_extent_dims", a.sget_simple_extent_dims);
  lib.resolve("H5Sget_simple_extent_npoints", a.sget_simple_extent_npoints);
  lib.resolve("H5Sclose", a.sclose);
  lib.resolve("H5Tget_class", a.tget_class);
  lib.resolve("H5Tget_size", a.tget_size);
  lib.resolve("H5Tis_variable_str", a.tis_variable_str);
  lib.resolve("H5Tcopy", a.tcopy);
  lib.resolve("H5Tset_size", a.tset_size);
  lib.resolve("H5Tset_cset", a.tset_cset);
  lib.resolve("H5Tclose", a.tclose);
  lib.resolve("H5T_NATIVE_FLOAT_g", a.native_float);
  lib.resolve("H5T_NATIVE_INT64_g", a.native_int64);
  lib.resolve("H5T_C_S1_g", a.c_s1);
  lib.resolve("H5T_IEEE_F32LE_g", a.ieee_f32le);
  lib.resolve("H5T_STD_I64LE_g", a.std_i64le);
  lib.resolve("H5P_CLS_FILE_ACCESS_ID_g", a.file_access_class);
  if (!lib.problem().empty()) return lib.problem();
  unsigned major = 0, minor = 0, release = 0;
  if (a.open() < 0 || a.get_libversion(&major, &minor, &release) < 0) return lib.file() + ": H5open failed";
  // hid_t became 64-bit in 1.10: older libraries do not fit these declarations.
  if (major != 1 || minor < 10)
    return lib.file() + " is HDF5 " + std::to_string(major) + "." + std::to_string(minor) + ", kx needs 1.10 or later";
  return "";
}

Loaded* load_once(std::string& why) {
  // Filled once under the HDF5 lock, then only read: the entry points of a library kept for the process.
  static std::optional<Loaded> loaded;
  if (loaded) return &*loaded;
  const std::string configured = config::path("KX_HDF5_LIBRARY");
  std::vector<std::string> names;
  if (!configured.empty())
    names.push_back(configured);
  else
    names.assign(std::begin(kCandidates), std::end(kCandidates));
  for (const std::string& name : names) {
    auto lib = std::make_unique<SharedLibrary>(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!lib->opened()) {
      why += "\n  " + lib->error();
      continue;
    }
    Loaded l;
    const std::string problem = resolve(*lib, l.api);
    if (!problem.empty()) {
      why += "\n  " + problem;
      continue;
    }
    unsigned major = 0, minor = 0, release = 0;
    l.api.get_libversion(&major, &minor, &release);
    l.description = name + " (HDF5 " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release) + ")";
    l.library = std::move(lib);
    loaded = std::move(l);
    return &*loaded;
  }
  return nullptr;  // not remembered: a later session tries again (the library may be installed by then)
}

std::mutex& hdf5_mutex() {
  static std::mutex m;  // serialises every use of libhdf5 in the process
  return m;
}

}  // namespace

Session::Session() : lock_(hdf5_mutex()) {
  std::string why;
  const Loaded* l = load_once(why);
  require(l != nullptr, Status::Unsupported,
          "HDF5 is unavailable, so Keras .h5 and .keras files cannot be read or written: install libhdf5 "
          "(Debian: libhdf5-103-1) or set KX_HDF5_LIBRARY to its path. Tried:" + why);
  api_ = &l->api;
  library_ = &l->description;
  api_->eset_auto2(kDefault, nullptr, nullptr);  // per thread in thread-safe builds: set every time
}

}  // namespace kx::io::h5
