// Tokenizer tests. References are independent of the implementation: pre-tokenizer splits and
// UTF-8 replacement come from fixtures made by Python (tools/gen_*_fixture.py), merge results
// were worked out by hand, round trips check themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "test_util.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using ids = std::vector<int32_t>;

constexpr int32_t type_normal = 1, type_unknown = 2, type_control = 3, type_user = 4,
                  type_byte = 6;

// ---- helpers ---------------------------------------------------------------------------

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// Non-comment lines of a fixture under tests/tokenizer/.
std::vector<std::string> fixture_lines(const std::string& name) {
  const std::string path = sa_test::test_data_dir() + "/tokenizer/" + name;
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::vector<std::string> out;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// GPT-2's bytes_to_unicode, written the way the original builds it: the printable ranges
// first, then every other byte in order gets 256, 257, ...
std::string mapped(std::string_view bytes) {
  static const std::vector<uint32_t> table = [] {
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
    std::vector<uint32_t> t(256, 0);
    for (int b : bs) t[static_cast<size_t>(b)] = static_cast<uint32_t>(b);
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b) {
      if (std::find(bs.begin(), bs.end(), b) == bs.end()) t[static_cast<size_t>(b)] = 256 + n++;
    }
    return t;
  }();
  std::string out;
  for (char c : bytes) out += utf8(table[static_cast<unsigned char>(c)]);
  return out;
}

struct vocab_builder {
  sa::tokenizer_vocab v;

  int32_t add(const std::string& text, int32_t type = type_normal, float score = 0.0f) {
    v.tokens.push_back(text);
    v.types.push_back(type);
    v.scores.push_back(score);
    return static_cast<int32_t>(v.tokens.size() - 1);
  }
  int32_t find(const std::string& text) const {
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      if (v.tokens[i] == text) return static_cast<int32_t>(i);
    }
    return -1;
  }
  // Byte-level merge given in raw bytes; adds the merged token if new; returns its id.
  int32_t merge(const std::string& left, const std::string& right) {
    v.merges.push_back(mapped(left) + " " + mapped(right));
    const int32_t id = find(mapped(left + right));
    return id >= 0 ? id : add(mapped(left + right));
  }
};

// gpt2 family with the full byte alphabet: id of byte b is b.
vocab_builder byte_level(const std::string& pre) {
  vocab_builder b;
  b.v.model = "gpt2";
  b.v.pre = pre;
  for (int i = 0; i < 256; ++i) b.add(mapped(std::string(1, static_cast<char>(i))));
  return b;
}

ids bytes_of(std::string_view s) {
  ids out;
  for (char c : s) out.push_back(static_cast<unsigned char>(c));
  return out;
}

std::string decode(const sa::tokenizer& tok, const ids& v, bool render_special = false) {
  std::string out;
  for (int32_t id : v) out += tok.piece(id, render_special);
  return out;
}

// Expects construction to throw with `status` and a message containing `needle`.
void expect_error(const sa::tokenizer_vocab& v, sa_status status, const std::string& needle) {
  try {
    sa::tokenizer tok(v);
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const sa::error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' does not mention '" << needle << "'";
  }
}

// ---- unicode classes and the pre-tokenizers ---------------------------------------------

TEST(Unicode, Classes) {
  using sa::unicode::classify;
  using sa::unicode::cp_class;
  for (uint32_t cp : {0x41u, 0x7Au, 0xE9u, 0x416u, 0x4E2Du, 0x1C5u, 0x2B0u, 0x5D0u, 0xAC00u}) {
    EXPECT_EQ(classify(cp), cp_class::letter) << std::hex << cp;
  }
  for (uint32_t cp : {0x30u, 0x39u, 0x663u, 0xB2u, 0x216Bu, 0xBDu, 0xFF11u}) {
    EXPECT_EQ(classify(cp), cp_class::number) << std::hex << cp;
  }
  for (uint32_t cp : {0x9u, 0xAu, 0xDu, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2007u, 0x2028u,
                      0x202Fu, 0x3000u}) {
    EXPECT_EQ(classify(cp), cp_class::space) << std::hex << cp;
  }
  for (uint32_t cp : {0x0u, 0x1Cu, 0x1Fu, 0x27u, 0x5Fu, 0x301u, 0x200Bu, 0x1F600u, 0xFFFDu,
                      0x10FFFFu, 0xE000u}) {
    EXPECT_EQ(classify(cp), cp_class::other) << std::hex << cp;
  }
}

TEST(Pretokenize, MatchesRegexReference) {
  const auto lines = fixture_lines("pretokenize_cases.txt");
  size_t checked = 0, failed = 0;
  std::map<std::string, size_t> per_kind;
  for (const std::string& line : lines) {
    const auto fields = split(line, '\t');
    ASSERT_EQ(fields.size(), 3u) << line;
    sa::pretokenizer_kind kind;
    if (fields[0] == "gpt2") {
      kind = sa::pretokenizer_kind::gpt2;
    } else if (fields[0] == "llama3") {
      kind = sa::pretokenizer_kind::llama3;
    } else if (fields[0] == "qwen2") {
      kind = sa::pretokenizer_kind::qwen2;
    } else {
      FAIL() << "unknown kind " << fields[0];
    }
    const std::string input = sa_test::from_hex(fields[1]);
    std::vector<std::string> expected;
    if (!fields[2].empty()) {
      for (const std::string& h : split(fields[2], ' ')) expected.push_back(sa_test::from_hex(h));
    }
    std::vector<std::string_view> views;
    sa::pretokenize(kind, input, views);
    const std::vector<std::string> got(views.begin(), views.end());
    if (got != expected && ++failed <= 20) {
      std::string g, e;
      // Appended piecewise: GCC 12 warns falsely about "[" + std::string.
      for (const auto& p : got) g.append("[").append(sa_test::to_hex(p)).append("]");
      for (const auto& p : expected) e.append("[").append(sa_test::to_hex(p)).append("]");
      ADD_FAILURE() << fields[0] << " input " << fields[1] << "\n  got      " << g
                    << "\n  expected " << e;
    }
    ++checked;
    ++per_kind[fields[0]];
  }
  EXPECT_EQ(failed, 0u);
  EXPECT_GE(checked, 600u);
  EXPECT_GE(per_kind["gpt2"], 200u);
  EXPECT_GE(per_kind["llama3"], 200u);
  EXPECT_GE(per_kind["qwen2"], 200u);
}

