// Unicode normalization (NFC, and NFD on the way). The reference is independent of the
// implementation: tests/tokenizer/nfc_cases.txt holds what Python's unicodedata.normalize()
// makes of each case (tools/gen_nfc_fixture.py); the cases the tokenizer issue names are
// written out by hand, with their forms from the Unicode Character Database.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/unicode.h"

namespace {

std::string nfc(std::string_view s) {
  std::string out;
  sa::unicode::append_nfc(s, out);
  return out;
}

std::string nfd(std::string_view s) {
  std::string out;
  sa::unicode::append_nfd(s, out);
  return out;
}

std::string utf8(std::initializer_list<uint32_t> cps) {
  std::string out;
  for (uint32_t cp : cps) sa::unicode::append_utf8(out, cp);
  return out;
}

// The ill-formed subparts of s, in order (each as its bytes).
std::vector<std::string> ill_formed_parts(std::string_view s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < s.size();) {
    const auto ch = sa::unicode::decode_utf8(s, pos);
    if (ch.status != sa::unicode::utf8_status::ok) out.emplace_back(s.substr(pos, ch.len));
    pos += ch.len;
  }
  return out;
}

TEST(Nfc, MatchesPythonReference) {
  const std::string path = sa_test::test_data_dir() + "/tokenizer/nfc_cases.txt";
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "cannot open " << path;
  std::string line;
  size_t checked = 0, failed = 0, changed = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    ASSERT_NE(t2, std::string::npos) << line;
    const std::string input = sa_test::from_hex(line.substr(0, t1));
    const std::string c_hex = line.substr(t1 + 1, t2 - t1 - 1), d_hex = line.substr(t2 + 1);
    const std::string want_c = c_hex == "=" ? input : sa_test::from_hex(c_hex);
    const std::string want_d = d_hex == "=" ? input : sa_test::from_hex(d_hex);
    const std::string got_c = nfc(input), got_d = nfd(input);
    // NFC and NFD of each form agree with those of the input (the forms are stable).
    const bool ok = got_c == want_c && got_d == want_d && nfc(want_c) == want_c &&
                    nfc(want_d) == want_c && nfd(want_c) == want_d && nfd(want_d) == want_d;
    if (!ok && ++failed <= 20) {
      ADD_FAILURE() << "input " << sa_test::to_hex(input) << "\n  NFC got " << sa_test::to_hex(got_c)
                    << " want " << sa_test::to_hex(want_c) << "\n  NFD got " << sa_test::to_hex(got_d)
                    << " want " << sa_test::to_hex(want_d);
    }
    changed += want_c != input;
    ++checked;
  }
  EXPECT_EQ(failed, 0u);
  EXPECT_GE(checked, 2500u);
  EXPECT_GE(changed, 1000u);
}

TEST(Nfc, CasesFromTheTokenizerIssue) {
  // Combining accents compose with their base.
  EXPECT_EQ(nfc("cafe\xCC\x81"), "caf\xC3\xA9");
  EXPECT_EQ(nfc(utf8({'A', 0x30A})), utf8({0xC5}));
  // Decomposed Hangul: L V T jamo make one syllable; L V then T too.
  EXPECT_EQ(nfc(utf8({0x1112, 0x1161, 0x11AB, 0x1100, 0x1173, 0x11AF})), utf8({0xD55C, 0xAE00}));
  EXPECT_EQ(nfc(utf8({0xD558, 0x11AB})), utf8({0xD55C}));
  EXPECT_EQ(nfd(utf8({0xD55C})), utf8({0x1112, 0x1161, 0x11AB}));
  // Singletons: ANGSTROM SIGN, OHM SIGN, KELVIN SIGN.
  EXPECT_EQ(nfc(utf8({0x212B})), utf8({0xC5}));
  EXPECT_EQ(nfc(utf8({0x2126})), utf8({0x3A9}));
  EXPECT_EQ(nfc(utf8({0x212A})), "K");
  // Bengali two-part vowels: two starters that compose.
  EXPECT_EQ(nfc(utf8({0x995, 0x9C7, 0x9BE})), utf8({0x995, 0x9CB}));
  EXPECT_EQ(nfc(utf8({0x995, 0x9C7, 0x9D7})), utf8({0x995, 0x9CC}));
  EXPECT_EQ(nfd(utf8({0x9CB})), utf8({0x9C7, 0x9BE}));
}

