// How a KV memory's state leaves and re-enters the process (the session store, sdk/store/).
//
// A memory describes its state as named blobs of bytes. Names are paths chosen by the memory
// ("dense/L3/k/p12"); the store chunks and checksums each blob, so a blob may be larger than
// any single database value. Two kinds:
//   - mutable blobs are written again at every save (the cascade's slots, a partial page);
//   - immutable blobs never change once written under their name (a full page of dense K/V).
//     Before writing one, the memory asks has(name): when the store already holds it from an
//     earlier save of the same session lineage, keep(name) records that it is still part of the
//     state and nothing is read from the backend or written.
// Every save lists the memory's whole state: a blob of an earlier save that is neither put nor
// kept is deleted by the store. A memory may add further named blobs in later versions (e.g.
// derived summaries it prefers not to recompute); readers ask has(name) for optional ones.
//
// The byte layout of each blob is the memory's business and is documented where it is written.
// Numbers are little-endian; floats are stored as their IEEE-754 bits, so a round trip is
// bitwise exact.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace sa {

enum class blob_kind { mutable_blob, immutable_blob };

class state_writer {
 public:
  virtual ~state_writer() = default;
  // True when an immutable blob `name` from an earlier save of this session lineage is stored.
  virtual bool has(const std::string& name) = 0;
  // Keeps such a blob as part of this save (only valid after has(name) returned true).
  virtual void keep(const std::string& name) = 0;
  // Writes a blob, replacing any blob of that name.
  virtual void put(const std::string& name, const void* data, size_t n, blob_kind kind) = 0;
};

class state_reader {
 public:
  virtual ~state_reader() = default;
  virtual bool has(const std::string& name) = 0;
  // The blob's bytes, every chunk's checksum verified. Throws sa::error(SA_ERR_STORE) when it
  // is missing or corrupt.
  virtual std::vector<uint8_t> get(const std::string& name) = 0;
  // The same into dst, which must be exactly the blob's size (else SA_ERR_STORE).
  virtual void get_into(const std::string& name, void* dst, size_t n) = 0;
};

// Little packers for the fixed-layout headers memories write. (Hosts this SDK targets are
// little-endian; the store refuses to run elsewhere, see sdk/store/session_store.cpp.)
class byte_packer {
 public:
  template <typename T>
  byte_packer& put(T x) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  template <typename T>
  byte_packer& put_array(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size() * sizeof(T));
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads what a byte_packer wrote; running past the end throws SA_ERR_STORE naming `what`.
class byte_unpacker {
 public:
  byte_unpacker(const std::vector<uint8_t>& bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}
  template <typename T>
  T get() {
    T x;
    need(sizeof(T));
    std::memcpy(&x, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return x;
  }
  template <typename T>
  void get_array(std::vector<T>& v, size_t n) {
    if (n > (bytes_.size() - at_) / sizeof(T))  // bounded before anything is allocated
      fail(SA_ERR_STORE, "%s is truncated (%zu bytes)", what_.c_str(), bytes_.size());
    v.resize(n);
    std::memcpy(v.data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
  }
  // Reads a u32 state version; throws SA_ERR_STORE unless it is `version`.
  void expect_version(uint32_t version) {
    const auto v = get<uint32_t>();
    if (v != version)
      fail(SA_ERR_STORE, "%s has state version %u; this library reads version %u", what_.c_str(), v,
           version);
  }
  // Reads a u32 state version; throws SA_ERR_STORE unless it is in [oldest, newest]. Returns it.
  uint32_t expect_version_in(uint32_t oldest, uint32_t newest) {
    const auto v = get<uint32_t>();
    if (v < oldest || v > newest)
      fail(SA_ERR_STORE, "%s has state version %u; this library reads versions %u to %u",
           what_.c_str(), v, oldest, newest);
    return v;
  }
  // Throws unless every byte was read.
  void finish() const {
    if (at_ != bytes_.size())
      fail(SA_ERR_STORE, "%s has %zu bytes, %zu expected", what_.c_str(), bytes_.size(), at_);
  }

 private:
  void need(size_t n) const {
    if (n > bytes_.size() - at_)
      fail(SA_ERR_STORE, "%s is truncated (%zu bytes)", what_.c_str(), bytes_.size());
  }
  const std::vector<uint8_t>& bytes_;
  std::string what_;
  size_t at_ = 0;
};

}  // namespace sa