TEST(Pretokenize, InvalidUtf8IsKeptAndTiles) {
  // Ill-formed bytes act like punctuation and are never lost.
  const std::string text = "ab\xFF\xC3 c\xE2\x82\n\n1234\x80";
  for (auto kind : {sa::pretokenizer_kind::gpt2, sa::pretokenizer_kind::llama3,
                    sa::pretokenizer_kind::qwen2}) {
    std::vector<std::string_view> pieces;
    sa::pretokenize(kind, text, pieces);
    std::string joined;
    for (auto p : pieces) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, text);
  }
  std::vector<std::string_view> pieces;
  sa::pretokenize(sa::pretokenizer_kind::gpt2, "ab\xFF\xC3 c", pieces);
  EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()),
            (std::vector<std::string>{"ab", "\xFF\xC3", " c"}));
}

// ---- byte-level BPE ----------------------------------------------------------------------

TEST(BytePairEncoding, MergesFromLiteralMappedVocab) {
  // Written in the stored (mapped) form: space is U+0120 'Ġ'.
  vocab_builder b = byte_level("gpt2");
  const int32_t t_the_prefix = b.add("\xC4\xA0t");  // "Ġt" = 256
  const int32_t he = b.add("he");                   // 257
  const int32_t the = b.add("\xC4\xA0the");         // "Ġthe" = 258
  const int32_t in = b.add("in");                   // 259
  const int32_t space_in = b.add("\xC4\xA0in");     // "Ġin" = 260
  const int32_t nl2 = b.add("\xC4\x8A\xC4\x8A");    // "ĊĊ" = 261
  b.v.merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "\xC4\xA0 in", "\xC4\x8A \xC4\x8A"};
  EXPECT_EQ(t_the_prefix, 256);
  EXPECT_EQ(the, 258);
  sa::tokenizer tok(b.v);
  EXPECT_EQ(tok.n_vocab(), 262);

  // " the": [Ġ t h e] -> rank 0 [Ġt h e] -> rank 1 [Ġt he] -> rank 2 [Ġthe].
  EXPECT_EQ(tok.encode(" the", false, false), (ids{the}));
  // " inn": [Ġ i n n] -> rank 3 [Ġ in n] -> rank 4 [Ġin n].
  EXPECT_EQ(tok.encode(" the in the inn", false, false),
            (ids{the, space_in, the, space_in, 'n'}));
  EXPECT_EQ(tok.encode("the", false, false), (ids{'t', he}));
  EXPECT_EQ(tok.encode("The", false, false), (ids{'T', he}));
  EXPECT_EQ(tok.encode("hehe", false, false), (ids{he, he}));
  // "\n\n" is one whitespace piece ending the text: Ċ Ċ -> ĊĊ.
  EXPECT_EQ(tok.encode("x\n\n", false, false), (ids{'x', nl2}));
  // " t" alone: Ġ t -> Ġt.
  EXPECT_EQ(tok.encode(" t", false, false), (ids{t_the_prefix}));
  EXPECT_EQ(tok.piece(the, false), " the");
  EXPECT_EQ(tok.piece(nl2, false), "\n\n");
  EXPECT_EQ(tok.piece(in, false), "in");
}

TEST(BytePairEncoding, LowestRankFirst) {
  vocab_builder ab_first = byte_level("gpt2");
  const int32_t ab = ab_first.merge("a", "b");
  const int32_t bc1 = ab_first.merge("b", "c");
  sa::tokenizer t1(ab_first.v);
  EXPECT_EQ(t1.encode("abc", false, false), (ids{ab, 'c'}));

  vocab_builder bc_first = byte_level("gpt2");
  const int32_t bc = bc_first.merge("b", "c");
  bc_first.merge("a", "b");
  sa::tokenizer t2(bc_first.v);
  EXPECT_EQ(t2.encode("abc", false, false), (ids{'a', bc}));
  EXPECT_EQ(t2.encode("abcab", false, false), (ids{'a', bc, bc_first.find("ab")}));
  EXPECT_NE(bc1, -1);
}

TEST(BytePairEncoding, EqualRanksMergeLeftmostFirst) {
  vocab_builder b = byte_level("gpt2");
  const int32_t aa = b.merge("a", "a");
  sa::tokenizer tok(b.v);
  EXPECT_EQ(tok.encode("aaa", false, false), (ids{aa, 'a'}));
  EXPECT_EQ(tok.encode("aaaa", false, false), (ids{aa, aa}));
  EXPECT_EQ(tok.encode("aaaaa", false, false), (ids{aa, aa, 'a'}));
}

TEST(BytePairEncoding, MultiByteCharacters) {
  vocab_builder b = byte_level("gpt2");
  const int32_t ca = b.merge("c", "a");
  const int32_t caf = b.merge("ca", "f");
  const int32_t e_acute = b.merge("\xC3", "\xA9");  // é, stored as "Ã©"
  const int32_t cafe = b.merge("caf", "\xC3\xA9");
  EXPECT_EQ(b.v.tokens[static_cast<size_t>(e_acute)], "\xC3\x83\xC2\xA9");
  sa::tokenizer tok(b.v);
  EXPECT_EQ(tok.encode("caf\xC3\xA9", false, false), (ids{cafe}));
  EXPECT_EQ(tok.encode("caf", false, false), (ids{caf}));
  EXPECT_EQ(tok.encode("ca\xC3\xA9", false, false), (ids{ca, e_acute}));
  // A lone lead byte (invalid UTF-8) is still its byte token.
  EXPECT_EQ(tok.encode("ca\xC3", false, false), (ids{ca, 0xC3}));
  EXPECT_EQ(tok.piece(cafe, false), "caf\xC3\xA9");
  EXPECT_EQ(tok.piece(0xC3, false), "\xC3");
}

TEST(BytePairEncoding, IgnoreMergesForLlama3) {
  const auto build = [](const std::string& pre, int32_t* hello, int32_t* he) {
    vocab_builder b = byte_level(pre);
    *he = b.merge("h", "e");
    *hello = b.add(mapped(" hello"));  // reachable only as a whole word
    return b.v;
  };
  int32_t hello = 0, he = 0;
  sa::tokenizer llama(build("llama-bpe", &hello, &he));
  EXPECT_EQ(llama.encode(" hello", false, false), (ids{hello}));
  EXPECT_EQ(llama.encode(" hello hello", false, false), (ids{hello, hello}));
  // Not a whole token: merged as usual.
  EXPECT_EQ(llama.encode(" hellos", false, false), (ids{' ', he, 'l', 'l', 'o', 's'}));
  EXPECT_EQ(llama.encode("hello", false, false), (ids{he, 'l', 'l', 'o'}));
  for (const char* pre : {"qwen2", "gpt2"}) {
    sa::tokenizer tok(build(pre, &hello, &he));
    EXPECT_EQ(tok.encode(" hello", false, false), (ids{' ', he, 'l', 'l', 'o'})) << pre;
  }
  sa::tokenizer llama3(build("llama3", &hello, &he));
  EXPECT_EQ(llama3.encode(" hello", false, false), (ids{hello}));
}