TEST(Nfc, OrderingExclusionsAndBlocking) {
  // Canonical ordering: dot below (220) goes before dot above (230); then d + dot below
  // composes and the dot above stays (UAX #15's example).
  EXPECT_EQ(nfc(utf8({0x1E0B, 0x323})), utf8({0x1E0D, 0x307}));
  EXPECT_EQ(nfd(utf8({0x1E0B, 0x323})), utf8({'d', 0x323, 0x307}));
  EXPECT_EQ(nfc(utf8({'q', 0x307, 0x323})), utf8({'q', 0x323, 0x307}));
  // Equal classes keep their order, and only the first composes.
  EXPECT_EQ(nfc(utf8({'a', 0x301, 0x300})), utf8({0xE1, 0x300}));
  EXPECT_EQ(nfc(utf8({'a', 0x300, 0x301})), utf8({0xE0, 0x301}));
  // A mark of a lower class in between does not block (a + ring, with dot below first).
  EXPECT_EQ(nfc(utf8({'a', 0x323, 0x30A})), utf8({0x1EA1, 0x30A}));
  // Composition exclusions stay decomposed.
  EXPECT_EQ(nfc(utf8({0x958})), utf8({0x915, 0x93C}));
  EXPECT_EQ(nfc(utf8({0x915, 0x93C})), utf8({0x915, 0x93C}));
  EXPECT_EQ(nfc(utf8({0x2ADC})), utf8({0x2ADD, 0x338}));
  // Non-starter decomposition: U+0344 is U+0308 U+0301.
  EXPECT_EQ(nfc(utf8({0x344})), utf8({0x308, 0x301}));
  EXPECT_EQ(nfc(utf8({0x3B9, 0x344})), utf8({0x390}));
  // A starter in between blocks; a leading mark has nothing to compose with.
  EXPECT_EQ(nfc(utf8({'e', 'x', 0x301})), utf8({'e', 'x', 0x301}));
  EXPECT_EQ(nfc(utf8({0x301, 'e'})), utf8({0x301, 'e'}));
  // Beyond the BMP: Kaithi U+11099 + U+110BA.
  EXPECT_EQ(nfc(utf8({0x11099, 0x110BA})), utf8({0x1109A}));
  // Trailing jamo that do not compose, and a syllable that already has a trailing one.
  EXPECT_EQ(nfc(utf8({0xAC01, 0x11A8})), utf8({0xAC01, 0x11A8}));
  EXPECT_EQ(nfc(utf8({0xAC00, 0x11A7})), utf8({0xAC00, 0x11A7}));
  EXPECT_EQ(nfc(utf8({0xAC00, 0x11C3})), utf8({0xAC00, 0x11C3}));
}

TEST(Nfc, TablePrimitives) {
  using sa::unicode::combining_class;
  using sa::unicode::compose_pair;
  EXPECT_EQ(combining_class('a'), 0);
  EXPECT_EQ(combining_class(0x301), 230);
  EXPECT_EQ(combining_class(0x323), 220);
  EXPECT_EQ(combining_class(0x334), 1);
  EXPECT_EQ(combining_class(0x3099), 8);
  EXPECT_EQ(combining_class(0x1D165), 216);
  EXPECT_EQ(combining_class(0x10FFFF), 0);
  EXPECT_EQ(compose_pair('e', 0x301), 0xE9u);
  EXPECT_EQ(compose_pair(0x1100, 0x1161), 0xAC00u);
  EXPECT_EQ(compose_pair(0xAC00, 0x11A8), 0xAC01u);
  EXPECT_EQ(compose_pair(0xAC01, 0x11A8), 0u);
  EXPECT_EQ(compose_pair(0x915, 0x93C), 0u);  // excluded
  EXPECT_EQ(compose_pair('e', 'e'), 0u);
  EXPECT_STREQ(sa::unicode::nfc_tables_unicode_version, sa::unicode::tables_unicode_version);
}

