// engine.cpp — names of the engines.
#include "engines/engine.hpp"

#include "core/error.hpp"

namespace zl {

std::string_view engine_name(EngineKind kind) {
  switch (kind) {
    case EngineKind::Reference: return "reference";
    case EngineKind::Ddp: return "ddp";
  }
  fail("unknown engine {}", static_cast<int>(kind));
}

}  // namespace zl