TEST(BytePairEncoding, PretokenizerChoiceShowsInIds) {
  const auto build = [](const std::string& pre) {
    vocab_builder b = byte_level(pre);
    b.merge("1", "2");
    b.merge("12", "3");
    return b;
  };
  vocab_builder g = build("gpt2");
  const int32_t n12 = g.find(mapped("12")), n123 = g.find(mapped("123"));
  // gpt2: "4123" is one piece; llama3: "412" "3"; qwen2: one digit each.
  EXPECT_EQ(sa::tokenizer(g.v).encode("4123", false, false), (ids{'4', n123}));
  EXPECT_EQ(sa::tokenizer(build("llama-bpe").v).encode("4123", false, false),
            (ids{'4', n12, '3'}));
  EXPECT_EQ(sa::tokenizer(build("qwen2").v).encode("4123", false, false),
            (ids{'4', '1', '2', '3'}));
  // Contractions: case-sensitive in gpt2, not in llama3.
  vocab_builder c = byte_level("gpt2");
  const int32_t s_up = c.merge("'", "S");
  const int32_t s_lo = c.merge("'", "s");
  // gpt2: "'S" is no contraction, so the quote stands alone and "S" is a word.
  EXPECT_EQ(sa::tokenizer(c.v).encode("IT'S it's", false, false),
            (ids{'I', 'T', '\'', 'S', ' ', 'i', 't', s_lo}));
  c.v.pre = "llama3";
  EXPECT_EQ(sa::tokenizer(c.v).encode("IT'S it's", false, false),
            (ids{'I', 'T', s_up, ' ', 'i', 't', s_lo}));
  // "'Sx": gpt2 has no 'S contraction, so the quote is punctuation and "Sx" a word.
  c.v.pre = "gpt2";
  EXPECT_EQ(sa::tokenizer(c.v).encode("'Sx", false, false), (ids{'\'', 'S', 'x'}));
  c.v.pre = "llama3";
  EXPECT_EQ(sa::tokenizer(c.v).encode("'Sx", false, false), (ids{s_up, 'x'}));
}

TEST(BytePairEncoding, PretokenizerLabels) {
  for (const char* pre : {"gpt2", "", "llama-bpe", "llama3", "llama-v3", "qwen2"}) {
    sa::tokenizer tok(byte_level(pre).v);
    EXPECT_FALSE(tok.used_default_pretokenizer()) << pre;
  }
  vocab_builder b = byte_level("some-new-model");
  sa::tokenizer tok(b.v);
  EXPECT_TRUE(tok.used_default_pretokenizer());
  // The fallback behaves like gpt2: digits stay in one piece and contractions are
  // case-sensitive (visible through a merge that only the gpt2 split allows).
  vocab_builder m = byte_level("some-new-model");
  const int32_t d = m.merge("1234", "5");
  m.merge("1", "2");
  m.merge("12", "3");
  m.merge("123", "4");
  EXPECT_EQ(sa::tokenizer(m.v).encode("12345", false, false), (ids{d}));
}

TEST(BytePairEncoding, DuplicateTextsFirstIdWins) {
  vocab_builder b = byte_level("gpt2");
  const int32_t first = b.merge("x", "y");
  const int32_t dup = b.add(mapped("xy"));
  ASSERT_NE(first, dup);
  sa::tokenizer tok(b.v);
  EXPECT_EQ(tok.encode("xy", false, false), (ids{first}));
  EXPECT_EQ(tok.piece(dup, false), "xy");
}

TEST(BytePairEncoding, MissingByteFallsBackToUnk) {
  vocab_builder b = byte_level("gpt2");
  b.v.tokens['A'] = "<removed>";  // no token for byte 'A' any more
  const int32_t unk = b.add("<unk>", type_unknown);
  b.v.unk = unk;
  sa::tokenizer tok(b.v);
  EXPECT_EQ(tok.encode("BAB", false, false), (ids{'B', unk, 'B'}));
  EXPECT_EQ(tok.piece(unk, false), "\xEF\xBF\xBD");
  EXPECT_EQ(tok.piece(unk, true), "<unk>");
}

// ---- round trips -----------------------------------------------------------------------

