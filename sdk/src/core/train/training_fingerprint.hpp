// Comparing what two workers train: Model::Impl::training_fingerprint describes it, one "name=value"
// line each; first_difference says where two descriptions part.
#pragma once
#include <string>

namespace kx::core {

// "<their line>, the chief <our line>" for the first line that differs (theirs: a worker's, ours: the
// chief's); a whole-description fallback when no single line does.
std::string first_difference(const std::string& theirs, const std::string& ours);

}  // namespace kx::core
