// lessons_doc_test.cpp — docs/lessons.md quotes the lessons' own output: every figure its table
// gives for a lesson is in that lesson's row and in what the lesson prints at its default sizes
// (in fp32, and under --bf16 where the row quotes that run), so neither can change without the
// other.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lesson_runner.hpp"
#include "support/test_paths.hpp"

namespace {

using zl::lessons_test::run_lesson;

// A lesson and the figures docs/lessons.md quotes from its default run, as the lesson prints them.
struct Quoted {
  const char* lesson;
  std::vector<const char*> figures;
  const char* flags = "";  ///< beside --no-pause: the run the figures come from
};

// The table row of lesson `number` ("03") in docs/lessons.md.
std::string docs_row(const std::string& number) {
  std::ifstream file(std::string(zl::test::data_dir()) + "/../docs/lessons.md");
  std::stringstream text;
  text << file.rdbuf();
  const std::string docs = text.str();
  const std::size_t start = docs.find("\n| " + number + " | `lesson_");
  if (start == std::string::npos) return {};
  return docs.substr(start + 1, docs.find('\n', start + 1) - start - 1);
}

class LessonsDoc : public testing::TestWithParam<Quoted> {};

TEST_P(LessonsDoc, QuotesTheLessonsOwnOutput) {
  const Quoted& quoted = GetParam();
  const std::string row = docs_row(std::string(quoted.lesson).substr(0, 2));
  ASSERT_FALSE(row.empty()) << quoted.lesson << " has no row in docs/lessons.md";
  const auto run = run_lesson(quoted.lesson, std::string("--no-pause ") + quoted.flags);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (const char* figure : quoted.figures) {
    EXPECT_NE(row.find(figure), std::string::npos) << figure << " is not in the docs' row:\n"
                                                   << row;
    EXPECT_NE(run.out.find(figure), std::string::npos)
        << figure << " is not in what " << quoted.lesson << " prints:\n"
        << run.out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Lessons, LessonsDoc,
    testing::Values(
        Quoted{"00_memory_math", {"112 / 38.5 / 26.25 / 14", "124,439,808"}},
        Quoted{"01_ddp", {"102,400", "Ψ = 5,768", "6,400", "W·64 = 256"}},
        Quoted{"01_ddp", {"17,408"}, "--bf16"},
        Quoted{"02_zero1", {"576 of 9,984 elements (5.8%)", "19968", "179,712"}},
        Quoted{"03_zero2", {"27,392", "39,936", "9,984"}},
        Quoted{"03_zero2", {"31,104", "37,376", "4,992", "26,112"}, "--bf16"},
        Quoted{"04_zero3", {"17,408", "25,600", "172,800", "115,200"}},
        Quoted{"04_zero3", {"8,704", "12,800"}, "--bf16"},
        Quoted{"05_overlap", {"1.0704", "0.8903", "1.1954", "0.9403", "1.3655", "1.06x"}},
        Quoted{"06_offload", {"54,912", "24,960", "9,984", "19,968", "4,992"}},
        Quoted{"07_checkpoints", {"4.47e-08"}},
        Quoted{"08_mixed_precision", {"0.184770", "0.184744", "0.184799", "2^30", "2^18"}},
        Quoted{"09_faults", {"rank 2: injected fault at all_gather #5 (call #6)"}},
        Quoted{"10_activations", {"3,495,936", "5,429,248", "3,368,960", "2,105,600", "1,886,208"}},
        Quoted{"11_infinity", {"9,984", "29,952", "32.0B", "128.0B (4.0x)"}},
        Quoted{"12_nodes",
               {"340,392", "96,768", "227,552", "29,952", "10,752", "18,432", "2.94x", "15.65",
                "11.16", "19.13", "5.33"}}),
    [](const testing::TestParamInfo<Quoted>& info) {
      return "lesson_" + std::string(info.param.lesson) +
             (std::string(info.param.flags).empty() ? "" : "_bf16");
    });

}  // namespace