vocab_builder round_trip_vocab(const std::string& pre) {
  vocab_builder b = byte_level(pre);
  const char* pairs[][2] = {
      {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {" ", "a"}, {"e", "r"}, {"o", "n"},
      {"r", "e"}, {" ", "s"}, {"a", "n"}, {" ", "w"}, {"o", "r"}, {"e", "n"}, {" ", "o"},
      {"t", "h"}, {" ", " "}, {"  ", "  "}, {"\n", "\n"}, {"\xC3", "\xA9"}, {"\xE2", "\x96"},
      {"\xF0", "\x9F"}, {"\xF0\x9F", "\x98"}, {"\xD0", "\xBF"}, {"1", "2"}, {"12", "3"},
      {",", " "}, {".", "\n"}, {"\xE4", "\xB8"}, {"in", "g"}, {" ", "the"},
  };
  for (auto& p : pairs) {
    if (b.find(mapped(std::string(p[0]))) < 0) b.add(mapped(p[0]));
    if (b.find(mapped(std::string(p[1]))) < 0) b.add(mapped(p[1]));
    b.merge(p[0], p[1]);
  }
  return b;
}

const char* const round_trip_texts[] = {
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine; we've   got 12345 things\tto do.\r\n\r\nDone.  ",
    "def f(x):\n    return x ** 2  # comment\n\n\n",
    "\xCE\x93\xCE\xB5\xCE\xB9\xCE\xAC \xCF\x83\xCE\xBF\xCF\x85, "
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C "
    "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
    "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D"
    "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 flags \xF0\x9F\x87\xBA\xF0\x9F\x87\xB8",
    "cafe\xCC\x81 e\xCC\x81\xCC\x81x \xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D",
    "x\xC2\xA0y\xE3\x80\x80z\xE2\x80\xA8w \xC2\xB2\xE2\x85\xAB",
    "invalid \xFF\xFE \xC0\xAF \xED\xA0\x80 \xF4\x90\x80\x80 \xE2\x82 end\x80",
    "",
    " ",
    "\n",
};

// encode() with the text taken as given (no normalization, whatever the vocabulary implies).
ids encode_as_given(const sa::tokenizer& tok, std::string_view text, bool parse_special = false) {
  sa::encode_options o;
  o.parse_special = parse_special;
  o.norm = sa::normalization::none;
  return tok.encode(text, o);
}

std::string nfc(std::string_view s) {
  std::string out;
  sa::unicode::append_nfc(s, out);
  return out;
}

TEST(RoundTrip, ByteLevelIsLossless) {
  for (const char* pre : {"gpt2", "llama-bpe", "qwen2"}) {
    sa::tokenizer tok(round_trip_vocab(pre).v);
    for (const char* text : round_trip_texts) {
      for (bool parse_special : {false, true}) {
        const ids enc = encode_as_given(tok, text, parse_special);
        EXPECT_EQ(decode(tok, enc), text) << pre << " " << sa_test::to_hex(text);
        // With the vocabulary's own normalization (NFC for qwen2): the normalized text.
        const std::string want = tok.normalizes_nfc() ? nfc(text) : std::string(text);
        EXPECT_EQ(decode(tok, tok.encode(text, false, parse_special)), want)
            << pre << " " << sa_test::to_hex(text);
      }
    }
    // Merges do fire: the English sentence takes fewer tokens than bytes.
    const std::string s = round_trip_texts[0];
    EXPECT_LT(tok.encode(s, false, false).size(), s.size()) << pre;
  }
}

TEST(RoundTrip, ByteLevelRandomByteSoup) {
  std::mt19937 rng(12345);
  // Weighted towards bytes that form (or almost form) UTF-8 and whitespace.
  const std::string interesting = " \n\r\t'sSAa1.\xC3\xA9\xE2\x96\x81\xF0\x9F\x98\x80\x80\xBF\xFF";
  for (const char* pre : {"gpt2", "llama-bpe", "qwen2"}) {
    sa::tokenizer tok(round_trip_vocab(pre).v);
    for (int iter = 0; iter < 300; ++iter) {
      std::string text;
      const size_t len = rng() % 64;
      for (size_t i = 0; i < len; ++i) {
        text += rng() % 2 ? interesting[rng() % interesting.size()]
                          : static_cast<char>(rng() % 256);
      }
      EXPECT_EQ(decode(tok, encode_as_given(tok, text)), text) << pre << " " << sa_test::to_hex(text);
      const std::string want = tok.normalizes_nfc() ? nfc(text) : text;
      EXPECT_EQ(decode(tok, tok.encode(text, false, false)), want) << pre << " " << sa_test::to_hex(text);
    }
  }
}

TEST(RoundTrip, SentencePieceWithByteFallback) {
  vocab_builder b;
  b.v.model = "llama";
  b.v.add_space_prefix = 0;
  b.add("<unk>", type_unknown);
  b.add("<s>", type_control);
  b.add("</s>", type_control);
  for (int i = 0; i < 256; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", i);
    b.add(name, type_byte);
  }
  const char* pieces[] = {"\xE2\x96\x81", "t", "h", "e", "\xE2\x96\x81t", "he", "th",
                          "\xE2\x96\x81the", "a", "in", "\xC3\xA9", "\xE4\xBD\xA0"};
  float score = -1.0f;
  for (const char* p : pieces) b.add(p, type_normal, score -= 0.5f);
  b.v.unk = 0;
  sa::tokenizer tok(b.v);
  std::mt19937 rng(99);
  for (const char* text : round_trip_texts) {
    EXPECT_EQ(decode(tok, tok.encode(text, false, false)), text) << sa_test::to_hex(text);
  }
  for (int iter = 0; iter < 200; ++iter) {
    std::string text;
    const size_t len = rng() % 48;
    for (size_t i = 0; i < len; ++i) text += static_cast<char>(rng() % 256);
    if (text.find("\xE2\x96\x81") != std::string::npos) continue;  // decodes to a space
    EXPECT_EQ(decode(tok, tok.encode(text, false, false)), text) << sa_test::to_hex(text);
  }
}

// ---- special tokens ----------------------------------------------------------------------

struct special_fixture {
  vocab_builder b = byte_level("llama-bpe");
  int32_t bos, eos, eot_id, tool, sp, sp2, dup, im_end_user;
  special_fixture() {
    bos = b.add("<|begin_of_text|>", type_control);
    eos = b.add("<|end_of_text|>", type_control);
    eot_id = b.add("<|eot_id|>", type_control);
    tool = b.add("<tool>", type_user);
    sp = b.add("<sp>", type_control);
    sp2 = b.add("<sp>2", type_control);
    dup = b.add("<|eot_id|>", type_control);  // duplicate text: the first id is used
    im_end_user = b.add("<|im_end|>", type_user);  // an end marker, but not a control token
    b.v.bos = bos;
    b.v.eos = eos;
  }
};

TEST(SpecialTokens, ParseSpecialOnAndOff) {
  special_fixture f;
  sa::tokenizer tok(f.b.v);
  const std::string text = "<|begin_of_text|>hi<|eot_id|>";
  EXPECT_EQ(tok.encode(text, false, true), (ids{f.bos, 'h', 'i', f.eot_id}));
  // Off: the same text is plain text; with no merges that is its bytes.
  EXPECT_EQ(tok.encode(text, false, false), bytes_of(text));
  EXPECT_EQ(tok.encode("<tool>x", false, true), (ids{f.tool, 'x'}));
  EXPECT_EQ(tok.encode("<tool>x", false, false), bytes_of("<tool>x"));
}

TEST(SpecialTokens, AdjacentAndAtEdges) {
  special_fixture f;
  sa::tokenizer tok(f.b.v);
  EXPECT_EQ(tok.encode("<|eot_id|><|eot_id|>", false, true), (ids{f.eot_id, f.eot_id}));
  EXPECT_EQ(tok.encode("<|eot_id|>", false, true), (ids{f.eot_id}));
  EXPECT_EQ(tok.encode("a<|eot_id|>", false, true), (ids{'a', f.eot_id}));
  EXPECT_EQ(tok.encode("<|eot_id|> a", false, true), (ids{f.eot_id, ' ', 'a'}));
  EXPECT_EQ(tok.encode("<tool><|eot_id|><tool>", false, true), (ids{f.tool, f.eot_id, f.tool}));
  // Longest match wins at a position.
  EXPECT_EQ(tok.encode("<sp>2", false, true), (ids{f.sp2}));
  EXPECT_EQ(tok.encode("<sp>3", false, true), (ids{f.sp, '3'}));
  EXPECT_EQ(tok.encode("<sp><sp>2<sp", false, true), (ids{f.sp, f.sp2, '<', 's', 'p'}));
  // A partial special is ordinary text.
  EXPECT_EQ(tok.encode("<|eot_id", false, true), bytes_of("<|eot_id"));
  // The text between specials is pre-tokenized on its own.
  EXPECT_EQ(tok.encode("a<sp>b", false, true), (ids{'a', f.sp, 'b'}));
}

TEST(SpecialTokens, BosEosFlags) {
  special_fixture f;
  {
    sa::tokenizer tok(f.b.v);  // llama-bpe: BOS by default, no EOS
    EXPECT_TRUE(tok.add_bos());
    EXPECT_FALSE(tok.add_eos());
    EXPECT_EQ(tok.encode("a", true, false), (ids{f.bos, 'a'}));
    EXPECT_EQ(tok.encode("a", false, false), (ids{'a'}));
    EXPECT_EQ(tok.encode("", true, false), (ids{f.bos}));
    EXPECT_EQ(tok.encode("<|begin_of_text|>a", true, true), (ids{f.bos, f.bos, 'a'}));
  }
  {
    sa::tokenizer_vocab v = f.b.v;
    v.add_eos = 1;
    v.add_bos = 0;
    sa::tokenizer tok(v);
    EXPECT_EQ(tok.encode("a", true, false), (ids{'a', f.eos}));
    EXPECT_EQ(tok.encode("a", false, false), (ids{'a'}));
  }
  {
    sa::tokenizer_vocab v = f.b.v;
    v.pre = "gpt2";  // gpt2 and qwen2 add nothing by default
    EXPECT_EQ(sa::tokenizer(v).encode("a", true, false), (ids{'a'}));
    v.pre = "qwen2";
    EXPECT_EQ(sa::tokenizer(v).encode("a", true, false), (ids{'a'}));
    v.add_bos = 1;
    v.add_eos = 1;
    EXPECT_EQ(sa::tokenizer(v).encode("a", true, false), (ids{f.bos, 'a', f.eos}));
  }
}

TEST(SpecialTokens, PiecesEogAndControl) {
  special_fixture f;
  const int32_t eot = f.b.add("<eot-marker>", type_control);
  const int32_t eom = f.b.add("<eom-marker>", type_control);
  f.b.v.eot = eot;
  f.b.v.eom = eom;
  sa::tokenizer tok(f.b.v);
  EXPECT_EQ(tok.bos(), f.bos);
  EXPECT_EQ(tok.eos(), f.eos);
  EXPECT_EQ(tok.piece(f.bos, false), "");
  EXPECT_EQ(tok.piece(f.bos, true), "<|begin_of_text|>");
  EXPECT_EQ(tok.piece(f.tool, false), "<tool>");
  EXPECT_EQ(tok.piece(' ', false), " ");
  EXPECT_EQ(tok.piece('\n', false), "\n");
  EXPECT_TRUE(tok.is_control(f.bos));
  EXPECT_FALSE(tok.is_control(f.tool));
  EXPECT_FALSE(tok.is_control('a'));
  EXPECT_TRUE(tok.is_eog(f.eos));
  EXPECT_TRUE(tok.is_eog(f.eot_id));  // by its text
  EXPECT_TRUE(tok.is_eog(f.dup));
  EXPECT_TRUE(tok.is_eog(eot));
  EXPECT_TRUE(tok.is_eog(eom));
  EXPECT_FALSE(tok.is_eog(f.bos));
  EXPECT_FALSE(tok.is_eog(f.im_end_user));  // not a control token
  EXPECT_FALSE(tok.is_eog('a'));
  EXPECT_FALSE(tok.is_eog(-1));
  EXPECT_FALSE(tok.is_eog(tok.n_vocab()));
  EXPECT_EQ(tok.max_piece_bytes(), std::string("<|begin_of_text|>").size());
  EXPECT_THROW(tok.piece(tok.n_vocab(), false), sa::error);
}

// ---- SentencePiece -----------------------------------------------------------------------

const std::string sp_space = "\xE2\x96\x81";

struct spm_fixture {
  vocab_builder b;
  int32_t space, t, h, e, c, a, sp_t, he, th, sp_th, sp_the, ca, at, sp_c, ab, bc, lt, gt, ls;
  explicit spm_fixture(bool byte_tokens = true) {
    b.v.model = "llama";
    b.v.unk = b.add("<unk>", type_unknown);
    b.v.bos = b.add("<s>", type_control);
    b.v.eos = b.add("</s>", type_control);
    if (byte_tokens) {
      for (int i = 0; i < 256; ++i) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", i);
        b.add(name, type_byte);
      }
    }
    space = b.add(sp_space, type_normal, -10);
    t = b.add("t", type_normal, -10);
    h = b.add("h", type_normal, -10);
    e = b.add("e", type_normal, -10);
    c = b.add("c", type_normal, -10);
    a = b.add("a", type_normal, -10);
    b.add("b", type_normal, -10);
    sp_t = b.add(sp_space + "t", type_normal, -1.0f);
    he = b.add("he", type_normal, -2.0f);
    th = b.add("th", type_normal, -0.5f);
    sp_th = b.add(sp_space + "th", type_normal, -3.0f);
    sp_the = b.add(sp_space + "the", type_normal, -4.0f);
    ca = b.add("ca", type_normal, -5.0f);
    at = b.add("at", type_normal, -1.5f);
    sp_c = b.add(sp_space + "c", type_normal, -2.5f);
    ab = b.add("ab", type_normal, -7.0f);
    bc = b.add("bc", type_normal, -7.0f);
    lt = b.add("<", type_normal, -10);
    gt = b.add(">", type_normal, -10);
    ls = b.add("<s", type_normal, -1.0f);
    b.add("s", type_normal, -10);
  }
  int32_t byte(int v) const { return 3 + v; }
};

