// buffer.hpp — a flat, typed, owning block of memory with a shape, booked in a MemoryLedger
// for its whole life. Devices hand these out; engines and models never call new/malloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/memory_ledger.hpp"

namespace zl {

/// Dimensions of a tensor, outermost first (row-major).
using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a scalar shape {}).
std::int64_t numel(const Shape& shape);

/// "[3, 4]" for messages and files.
std::string shape_string(const Shape& shape);

/// What a new Buffer holds: zeros, or whatever its allocator gives (Allocator::allocate_unset)
/// for a buffer that is written whole before it is read.
enum class Contents : std::uint8_t { Zero, Unset };

/// Where a Buffer's bytes come from (the Device implements it).
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns `bytes` bytes of zeroed memory aligned to 64 bytes.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Returns `bytes` bytes aligned to 64 bytes whose contents are unspecified: the caller writes
  /// every byte before it reads one. A GPU skips the zeroing; a CPU device fills them with a NaN
  /// pattern, so a read before the write shows. This default zeroes them.
  virtual void* allocate_unset(std::size_t bytes) { return allocate(bytes); }
  /// A Buffer's bytes, booked under `category`: allocate() or allocate_unset() as `contents`
  /// says. A device may place some categories' buffers apart (the CPU device puts those a swap
  /// file moves on huge pages); this default does not.
  virtual void* allocate_for(MemCategory category, std::size_t bytes, Contents contents) {
    (void)category;
    return contents == Contents::Zero ? allocate(bytes) : allocate_unset(bytes);
  }
  /// Frees what allocate, allocate_unset or allocate_for returned.
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
};

/// Owning flat storage of `elems` elements of `dtype`, zero-initialised (unless made with
/// Contents::Unset), booked under a category of a ledger until destroyed. Move-only.
class Buffer {
 public:
  Buffer() = default;
  /// Allocates from `allocator` and books the bytes in `ledger` (which must outlive the buffer),
  /// as activations of kind `kind` when `category` is Activations.
  Buffer(Allocator& allocator, MemoryLedger& ledger, MemCategory category, DType dtype, Shape shape,
         ActivationKind kind = ActivationKind::Scratch, Contents contents = Contents::Zero);
  /// Takes over `other`'s memory and its booking in the ledger; `other` is left empty.
  Buffer(Buffer&& other) noexcept;
  /// Frees and un-books this buffer's memory, then takes over `other`'s; `other` is left empty.
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  /// Raw pointer to the first element (nullptr when empty).
  void* data() { return data_; }
  /// Read-only raw pointer to the first element (nullptr when empty).
  const void* data() const { return data_; }
  /// Element type; fixed at construction.
  DType dtype() const { return dtype_; }
  /// Dimensions, outermost first; numel(shape()) == elems().
  const Shape& shape() const { return shape_; }
  /// Number of elements (0 for an empty or moved-from buffer).
  std::int64_t elems() const { return elems_; }
  /// Size in bytes, elems() * dtype_bytes(dtype()): what the ledger has booked for it.
  std::int64_t bytes() const { return elems_ * static_cast<std::int64_t>(dtype_bytes(dtype_)); }
  /// Ledger category the bytes are booked under (params, grads, optimizer, ...).
  MemCategory category() const { return category_; }
  /// What an Activations buffer holds (Scratch unless allocated with a kind).
  ActivationKind activation_kind() const { return kind_; }

  /// Typed view of all elements; T must match the dtype's size (float for fp32, uint16_t for 16-bit).
  template <class T>
  std::span<T> as() {
    ZL_CHECK(sizeof(T) == dtype_bytes(dtype_), "buffer of {} viewed as a {}-byte type",
             dtype_name(dtype_), sizeof(T));
    return {static_cast<T*>(data_), static_cast<std::size_t>(elems_)};
  }
  /// Read-only typed view of all elements; T must match the dtype's size, as for as().
  template <class T>
  std::span<const T> as() const {
    ZL_CHECK(sizeof(T) == dtype_bytes(dtype_), "buffer of {} viewed as a {}-byte type",
             dtype_name(dtype_), sizeof(T));
    return {static_cast<const T*>(data_), static_cast<std::size_t>(elems_)};
  }

 private:
  void reset();
  Allocator* allocator_ = nullptr;
  MemoryLedger* ledger_ = nullptr;
  void* data_ = nullptr;
  MemCategory category_ = MemCategory::Params;
  ActivationKind kind_ = ActivationKind::Scratch;
  DType dtype_ = DType::F32;
  Shape shape_;
  std::int64_t elems_ = 0;
};

}  // namespace zl
