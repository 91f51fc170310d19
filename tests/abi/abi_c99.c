/* A C99 program against sa.h: the header compiles as strict C and the ABI behaves as its
** comments say, including misuse. Usage: abi_c99 MODEL.gguf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sa/sa.h"

static int failures = 0, checks = 0;
#define CHECK(cond)                                                    \
  do {                                                                 \
    ++checks;                                                          \
    if (!(cond)) {                                                     \
      ++failures;                                                      \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                  \
  } while (0)

static int32_t cancel_after_first(size_t done, size_t total, void *user_data) {
  (void)done;
  (void)total;
  ++*(int *)user_data;
  return 1;
}

int main(int argc, char **argv) {
  sa_model *model = NULL;
  sa_session *session = NULL;
  sa_session_params sp;
  sa_model_desc desc;
  sa_stats stats;
  int32_t tokens[64];
  uint64_t positions[80];
  size_t n = 0, len = 0, count = 0;
  int32_t tok = -1;
  int calls = 0, i;
  const char *junk_path = "abi_c99_junk.gguf";
  FILE *junk;

  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }

  /* Version and status strings. */
  CHECK(sa_version_number() == SA_VERSION_NUMBER);
  CHECK(strcmp(sa_version_string(), SA_VERSION_STRING) == 0);
  CHECK(strcmp(sa_errstr(SA_OK), "ok") == 0);
  CHECK(strcmp(sa_errstr(12345), "unknown status") == 0);

  /* NULL arguments and handles. */
  CHECK(sa_model_load(NULL, NULL, &model) == SA_ERR_INVALID_ARG && model == NULL);
  CHECK(sa_model_load("x", NULL, NULL) == SA_ERR_INVALID_ARG);
  CHECK(sa_model_load_from_memory(NULL, 4, NULL, &model) == SA_ERR_INVALID_ARG && model == NULL);
  CHECK(sa_model_load_from_memory("GGUF", 4, NULL, &model) == SA_ERR_FORMAT && model == NULL);
  CHECK(sa_model_info(NULL, &desc) == SA_ERR_MISUSE);
  CHECK(strstr(sa_last_error(), "NULL") != NULL);
  CHECK(sa_session_create(NULL, NULL, &session) == SA_ERR_MISUSE && session == NULL);
  CHECK(sa_prefill(NULL, tokens, 1, NULL, NULL) == SA_ERR_MISUSE);
  CHECK(sa_decode_step(NULL, 0, &tok) == SA_ERR_MISUSE);
  CHECK(sa_session_logits(NULL, NULL) == NULL);
  CHECK(strlen(sa_session_errmsg(NULL)) > 0);
  sa_model_destroy(NULL);
  sa_session_destroy(NULL);
  sa_detokenizer_destroy(NULL);

  /* Files that are missing or not GGUF. */
  CHECK(sa_model_load("no/such/file.gguf", NULL, &model) == SA_ERR_IO);
  CHECK(strstr(sa_last_error(), "no/such/file.gguf") != NULL);
  junk = fopen(junk_path, "wb");
  CHECK(junk != NULL);
  if (junk) {
    fputs("this is not a model", junk);
    fclose(junk);
    CHECK(sa_model_load(junk_path, NULL, &model) == SA_ERR_FORMAT && model == NULL);
    remove(junk_path);
  }

  /* A real model. */
  CHECK(sa_model_load(argv[1], NULL, &model) == SA_OK);
  if (!model) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], sa_last_error());
    return 1;
  }
  memset(&desc, 0, sizeof desc);
  CHECK(sa_model_info(model, &desc) == SA_ERR_INVALID_ARG); /* struct_size not set */
  desc.struct_size = sizeof desc;
  CHECK(sa_model_info(model, &desc) == SA_OK);
  CHECK(strcmp(desc.architecture, "llama") == 0 && desc.n_layers > 0 && desc.n_vocab > 0);

  CHECK(sa_tokenize(model, "hello world", 11, SA_TOKENIZE_ADD_SPECIAL, tokens, 64, &n) == SA_OK);
  CHECK(n > 1 && tokens[0] == desc.bos_token);
  CHECK(sa_tokenize(model, "hello world", 11, 0, tokens, 1, &n) == SA_ERR_BUFFER_TOO_SMALL && n > 1);
  CHECK(sa_token_to_piece(model, desc.n_vocab, 0, NULL, 0, &len) == SA_ERR_INVALID_ARG);

  sa_session_params_init(&sp);
  sp.n_threads = 2;
  sp.top_p = 2.0f;
  CHECK(sa_session_create(model, &sp, &session) == SA_ERR_INVALID_ARG && session == NULL);
  CHECK(strstr(sa_last_error(), "top_p") != NULL);
  sp.top_p = 1.0f;
  CHECK(sa_session_create(model, &sp, &session) == SA_OK);
  CHECK(sa_sample(session, &tok) == SA_ERR_MISUSE); /* nothing prefilled yet */

  CHECK(sa_tokenize(model, "hello world", 11, SA_TOKENIZE_ADD_SPECIAL, tokens, 64, &n) == SA_OK);
  /* Cancelling leaves the session untouched. */
  CHECK(sa_prefill(session, tokens, n, cancel_after_first, &calls) == SA_ERR_CANCELLED);
  CHECK(calls == 1 && sa_session_logits(session, NULL) == NULL);
  CHECK(sa_prefill(session, tokens, n, NULL, NULL) == SA_OK);
  CHECK(sa_session_logits(session, NULL) != NULL);
  CHECK(sa_sample(session, &tok) >= SA_OK && tok >= 0 && tok < desc.n_vocab);

  /* The model handle can go first: the session keeps the weights. */
  sa_model_destroy(model);
  CHECK(sa_model_info(model, &desc) == SA_ERR_MISUSE);
  for (i = 0; i < 4; ++i) CHECK(sa_decode_step(session, tok, &tok) >= SA_OK);
  CHECK(sa_decode_step(session, -1, &tok) == SA_ERR_INVALID_ARG);
  CHECK(strstr(sa_session_errmsg(session), "vocabulary") != NULL);
  stats.struct_size = sizeof stats;
  CHECK(sa_session_stats(session, &stats) == SA_OK);
  CHECK(stats.n_tokens == n + 4 && stats.kv_bytes_held > 0);
  /* The dense memory holds every position of the history, in order. */
  CHECK(sa_session_memory_positions(session, 0, 0, NULL, 0, &count) == SA_ERR_BUFFER_TOO_SMALL);
  CHECK(count == n + 4);
  CHECK(sa_session_memory_positions(session, -1, -1, positions, 80, &count) == SA_OK);
  CHECK(count == n + 4 && positions[0] == 0 && positions[count - 1] == count - 1);
  CHECK(sa_session_memory_positions(session, desc.n_layers, 0, positions, 80, &count) ==
        SA_ERR_INVALID_ARG);

  sa_session_destroy(session);
  CHECK(sa_decode_step(session, 0, &tok) == SA_ERR_MISUSE);
  sa_session_destroy(session); /* second destroy: no-op */

  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