TEST(SentencePiece, MergesByScore) {
  spm_fixture f;
  sa::tokenizer tok(f.b.v);
  EXPECT_TRUE(tok.add_bos());
  // ▁ t h e ▁ c a t: th (-0.5), at (-1.5), ▁c (-2.5), ▁th (-3), ▁the (-4); ▁t and he lose
  // their characters to higher-scoring merges first.
  EXPECT_EQ(tok.encode("the cat", false, false), (ids{f.sp_the, f.sp_c, f.at}));
  EXPECT_EQ(tok.encode("the cat", true, false), (ids{f.b.v.bos, f.sp_the, f.sp_c, f.at}));
  EXPECT_EQ(tok.encode("the  cat", false, false), (ids{f.sp_the, f.space, f.sp_c, f.at}));
  EXPECT_EQ(tok.encode("", true, false), (ids{f.b.v.bos}));
  EXPECT_EQ(tok.encode("", false, false), (ids{}));
  f.b.v.add_eos = 1;
  EXPECT_EQ(sa::tokenizer(f.b.v).encode("the", true, false),
            (ids{f.b.v.bos, f.sp_the, f.b.v.eos}));
}

TEST(SentencePiece, EqualScoresLeftmost) {
  spm_fixture f;
  f.b.v.add_space_prefix = 0;
  EXPECT_EQ(sa::tokenizer(f.b.v).encode("abc", false, false), (ids{f.ab, f.c}));
  f.b.v.scores[static_cast<size_t>(f.bc)] = -6.0f;
  EXPECT_EQ(sa::tokenizer(f.b.v).encode("abc", false, false), (ids{f.a, f.bc}));
}

