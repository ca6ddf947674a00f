// stream_copy.hpp — copies whose stores bypass the caches (non-temporal stores), for collective
// outputs too large to stay cached. A plain store first reads the destination's cache line from
// memory (a read for ownership), so copying to cold memory moves three bytes for every byte
// copied; a streaming store moves two, as a large std::memcpy does. Only the stores differ: the
// bytes written are the source's.
#pragma once

#include <cstddef>

namespace zl {

/// Copies `size_bytes` from `src` to `dst` (which must not overlap), with streaming stores for
/// the 64-byte-aligned part of `dst` (AVX-512, AVX2 or SSE2, whichever the CPU has). Call
/// stream_fence() before another thread may read `dst`.
void stream_copy(void* dst, const void* src, std::size_t size_bytes);

/// Orders this thread's earlier streaming stores before its later stores (an sfence), so a lock
/// released or a thread joined afterwards publishes them as it publishes plain stores.
void stream_fence();

}  // namespace zl