TEST(Nfc, FastPathKeepsAsciiAndLatin1) {
  using sa::unicode::nfc_quick_yes;
  EXPECT_TRUE(nfc_quick_yes(""));
  EXPECT_TRUE(nfc_quick_yes("Hello, world!\n"));
  EXPECT_TRUE(nfc_quick_yes("caf\xC3\xA9 \xC3\x85"));  // é Å
  EXPECT_TRUE(nfc_quick_yes("\xC0\x80\xBF"));         // ill-formed bytes are kept anyway
  EXPECT_FALSE(nfc_quick_yes("\xFF"));                 // the full path keeps them too
  EXPECT_EQ(nfc("\xFF"), "\xFF");
  EXPECT_FALSE(nfc_quick_yes("cafe\xCC\x81"));
  EXPECT_FALSE(nfc_quick_yes("\xE4\xBD\xA0"));
  EXPECT_EQ(nfc("caf\xC3\xA9 \xC3\x85"), "caf\xC3\xA9 \xC3\x85");
  EXPECT_EQ(nfd("caf\xC3\xA9"), "cafe\xCC\x81");  // NFD has no such shortcut
  EXPECT_EQ(nfc(""), "");
  // Appends; does not replace.
  std::string out = "x";
  sa::unicode::append_nfc("e\xCC\x81", out);
  EXPECT_EQ(out, "x\xC3\xA9");
}

TEST(Nfc, IllFormedBytesAreKeptAndBlock) {
  // Kept as they are, and nothing composes or reorders across them.
  EXPECT_EQ(nfc("e\xFF\xCC\x81"), "e\xFF\xCC\x81");
  EXPECT_EQ(nfc("e\xCC\x81\xFF" "e\xCC\x81"), "\xC3\xA9\xFF\xC3\xA9");
  EXPECT_EQ(nfc("a\xCC\x87\x80\xCC\xA3"), "\xC8\xA7\x80\xCC\xA3");
  EXPECT_EQ(nfc("e\xCC\x81\xE2\x82"), "\xC3\xA9\xE2\x82");  // truncated at the end
  EXPECT_EQ(nfc("\xED\xA0\x80\xCC\x81"), "\xED\xA0\x80\xCC\x81");  // a surrogate
  EXPECT_EQ(nfc("\xC0\xAF" "e\xCC\x81"), "\xC0\xAF\xC3\xA9");  // an overlong
  EXPECT_EQ(nfd("\xF4\x90\x80\x80\xC3\xA9"), "\xF4\x90\x80\x80" "e\xCC\x81");

  // Byte soup: never a crash; the ill-formed parts are the same ones in the same order,
  // well-formed input stays well-formed, and normalizing again changes nothing.
  std::mt19937 rng(2024);
  const std::string interesting =
      "e\xCC\x81\xCC\xA3\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB\xE0\xA7\x87\xE0\xA6\xBE\xE2\x84\xAB"
      "\xC3\xA9\x80\xFF\xC3\xE2\x82";
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const size_t len = rng() % 40;
    for (size_t i = 0; i < len; ++i) {
      text += rng() % 4 ? interesting[rng() % interesting.size()] : static_cast<char>(rng() % 256);
    }
    const std::string once = nfc(text);
    EXPECT_EQ(ill_formed_parts(once), ill_formed_parts(text)) << sa_test::to_hex(text);
    EXPECT_EQ(sa::unicode::is_valid_utf8(once), sa::unicode::is_valid_utf8(text)) << sa_test::to_hex(text);
    EXPECT_EQ(nfc(once), once) << sa_test::to_hex(text);
    EXPECT_EQ(nfc(nfd(text)), once) << sa_test::to_hex(text);
  }
}

TEST(Nfc, LongRunsOfMarksStayFast) {
  // 200k combining marks of alternating classes after one base: canonical ordering is one
  // stable sort, not a quadratic pass; the result is ordered and loses nothing.
  std::string text = "a";
  for (int i = 0; i < 100000; ++i) text += "\xCC\x81\xCC\xA3";  // 230, 220
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out = nfc(text);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0);
  // a + dot below (the lowest class) composes to U+1EA1; the rest: 99999 dots below, then
  // 100000 acutes.
  std::string want = utf8({0x1EA1});
  for (int i = 0; i < 99999; ++i) want += "\xCC\xA3";
  for (int i = 0; i < 100000; ++i) want += "\xCC\x81";
  EXPECT_EQ(out.size(), want.size());
  EXPECT_TRUE(out == want);
}

}  // namespace