TEST(SentencePiece, ByteFallbackAndUnk) {
  spm_fixture f;
  sa::tokenizer tok(f.b.v);
  // "é" is not a piece: its two UTF-8 bytes become byte tokens.
  EXPECT_EQ(tok.encode("the \xC3\xA9", false, false),
            (ids{f.sp_the, f.space, f.byte(0xC3), f.byte(0xA9)}));
  EXPECT_EQ(tok.encode("\xFF", false, false), (ids{f.space, f.byte(0xFF)}));
  EXPECT_EQ(tok.piece(f.byte(0x41), false), "A");
  EXPECT_EQ(tok.piece(f.sp_the, false), " the");
  EXPECT_EQ(tok.piece(f.b.v.bos, false), "");
  EXPECT_EQ(tok.piece(f.b.v.bos, true), "<s>");

  spm_fixture no_bytes(false);
  sa::tokenizer tok2(no_bytes.b.v);
  // Without byte tokens a missing character becomes one unk.
  EXPECT_EQ(tok2.encode("\xC3\xA9\xC3\xA9 a", false, false),
            (ids{no_bytes.space, 0, 0, no_bytes.space, no_bytes.a}));
}

TEST(SentencePiece, SpacePrefixAtStartAndAfterEverySpecialToken) {
  // As llama.cpp and Hugging Face's legacy SentencePiece mode: Llama-2's "<s>[INST] Hi" is
  // [1, 733 '▁[', ...] there, and "a</s>b" ends in '▁b'.
  spm_fixture f;
  sa::tokenizer tok(f.b.v);
  EXPECT_EQ(tok.encode("the", false, true), (ids{f.sp_the}));
  EXPECT_EQ(tok.encode("<s>the", false, true), (ids{f.b.v.bos, f.sp_the}));
  EXPECT_EQ(tok.encode("a<s>the", false, true), (ids{f.space, f.a, f.b.v.bos, f.sp_the}));
  EXPECT_EQ(tok.encode("a</s>c", false, true), (ids{f.space, f.a, f.b.v.eos, f.sp_c}));
  // Adjacent specials: the text after the last one is prefixed once.
  EXPECT_EQ(tok.encode("<s></s>the", false, true), (ids{f.b.v.bos, f.b.v.eos, f.sp_the}));
  // With add_space_prefix off nothing is prefixed, after a special token either.
  f.b.v.add_space_prefix = 0;
  sa::tokenizer plain(f.b.v);
  EXPECT_EQ(plain.encode("the", false, false), (ids{f.th, f.e}));
  EXPECT_EQ(plain.encode("<s>the", false, true), (ids{f.b.v.bos, f.th, f.e}));
}

TEST(SentencePiece, NonLegacyModePrefixesOnlyTheStart) {
  // Hugging Face's legacy=False: "<s>the" has no marker before "the", "a</s>c" none before c.
  spm_fixture f;
  sa::tokenizer tok(f.b.v);
  sa::encode_options o;
  o.parse_special = true;
  o.space_prefix_after_special = false;
  EXPECT_EQ(tok.encode("the", o), (ids{f.sp_the}));
  EXPECT_EQ(tok.encode("<s>the", o), (ids{f.b.v.bos, f.th, f.e}));
  EXPECT_EQ(tok.encode("a</s>c", o), (ids{f.space, f.a, f.b.v.eos, f.c}));
  EXPECT_EQ(tok.encode("<s> the", o), (ids{f.b.v.bos, f.sp_the}));
  // Byte-level vocabularies have no marker either way.
  special_fixture g;
  sa::tokenizer bl(g.b.v);
  EXPECT_EQ(bl.encode("<|eot_id|>a", o), (ids{g.eot_id, 'a'}));
}

TEST(SpecialTokens, UnknownTokenTextIsTheUnknownTokenWhenParsed) {
  // `<unk>` written in the text maps to the unknown token's id with special-token parsing on
  // (llama.cpp and Hugging Face do); off, it is text.
  spm_fixture f;
  f.b.v.add_space_prefix = 0;
  sa::tokenizer tok(f.b.v);
  EXPECT_EQ(tok.encode("a<unk>c", false, true), (ids{f.a, f.b.v.unk, f.c}));
  const ids off = tok.encode("<unk>", false, false);
  EXPECT_EQ(std::count(off.begin(), off.end(), f.b.v.unk), 0);
  EXPECT_GT(off.size(), 1u);
}

TEST(SentencePiece, ControlTokensNeverComeFromMerges) {
  spm_fixture f;
  f.b.v.add_space_prefix = 0;
  sa::tokenizer tok(f.b.v);
  // "<s" + ">" would spell the control token "<s>": not merged unless parse_special.
  EXPECT_EQ(tok.encode("<s>", false, false), (ids{f.ls, f.gt}));
  EXPECT_EQ(tok.encode("<s>", false, true), (ids{f.b.v.bos}));
}

// ---- normalization -----------------------------------------------------------------------

// A qwen2-style byte-level vocabulary that knows "é" (U+00E9), "café", "Å" (U+00C5) and the
// Hangul syllable "한" (U+D55C) as tokens; the decomposed forms are only their bytes.
struct nfc_fixture {
  vocab_builder b;
  int32_t e_acute, caf, cafe, a_ring, han, im_start;
  explicit nfc_fixture(const std::string& pre) : b(byte_level(pre)) {
    e_acute = b.merge("\xC3", "\xA9");
    b.merge("c", "a");
    caf = b.merge("ca", "f");
    cafe = b.merge("caf", "\xC3\xA9");
    a_ring = b.merge("\xC3", "\x85");
    b.merge("\xED", "\x95");
    han = b.merge("\xED\x95", "\x9C");
    im_start = b.add("<|im_start|>", type_control);
  }
};

TEST(Normalization, WhichVocabulariesNormalize) {
  // Qwen's tokenizers normalize to NFC; Llama 3's, GPT-2's and unknown ones do not, nor do
  // SentencePiece vocabularies.
  EXPECT_TRUE(sa::tokenizer(byte_level("qwen2").v).normalizes_nfc());
  for (const char* pre : {"gpt2", "", "llama-bpe", "llama3", "llama-v3", "some-new-model"}) {
    EXPECT_FALSE(sa::tokenizer(byte_level(pre).v).normalizes_nfc()) << pre;
  }
  EXPECT_FALSE(sa::tokenizer(spm_fixture().b.v).normalizes_nfc());
}

