// test_paths.hpp — where the tests find their data, the zerolab binary and the lesson binaries.
// These are paths of one build, so they live in one small source that CMake generates
// (tests/CMakeLists.txt) and not in the test sources: those hold no absolute path and compile
// to the same objects in every clone, which lets a compiler cache share them.
#pragma once

namespace zl::test {

/// The source tree's tests/ folder (fixtures, configs, corpora).
const char* data_dir();

/// The source tree's docs/configs/ folder (the DeepSpeed config examples).
const char* configs_dir();

/// The zerolab command this build made.
const char* zerolab_binary();

/// The build's lessons/ folder: the lesson binaries and the exercise graders.
const char* lessons_dir();

}  // namespace zl::test
