// version.hpp — which zerolab this is: the version from CMake's project() and the git commit the
// build was configured from (version.cpp is generated from version.cpp.in at configure time).
#pragma once

#include <string_view>

namespace zl {

/// The release, as CMake's project(VERSION) states it, e.g. "0.1.0".
std::string_view version();

/// The git commit the build was configured from (12 hex digits), or "unknown" when the source
/// was not a git checkout or git was missing. Captured when CMake configures, so a commit made
/// after the last configure shows only once CMake runs again.
std::string_view git_commit();

}  // namespace zl