TEST(Normalization, DecomposedAndPrecomposedTextGiveTheSameIdsUnderNfc) {
  const std::string cafe_composed = "caf\xC3\xA9", cafe_decomposed = "cafe\xCC\x81";
  const std::string han_composed = "\xED\x95\x9C";                          // U+D55C
  const std::string han_jamo = "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB";  // U+1112 1161 11AB
  const std::string angstrom = "\xE2\x84\xAB", a_ring = "\xC3\x85";         // U+212B, U+00C5
  const std::string bengali = "\xE0\xA7\x87\xE0\xA6\xBE";                  // U+09C7 U+09BE

  nfc_fixture q("qwen2");
  sa::tokenizer qwen(q.b.v);
  // The vocabulary's own normalization (NFC): both spellings give the precomposed ids.
  EXPECT_EQ(qwen.encode(cafe_composed, false, false), (ids{q.cafe}));
  EXPECT_EQ(qwen.encode(cafe_decomposed, false, false), (ids{q.cafe}));
  EXPECT_EQ(qwen.encode(han_jamo, false, false), (ids{q.han}));
  EXPECT_EQ(qwen.encode(angstrom, false, false), (ids{q.a_ring}));
  EXPECT_EQ(qwen.encode(bengali, false, false), bytes_of("\xE0\xA7\x8B"));  // U+09CB
  // Taken as given, the decomposed spellings are other ids (their bytes, here).
  EXPECT_EQ(encode_as_given(qwen, cafe_decomposed), (ids{q.caf, 'e', 0xCC, 0x81}));
  EXPECT_EQ(encode_as_given(qwen, han_jamo), bytes_of(han_jamo));
  EXPECT_EQ(encode_as_given(qwen, angstrom), bytes_of(angstrom));
  EXPECT_EQ(encode_as_given(qwen, bengali), bytes_of(bengali));
  EXPECT_EQ(encode_as_given(qwen, cafe_composed), (ids{q.cafe}));

  // A vocabulary that does not normalize (Llama 3's) does so only when asked.
  nfc_fixture l("llama-bpe");
  sa::tokenizer llama(l.b.v);
  EXPECT_NE(llama.encode(cafe_decomposed, false, false), llama.encode(cafe_composed, false, false));
  sa::encode_options o;
  o.norm = sa::normalization::nfc;
  EXPECT_EQ(llama.encode(cafe_decomposed, o), (ids{l.cafe}));
  EXPECT_EQ(llama.encode(han_jamo, o), (ids{l.han}));
}

TEST(Normalization, RunsBetweenSpecialTokensAndIllFormedBytes) {
  nfc_fixture q("qwen2");
  sa::tokenizer tok(q.b.v);
  // Special tokens are found in the raw text; the runs around them are normalized.
  EXPECT_EQ(tok.encode("<|im_start|>e\xCC\x81", false, true), (ids{q.im_start, q.e_acute}));
  EXPECT_EQ(tok.encode("e<|im_start|>\xCC\x81", false, true), (ids{'e', q.im_start, 0xCC, 0x81}));
  // Ill-formed bytes are kept as bytes, and nothing composes across them.
  EXPECT_EQ(tok.encode("e\xFF\xCC\x81", false, false), (ids{'e', 0xFF, 0xCC, 0x81}));
  EXPECT_EQ(tok.encode("e\xCC\x81\xC3", false, false), (ids{q.e_acute, 0xC3}));
  EXPECT_EQ(decode(tok, tok.encode("\x80" "cafe\xCC\x81\xE2\x82", false, false)),
            "\x80" "caf\xC3\xA9\xE2\x82");
}

TEST(Normalization, SentencePieceWhenAsked) {
  spm_fixture f;
  const int32_t e_acute = f.b.add("\xC3\xA9", type_normal, -1.0f);
  sa::tokenizer tok(f.b.v);
  const std::string decomposed = "e\xCC\x81";
  EXPECT_EQ(tok.encode(decomposed, false, false),
            (ids{f.space, f.e, f.byte(0xCC), f.byte(0x81)}));
  sa::encode_options o;
  o.norm = sa::normalization::nfc;
  EXPECT_EQ(tok.encode(decomposed, o), (ids{f.space, e_acute}));
}

// ---- concurrency and scale ---------------------------------------------------------------

