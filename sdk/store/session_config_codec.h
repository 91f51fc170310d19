// A session's settings as stored: text lines "key=value", one per setting, in a fixed order.
// Integers are decimal, floats the hexadecimal bits of their IEEE-754 f32 (exact), choices by
// name. Reading starts from the defaults, so a key a newer writer adds must default to the old
// behaviour; a key this library does not know is refused (it could change what the state
// means). Not stored: the thread count and the backend (the resuming caller picks them).
#pragma once

#include <string>

#include "session/session.h"

namespace sa::store {

std::string encode_config(const session_config& c);
// Throws SA_ERR_STORE naming `what` and the offending line.
session_config decode_config(const std::string& text, const std::string& what);
// "dense", "streaming" or "cascade".
const char* memory_name(memory_kind k);

}  // namespace sa::store
