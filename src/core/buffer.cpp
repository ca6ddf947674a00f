// buffer.cpp — Buffer's life cycle: allocate and book, release and free.
#include "core/buffer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

namespace zl {

std::int64_t numel(const Shape& shape) {
  std::int64_t count = 1;
  for (const auto dim : shape) count *= dim;
  return count;
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Buffer::Buffer(Allocator& allocator, MemoryLedger& ledger, MemCategory category, DType dtype,
               Shape shape, ActivationKind kind, Contents contents)
    : allocator_(&allocator),
      ledger_(&ledger),
      category_(category),
      kind_(kind),
      dtype_(dtype),
      shape_(std::move(shape)) {
  for (const auto dim : shape_) {
    ZL_CHECK(dim >= 0, "buffer shape {} has a negative dimension", shape_string(shape_));
  }
  elems_ = numel(shape_);
  if (elems_ > 0) {
    const auto size = static_cast<std::size_t>(bytes());
    data_ = allocator_->allocate_for(category_, size, contents);
  }
  ledger_->book(category_, bytes(), kind_);
}

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    allocator_ = std::exchange(other.allocator_, nullptr);
    ledger_ = std::exchange(other.ledger_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    category_ = other.category_;
    kind_ = other.kind_;
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    elems_ = std::exchange(other.elems_, 0);
  }
  return *this;
}

Buffer::~Buffer() { reset(); }

void Buffer::reset() {
  if (ledger_ == nullptr) return;
  if (data_ != nullptr) allocator_->deallocate(data_, static_cast<std::size_t>(bytes()));
  ledger_->release(category_, bytes(), kind_);
  ledger_ = nullptr;
  allocator_ = nullptr;
  data_ = nullptr;
  elems_ = 0;
}

}  // namespace zl