TEST(Tokenizer, ConcurrentEncodeIsConsistent) {
  sa::tokenizer tok(round_trip_vocab("llama-bpe").v);
  std::vector<ids> expected;
  for (const char* text : round_trip_texts) expected.push_back(tok.encode(text, true, true));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep) {
        for (size_t i = 0; i < expected.size(); ++i) {
          if (tok.encode(round_trip_texts[i], true, true) != expected[i]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(Tokenizer, LongWordsAreNotQuadratic) {
  vocab_builder b = byte_level("llama-bpe");
  b.merge("a", "a");
  b.merge("aa", "aa");
  const int32_t a8 = b.merge("aaaa", "aaaa");
  sa::tokenizer tok(b.v);
  const std::string text(size_t{1} << 17, 'a');  // one pre-token
  const auto t0 = std::chrono::steady_clock::now();
  const ids enc = tok.encode(text, false, false);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(enc, ids(text.size() / 8, a8));
  EXPECT_LT(secs, 10.0);

  spm_fixture f;
  f.b.v.add_space_prefix = 0;
  sa::tokenizer spm(f.b.v);
  std::string abc;
  for (int i = 0; i < 40000; ++i) abc += "ab";
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(spm.encode(abc, false, false), ids(40000, f.ab));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 10.0);
}

// ---- validation --------------------------------------------------------------------------

TEST(Validation, UnsupportedModels) {
  for (const char* model : {"bert", "t5", "rwkv", ""}) {
    vocab_builder b = byte_level("gpt2");
    b.v.model = model;
    expect_error(b.v, SA_ERR_UNSUPPORTED, std::string("'") + model + "'");
  }
}

TEST(Validation, VocabularyShape) {
  sa::tokenizer_vocab empty;
  empty.model = "gpt2";
  expect_error(empty, SA_ERR_FORMAT, "empty");

  vocab_builder b = byte_level("gpt2");
  b.v.types.pop_back();
  expect_error(b.v, SA_ERR_FORMAT, "token_type");
  b = byte_level("gpt2");
  b.v.scores.push_back(0);
  expect_error(b.v, SA_ERR_FORMAT, "scores");
  b = byte_level("gpt2");
  b.v.types[77] = 9;
  expect_error(b.v, SA_ERR_FORMAT, "[77]");
  b = byte_level("gpt2");
  b.v.types.clear();  // absent types are fine
  b.v.scores.clear();
  EXPECT_NO_THROW(sa::tokenizer{b.v});
}

TEST(Validation, SpecialIdsInRange) {
  vocab_builder b = byte_level("gpt2");
  b.v.bos = 256;
  expect_error(b.v, SA_ERR_FORMAT, "bos_token_id = 256");
  b.v.bos = -2;
  expect_error(b.v, SA_ERR_FORMAT, "bos_token_id = -2");
  b.v.bos = -1;
  b.v.eos = 1000;
  expect_error(b.v, SA_ERR_FORMAT, "eos_token_id = 1000");
  b.v.eos = -1;
  b.v.pad = 300;
  expect_error(b.v, SA_ERR_FORMAT, "padding_token_id = 300");
  b.v.pad = -1;
  b.v.add_bos = 1;  // asked for, but there is no BOS
  expect_error(b.v, SA_ERR_FORMAT, "add_bos");
}

TEST(Validation, TokensMustBeUtf8) {
  vocab_builder b = byte_level("gpt2");
  b.add("ok");
  b.add("bad\xC3");  // id 257
  expect_error(b.v, SA_ERR_FORMAT, "tokens[257]");
  b = byte_level("gpt2");
  b.v.tokens[3] = "\xED\xA0\x80";  // a surrogate
  expect_error(b.v, SA_ERR_FORMAT, "tokens[3]");
}

TEST(Validation, MalformedMerges) {
  for (const char* bad : {"ab", "a  b", " a", "a ", "a b c", " ", ""}) {
    vocab_builder b = byte_level("gpt2");
    b.merge("a", "b");
    b.merge("c", "d");
    b.v.merges.push_back(bad);  // index 2
    expect_error(b.v, SA_ERR_FORMAT, "merges[2]");
  }
  vocab_builder b = byte_level("gpt2");
  b.merge("a", "b");
  b.v.merges.push_back("zz q");  // "zz" is not a token
  expect_error(b.v, SA_ERR_FORMAT, "merges[1]");
  b = byte_level("gpt2");
  b.v.merges.push_back("x y");  // "xy" is not a token
  expect_error(b.v, SA_ERR_FORMAT, "merges[0]");
}

TEST(Validation, BytesMustBeCovered) {
  vocab_builder b = byte_level("gpt2");
  b.v.tokens[0x41] = "<gone>";
  expect_error(b.v, SA_ERR_FORMAT, "0x41");

  spm_fixture f;
  f.b.v.tokens[static_cast<size_t>(f.byte(0x7F))] = "<0xZZ>";
  expect_error(f.b.v, SA_ERR_FORMAT, "tokens[130]");  // a byte token that names no byte
  f.b.v.types[static_cast<size_t>(f.byte(0x7F))] = type_normal;
  f.b.v.unk = -1;
  expect_error(f.b.v, SA_ERR_FORMAT, "<0x7F>");
  f.b.v.unk = 0;
  EXPECT_NO_THROW(sa::tokenizer{f.b.v});
}

// ---- utf8_stream -------------------------------------------------------------------------

std::string stream_all(const std::vector<std::string>& chunks) {
  sa::utf8_stream s;
  std::string out;
  for (const auto& c : chunks) {
    s.push(c, out);
    EXPECT_LE(s.pending(), 3u);
  }
  s.flush(out);
  EXPECT_EQ(s.pending(), 0u);
  return out;
}

TEST(Utf8Stream, EverySplitOfValidText) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z\xD7\x90\xE4\xB8\xAD"
                           "\xF4\x8F\xBF\xBF\xEF\xBF\xBD\xC2\x80";
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); ++j) {
      EXPECT_EQ(stream_all({text.substr(0, i), text.substr(i, j - i), text.substr(j)}), text)
          << i << " " << j;
    }
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(stream_all(bytes), text);

  // Only complete characters come out before flush.
  sa::utf8_stream s;
  std::string out;
  s.push("\xF0\x9F", out);
  EXPECT_EQ(out, "");
  EXPECT_EQ(s.pending(), 2u);
  s.push("\x98", out);
  EXPECT_EQ(out, "");
  EXPECT_EQ(s.pending(), 3u);
  s.push("\x80!", out);
  EXPECT_EQ(out, "\xF0\x9F\x98\x80!");
  EXPECT_EQ(s.pending(), 0u);
}

TEST(Utf8Stream, InvalidSequences) {
  const std::string r = "\xEF\xBF\xBD";
  const std::pair<std::string, std::string> cases[] = {
      // The Unicode standard's example of maximal subparts (chapter 3, U+FFFD substitution).
      {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
       "a" + r + r + r + "b" + r + "c" + r + r + "d"},
      {"\xC0\xAF", r + r},                   // overlong '/'
      {"\xC1\xBF", r + r},                   // overlong
      {"\xE0\x80\xAF", r + r + r},           // overlong 3-byte
      {"\xED\xA0\x80", r + r + r},           // surrogate U+D800
      {"\xF4\x90\x80\x80", r + r + r + r},   // U+110000
      {"\xF5", r},
      {"\xFF\xFE", r + r},
      {"\x80\x80", r + r},                   // stray continuation bytes
      {"\xF0\x9F\x98" "A", r + "A"},         // truncated, then a non-continuation byte
      {"\xE2\x82", r},                       // truncated at the end: flush
      {"\xF0\x90\x80", r},
      {"\xED\x9F\xBF", "\xED\x9F\xBF"},      // U+D7FF is fine
      {"\xEE\x80\x80", "\xEE\x80\x80"},      // U+E000 is fine
  };
  for (const auto& [in, expected] : cases) {
    EXPECT_EQ(stream_all({in}), expected) << sa_test::to_hex(in);
    std::vector<std::string> bytes;
    for (char c : in) bytes.emplace_back(1, c);
    EXPECT_EQ(stream_all(bytes), expected) << "byte by byte " << sa_test::to_hex(in);
  }
}

TEST(Utf8Stream, MatchesReferenceDecoder) {
  const auto lines = fixture_lines("utf8_replace_cases.txt");
  ASSERT_GE(lines.size(), 300u);
  std::mt19937 rng(5);
  for (const std::string& line : lines) {
    const auto fields = split(line, '\t');
    ASSERT_EQ(fields.size(), 2u) << line;
    const std::string in = sa_test::from_hex(fields[0]), expected = sa_test::from_hex(fields[1]);
    EXPECT_EQ(stream_all({in}), expected) << fields[0];
    // Any chunking gives the same result.
    std::vector<std::string> chunks;
    for (size_t pos = 0; pos < in.size();) {
      const size_t n = std::min(in.size() - pos, size_t{1} + rng() % 4);
      chunks.push_back(in.substr(pos, n));
      pos += n;
    }
    EXPECT_EQ(stream_all(chunks), expected) << "chunked " << fields[0];
  }
}

}  // namespace
