#include "session_checks.h"

#include <cstdio>
#include <cstring>

#include "test_util.h"
#include "tiny_model.h"

namespace sa_test {

std::vector<std::vector<float>> greedy_logits(sa::session& s, const std::vector<int32_t>& prompt, int n) {
  s.prefill(prompt, nullptr);
  std::vector<std::vector<float>> all;
  for (int i = 0; i < n; ++i) {
    s.decode(s.sample());
    all.push_back(s.logits());
  }
  return all;
}

void tiny_model_api::SetUp() {
  path_ = temp_path("api.gguf");
  db_ = temp_path("api.db");
  tiny_model_options o;
  o.n_ctx_train = 512;
  write_tiny_model(path_, o);
  ASSERT_EQ(sa_model_load(path_.c_str(), nullptr, &model_), SA_OK) << sa_last_error();
  sa_session_params_init(&p_);
  p_.backend = SA_BACKEND_CPU;
}

void tiny_model_api::TearDown() {
  sa_model_destroy(model_);
  std::remove(path_.c_str());
  std::remove(db_.c_str());
}

std::vector<float> session_logits(const sa_session* s) {
  int32_t n = 0;
  const float* l = sa_session_logits(s, &n);
  return l ? std::vector<float>(l, l + n) : std::vector<float>();
}

std::vector<int32_t> session_tokens(const sa_session* s) {
  const int32_t* t = nullptr;
  size_t n = 0;
  EXPECT_EQ(sa_session_tokens(s, &t, &n), SA_OK);
  return std::vector<int32_t>(t, t + n);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void remove_store(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

int32_t first_cuda_device() {
  for (int32_t i = 0; i < sa_backend_count(); ++i) {
    sa_backend_desc d{};
    d.struct_size = sizeof d;
    if (sa_backend_info(i, &d) == SA_OK && d.kind == SA_BACKEND_CUDA) return d.device;
  }
  return -1;
}

resume_stats expect_bitwise_resume(sa_model* model, const sa_session_params& p,
                                   const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& more, size_t split) {
  resume_stats out;
  out.saved.struct_size = out.resumed.struct_size = sizeof(sa_stats);
  sa_session* a = nullptr;
  EXPECT_EQ(sa_session_create(model, &p, &a), SA_OK) << sa_last_error();
  if (!a) return out;
  EXPECT_EQ(sa_prefill(a, prompt.data(), prompt.size(), nullptr, nullptr), SA_OK) << sa_session_errmsg(a);
  for (size_t i = 0; i < split; ++i) EXPECT_EQ(sa_decode_step(a, more[i], nullptr), SA_OK) << sa_session_errmsg(a);
  EXPECT_EQ(sa_session_save(a), SA_OK) << sa_session_errmsg(a);
  std::vector<std::vector<float>> want;
  for (size_t i = split; i < more.size(); ++i) {
    EXPECT_EQ(sa_decode_step(a, more[i], nullptr), SA_OK) << sa_session_errmsg(a);
    want.push_back(session_logits(a));
  }
  EXPECT_EQ(sa_session_stats(a, &out.saved), SA_OK);
  sa_session_destroy(a);
  sa_session* b = nullptr;
  EXPECT_EQ(sa_session_resume(model, &p, &b), SA_OK) << sa_last_error();
  if (!b) return out;
  for (size_t i = split; i < more.size(); ++i) {
    EXPECT_EQ(sa_decode_step(b, more[i], nullptr), SA_OK) << sa_session_errmsg(b);
    EXPECT_EQ(session_logits(b), want[i - split]) << "step " << i;
  }
  EXPECT_EQ(sa_session_stats(b, &out.resumed), SA_OK);
  sa_session_destroy(b);
  return out;
}

}  // namespace sa_test
