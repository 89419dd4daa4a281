// The replacement of the global operator new behind allocation_counter.h: every form
// that is not over-aligned (plain, array, nothrow, sized delete), since a sanitizer's
// runtime replaces each form of its own; over-aligned ones keep the library's own pair
// and are not counted.
#include "tests/support/allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {

thread_local popkit::test::AllocationCount t_allocations;

}  // namespace

namespace popkit::test {

AllocationCount thread_allocations() {
  return t_allocations;
}

}  // namespace popkit::test

void* operator new(std::size_t n) {
  ++t_allocations.count;
  t_allocations.bytes += n;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept {
  std::free(p);
}

void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  ++t_allocations.count;
  t_allocations.bytes += n;
  return std::malloc(n == 0 ? 1 : n);
}

void* operator new[](std::size_t n) {
  return ::operator new(n);
}

void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept {
  return ::operator new(n, tag);
}

void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

void operator delete[](void* p) noexcept {
  std::free(p);
}

void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
