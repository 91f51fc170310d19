// utf8_stream: streaming UTF-8 assembly for token-by-token output.
#include <algorithm>
#include <cstring>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace sa {

namespace {

constexpr std::string_view replacement_utf8 = "\xEF\xBF\xBD";

}  // namespace

void utf8_stream::push(std::string_view bytes, std::string& out) {
  // Only a short prefix can still be pending, so joining it to the new bytes is cheap and keeps
  // the decoding in one place.
  std::string joined;
  std::string_view s = bytes;
  if (n_pending_ > 0) {
    joined.assign(reinterpret_cast<const char*>(pending_), n_pending_);
    joined.append(bytes);
    s = joined;
    n_pending_ = 0;
  }
  size_t pos = 0;
  while (pos < s.size()) {
    const unicode::utf8_char c = unicode::decode_utf8(s, pos);
    if (c.status == unicode::utf8_status::truncated) {
      // A valid prefix runs to the end: keep it for the next push. It is at most 3 bytes;
      // the min() makes that visible to the compiler.
      n_pending_ = std::min<size_t>(c.len, 3);
      std::memcpy(pending_, s.data() + pos, n_pending_);
      return;
    }
    if (c.status == unicode::utf8_status::ok) {
      out.append(s.substr(pos, c.len));
    } else {
      out.append(replacement_utf8);
    }
    pos += c.len;
  }
}

void utf8_stream::flush(std::string& out) {
  // Pending bytes are always one well-formed but incomplete prefix: one maximal subpart.
  if (n_pending_ > 0) out.append(replacement_utf8);
  n_pending_ = 0;
}

}  // namespace sa
