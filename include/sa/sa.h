/*
** sa.h — the C interface of the sa SDK.
**
** sa runs Llama-family language models stored in GGUF files and decodes long contexts with
** sparse attention. This header is the whole public contract: anything not declared here is
** private and may change without notice. It is plain C99 and includes only <stddef.h> and
** <stdint.h> (plus the generated sa_version.h).
**
** Conventions used throughout:
**   - Every fallible function returns an sa_status. SA_OK is 0; SA_DONE is a non-error
**     "finished" signal; every other code is an error, and a message saying what was wrong
**     is available from sa_last_error() on the calling thread, and for session calls also
**     from sa_session_errmsg().
**   - ^A call that fails leaves its objects exactly as they were before the call.
**   - ^When memory runs out (an allocation of the library's, or of SQLite's in the session
**     store), the call returns SA_ERR_NOMEM with a message and, like any failed call, changes
**     nothing: the model, the session (its history, logits, KV memory and sampler) and the
**     store (which keeps its previous save) are as they were and go on working. The one
**     exception is a decode step of a bounded memory (see sa_decode_step()).
**   - Objects are opaque and used through pointers. Constructors return them through an
**     out-parameter named out_*; destructors return void and accept NULL as a no-op.
**   - ^Passing NULL, or a handle that was already destroyed, where a handle is required
**     returns SA_ERR_MISUSE instead of crashing. (A destroyed handle is recognised as long
**     as its address has not been reused by a newer object of the same kind.)
**   - Params and info structs begin with a uint32_t struct_size that the caller sets to
**     sizeof the struct it was compiled against (the *_init functions do this). Structs only
**     grow at the end, so a program built against an older header keeps working. A
**     struct_size larger than this library's is accepted when every byte past the fields it
**     knows is zero (a newer header's defaults), and refused with SA_ERR_UNSUPPORTED naming
**     the struct when one is not (a setting this version cannot honour).
**   - The library never returns heap memory the caller must free. Strings and arrays it
**     returns stay valid until the documented point (usually the next call on the same
**     handle).
**   - No C++ exception, abort() or exit() ever leaves the library.
**
** Objects and lifetimes:
**
**     sa_model  (weights + tokenizer, immutable after load, shareable between threads)
**       ├── sa_session       one conversation: token history, KV memory, sampler state
**       └── sa_detokenizer   streaming token → UTF-8 text
**
**   A session or detokenizer keeps its model alive: sa_model_destroy() invalidates the model
**   handle at once, but the weights are released only when the last session and detokenizer
**   made from it are destroyed. This makes destruction order free for garbage-collected hosts.
**
** Threading:
**   - Functions that take only a const sa_model * (tokenize, info, ...) may be called from any
**     number of threads at once.
**   - An sa_session or sa_detokenizer must be used by one thread at a time; different sessions
**     may run on different threads concurrently, also when they share a model.
**   - sa_last_error() is per thread.
*/
#ifndef SA_H
#define SA_H

#include <stddef.h>
#include <stdint.h>

#include "sa_version.h"

#if defined(_WIN32)
#  if defined(SA_BUILD)
#    define SA_API __declspec(dllexport)
#  elif defined(SA_SHARED)
#    define SA_API __declspec(dllimport)
#  else
#    define SA_API
#  endif
#elif defined(__GNUC__)
#  define SA_API __attribute__((visibility("default")))
#else
#  define SA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================
** Version
**
** SA_VERSION_* (sa_version.h) describe the header you compiled against; the functions below
** describe the library you are linked with. Check at start-up that the major versions agree.
*/

/* sa_version_number — the library's version as major*1000000 + minor*1000 + patch. */
SA_API int32_t sa_version_number(void);

/* sa_version_string — the library's version as "MAJOR.MINOR.PATCH"; static storage. */
SA_API const char *sa_version_string(void);

/* ========================================================================================
** Status codes
*/
typedef int32_t sa_status;

#define SA_OK                    0  /* success */
#define SA_DONE                  1  /* success, and generation ended: the token is end-of-generation */
#define SA_ERR_INVALID_ARG       2  /* an argument is out of range or malformed */
#define SA_ERR_MISUSE            3  /* NULL or destroyed handle, or a call in the wrong state */
#define SA_ERR_IO                4  /* a file could not be opened, read or mapped */
#define SA_ERR_FORMAT            5  /* a file is malformed, truncated or inconsistent */
#define SA_ERR_UNSUPPORTED       6  /* valid input this build cannot handle (type, architecture, option) */
#define SA_ERR_NOMEM             7  /* an allocation failed */
#define SA_ERR_BACKEND           8  /* the compute backend failed */
#define SA_ERR_STORE             9  /* the session store failed or holds foreign/corrupt data */
#define SA_ERR_CONTEXT_FULL     10  /* the session's memory cannot take more tokens */
#define SA_ERR_CANCELLED        11  /* a progress callback asked to stop */
#define SA_ERR_BUFFER_TOO_SMALL 12  /* an output buffer is too small; the needed size is reported */
#define SA_ERR_INTERNAL         13  /* a bug in sa; the message says where */

/* sa_errstr — a short static English description of a status code ("unknown status" for codes
** this library does not know). Never NULL. */
SA_API const char *sa_errstr(sa_status status);

/* sa_last_error — the message of the most recent failed call made on this thread, or "" if
** none has failed yet. ^The string stays valid until the next failing call on this thread.
** Successful calls do not clear it. Never NULL. */
SA_API const char *sa_last_error(void);

/* ========================================================================================
** Model
*/
typedef struct sa_model sa_model;

typedef struct sa_model_params {
  uint32_t struct_size; /* sizeof(sa_model_params) */
  int32_t use_mmap;     /* 1 (default): map the file; 0: read it into memory; other values:
                           SA_ERR_INVALID_ARG */
} sa_model_params;

/* sa_model_params_init — fill *params with the defaults and set struct_size. NULL: no-op. */
SA_API void sa_model_params_init(sa_model_params *params);

/*
** sa_model_load — load a GGUF model file.
**
** [in]  path       file name, NUL-terminated; not NULL.
** [in]  params     NULL for defaults.
** [out] out_model  receives the model on SA_OK and NULL on failure; not NULL.
**
** Every header field, key, offset, size, alignment, type and shape is validated before use;
** weights of types F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K are accepted, for the
** architectures llama (also Mistral-style files), qwen2 and qwen3.
**
** Returns SA_OK; SA_ERR_IO when the file cannot be opened or mapped; SA_ERR_FORMAT when it is
** not a valid GGUF model (the message names the key, tensor or offset); SA_ERR_UNSUPPORTED for
** an unknown architecture or tensor type; SA_ERR_INVALID_ARG for NULL arguments or bad params;
** SA_ERR_NOMEM.
** Threading: any thread. Ownership: destroy the model with sa_model_destroy().
*/
SA_API sa_status sa_model_load(const char *path, const sa_model_params *params,
                               sa_model **out_model);

/*
** sa_model_load_from_memory — load a GGUF model from a caller's buffer (a model embedded in
** the application's binary, read from an archive, received over a network).
**
** [in]  data       the GGUF bytes; not NULL unless size is 0.
** [in]  size       bytes at data.
** [in]  params     NULL for defaults; use_mmap is ignored (there is no file to map).
** [out] out_model  receives the model on SA_OK and NULL on failure; not NULL.
**
** The bytes are validated as sa_model_load validates a file. Ownership: the library copies
** the buffer before it returns, so the caller may free or reuse it at once; the copy (size
** bytes) lives as long as the model or any session made from it. Returns SA_OK; SA_ERR_FORMAT
** when the bytes are not a valid GGUF model (an empty buffer included; the message names the
** key, tensor or offset); SA_ERR_UNSUPPORTED for an unknown architecture or tensor type;
** SA_ERR_INVALID_ARG for NULL arguments or bad params; SA_ERR_NOMEM when the copy cannot be
** allocated. Threading: any thread. Ownership of the model: destroy it with
** sa_model_destroy().
*/
SA_API sa_status sa_model_load_from_memory(const void *data, size_t size, const sa_model_params *params,
                                           sa_model **out_model);

/* sa_model_destroy — release the model handle. Sessions and detokenizers created from it stay
** valid and keep the weights alive until they are destroyed. NULL or an already destroyed
** handle: no-op. */
SA_API void sa_model_destroy(sa_model *model);

/* Description of a loaded model. Strings are NUL-terminated, truncated to fit. */
typedef struct sa_model_desc {
  uint32_t struct_size;     /* set by the caller: sizeof(sa_model_desc) */
  char architecture[32];    /* general.architecture: "llama", "qwen2", "qwen3" */
  char name[128];           /* general.name, or "" */
  int32_t n_layers;         /* decoder blocks */
  int32_t n_heads;          /* query heads */
  int32_t n_kv_heads;       /* key/value heads (GQA when fewer than n_heads) */
  int32_t head_dim;         /* dimension of one head */
  int32_t n_embd;           /* residual stream width */
  int32_t n_ff;             /* feed-forward hidden width */
  int32_t n_ctx_train;      /* context length the model was trained with */
  int32_t n_vocab;          /* tokens in the vocabulary (= length of the logits) */
  int32_t bos_token;        /* beginning-of-sequence token, or -1 */
  int32_t eos_token;        /* end-of-sequence token, or -1 */
  float rope_freq_base;     /* RoPE base frequency */
  uint64_t n_params;        /* parameters in all weight tensors */
  uint64_t weight_bytes;    /* bytes of all weight tensors as stored */
  int32_t tokenizer_nfc;    /* 1 when sa_tokenize normalizes text to NFC unless told not to,
                               0 when it does not unless told to (see sa_tokenize) */
} sa_model_desc;

/*
** sa_model_info — describe a model.
**
** [in]  model  not NULL.
** [out] out    struct_size must be set by the caller; fields up to that size are filled.
** Returns SA_OK, SA_ERR_MISUSE (bad handle), SA_ERR_INVALID_ARG (out NULL or struct_size too
** small to hold struct_size itself). Threading: any thread.
*/
SA_API sa_status sa_model_info(const sa_model *model, sa_model_desc *out);

/*
** sa_model_meta_string — read a string-valued (or scalar, rendered as text) GGUF metadata key,
** e.g. "tokenizer.chat_template" or "general.license".
**
** [out] buf, capacity   receive the NUL-terminated value; buf may be NULL when capacity is 0
**                       (NULL with a capacity: SA_ERR_INVALID_ARG).
** [out] out_len         receives the value's length without the NUL; may be NULL.
** Returns SA_OK; SA_ERR_INVALID_ARG when the key is absent or is an array;
** SA_ERR_BUFFER_TOO_SMALL (with *out_len set) when capacity <= length; SA_ERR_MISUSE.
*/
SA_API sa_status sa_model_meta_string(const sa_model *model, const char *key, char *buf,
                                      size_t capacity, size_t *out_len);

/* ========================================================================================
** Tokens and text
*/

/* Flags for sa_tokenize(). */
#define SA_TOKENIZE_ADD_SPECIAL     1u /* add BOS/EOS where the model's metadata asks for them */
#define SA_TOKENIZE_PARSE_SPECIAL   2u /* text such as "<|im_start|>" becomes its control token
                                          (control, user-defined and unknown tokens such as
                                          "<unk>"); with SentencePiece vocabularies the text
                                          after each such token gets the leading-space marker,
                                          as llama.cpp and Hugging Face's legacy mode give it
                                          (unless SA_TOKENIZE_SPM_NON_LEGACY) */
#define SA_TOKENIZE_NFC             4u /* normalize the text to NFC whatever the model's
                                          metadata says (see "Normalization" below) */
#define SA_TOKENIZE_NO_NORMALIZE    8u /* never normalize: the text is tokenized exactly as
                                          given, also for models that normalize */
#define SA_TOKENIZE_SPM_NON_LEGACY 16u /* SentencePiece vocabularies: only text at the start
                                          of the input gets the leading-space marker, not the
                                          text after each special token (Hugging Face's
                                          legacy=False); no effect on byte-level ones */

/*
** sa_tokenize — split UTF-8 text into tokens with the model's own tokenizer (byte-level BPE
** or SentencePiece-style, from the GGUF metadata).
**
** [in]  text, text_len  the text; may contain NUL bytes; text may be NULL when text_len is 0.
** [in]  flags           SA_TOKENIZE_* flags; SA_TOKENIZE_NFC together with
**                       SA_TOKENIZE_NO_NORMALIZE, or a bit not defined above, is
**                       SA_ERR_INVALID_ARG.
** [out] tokens          room for capacity tokens; may be NULL when capacity is 0 (NULL with a
**                       capacity: SA_ERR_INVALID_ARG).
** [out] out_n           receives the number of tokens; not NULL.
** Returns SA_OK; SA_ERR_BUFFER_TOO_SMALL when capacity < *out_n (nothing useful is written,
** call again with a larger buffer); SA_ERR_MISUSE; SA_ERR_INVALID_ARG.
** Bytes that are not valid UTF-8 are tokenized as bytes; nothing is lost. Without
** normalization the pieces of the tokens (sa_token_to_piece, special tokens rendered) join to
** exactly the text; with it, to the text as normalized.
** Threading: any thread.
**
** Normalization: some tokenizers put their input in Unicode Normalization Form C first, so
** that a decomposed "e" + U+0301 COMBINING ACUTE ACCENT gives the ids of the precomposed
** U+00E9, as do decomposed Hangul jamo sequences of their syllable, and singletons such as
** U+212B ANGSTROM SIGN those of U+00C5. GGUF files do not record a tokenizer's normalizer,
** so sa applies NFC by default where the vocabulary implies it: byte-level BPE vocabularies
** whose tokenizer.ggml.pre is "qwen2" (Qwen's tokenizers normalize to NFC). Vocabularies with
** any other pre-tokenizer ("llama-bpe", "llama3", "gpt2", unknown ones) and SentencePiece ones
** (tokenizer.ggml.model "llama") are not normalized by default. sa_model_desc.tokenizer_nfc
** tells which applies to a model; SA_TOKENIZE_NFC and SA_TOKENIZE_NO_NORMALIZE override it.
** What is applied is full canonical NFC as Unicode Standard Annex #15 defines it (canonical
** decomposition, canonical ordering, canonical composition with the composition exclusions;
** the Unicode version of the library's tables is 14.0), and nothing else (no compatibility
** mapping, case folding or whitespace change). It applies to each run of text on its own: with
** SA_TOKENIZE_PARSE_SPECIAL the special tokens are found in the text as given and the text
** between them is normalized. Bytes that are not valid UTF-8 are kept as they are; nothing
** reorders or composes across them.
*/
SA_API sa_status sa_tokenize(const sa_model *model, const char *text, size_t text_len,
                             uint32_t flags, int32_t *tokens, size_t capacity, size_t *out_n);

/* Flags for sa_token_to_piece() and sa_detokenizer_create(). */
#define SA_PIECE_RENDER_SPECIAL 1u /* control tokens render as their text instead of "" */

/*
** sa_token_to_piece — the raw bytes one token stands for. A piece can be part of a multi-byte
** UTF-8 character; use an sa_detokenizer to print a stream safely.
**
** [out] buf, capacity  receive the bytes (no NUL is added); buf may be NULL when capacity is 0
**                      (NULL with a capacity: SA_ERR_INVALID_ARG).
** [out] out_len        receives the length; not NULL.
** Returns SA_OK; SA_ERR_INVALID_ARG for a token outside [0, n_vocab);
** SA_ERR_BUFFER_TOO_SMALL (with *out_len set); SA_ERR_MISUSE. Threading: any thread.
*/
SA_API sa_status sa_token_to_piece(const sa_model *model, int32_t token, uint32_t flags,
                                   char *buf, size_t capacity, size_t *out_len);

/* sa_token_is_eog — 1 when the token ends generation (EOS, EOT or a template end marker such
** as <|im_end|>), 0 otherwise, also for invalid models or tokens. */
SA_API int32_t sa_token_is_eog(const sa_model *model, int32_t token);

typedef struct sa_detokenizer sa_detokenizer;

/* sa_detokenizer_create — a streaming decoder that turns tokens into text that never splits a
** UTF-8 character. Returns SA_OK, SA_ERR_MISUSE, SA_ERR_INVALID_ARG, SA_ERR_NOMEM. */
SA_API sa_status sa_detokenizer_create(const sa_model *model, uint32_t flags,
                                       sa_detokenizer **out_detokenizer);

/*
** sa_detokenizer_push — add one token; write the text that is now complete.
**
** Bytes of a character that is not complete yet are held back (at most 3) and written by a
** later push or by sa_detokenizer_flush(). Bytes that can never form valid UTF-8 are written
** as U+FFFD (3 bytes each). ^A capacity of 3 × (the longest piece + 3) bytes always suffices.
** [out] buf, capacity, out_len  as for sa_token_to_piece(); out_len not NULL.
** Returns SA_OK; SA_ERR_BUFFER_TOO_SMALL (state unchanged, *out_len = size needed);
** SA_ERR_INVALID_ARG (bad token); SA_ERR_MISUSE.
*/
SA_API sa_status sa_detokenizer_push(sa_detokenizer *detokenizer, int32_t token, char *buf,
                                     size_t capacity, size_t *out_len);

/* sa_detokenizer_flush — write held-back bytes (an incomplete character becomes U+FFFD) and
** reset. Same buffer rules and statuses as sa_detokenizer_push(). */
SA_API sa_status sa_detokenizer_flush(sa_detokenizer *detokenizer, char *buf, size_t capacity,
                                      size_t *out_len);

/* sa_detokenizer_destroy — NULL or destroyed: no-op. */
SA_API void sa_detokenizer_destroy(sa_detokenizer *detokenizer);

/* ========================================================================================
** Session
*/
typedef struct sa_session sa_session;

/* Compute backends (sa_session_params.backend, sa_backend_desc.kind). */
#define SA_BACKEND_AUTO 0 /* the best backend this build and machine offer: the first CUDA
                             device when there is one, else the first Vulkan GPU (not a
                             software one such as lavapipe), otherwise the CPU; the CPU for
                             sessions with a speculation (see below) */
#define SA_BACKEND_CPU  1
#define SA_BACKEND_CUDA 2 /* NVIDIA GPUs (a build with the CUDA backend, a driver and a GPU) */
#define SA_BACKEND_VULKAN 3 /* any Vulkan 1.2 device with buffer device addresses and subgroup
                               arithmetic: AMD, Intel, Apple (MoltenVK), NVIDIA, Mesa's lavapipe
                               (a build with the Vulkan backend and a Vulkan loader) */

/* Element type of the KV cache (sa_session_params.kv_type). */
#define SA_KV_DEFAULT 0 /* the backend's choice: F32 on the CPU, F16 on a GPU */
#define SA_KV_F32     1
#define SA_KV_F16     2 /* half the memory and bytes read of F32; IEEE binary16 */
#define SA_KV_BF16    3 /* as F16 in size, with F32's range and 8 bits of mantissa */

/* KV memory (sa_session_params.memory). */
#define SA_MEMORY_DENSE     0 /* every token's K/V kept (up to n_ctx); attention reads all */
#define SA_MEMORY_STREAMING 1 /* StreamingLLM: n_sinks first tokens + a sliding window; the
                                 stream is unbounded, memory constant */
#define SA_MEMORY_CASCADE   2 /* Cascading KV Cache: n_sinks + n_cascades sub-caches that keep
                                 tokens by an EMA of their attention; unbounded, constant memory */

/* Query-aware page sparsity (sa_session_params.sparse) over the full cache. SA_MEMORY_FULL is
** the dense memory under the name the sparse methods use for it: every token's K/V is kept, in
** pages of page_size tokens, with the element-wise min and max of each page's keys (after RoPE)
** per KV head. A prefill is always dense; each decode step attends, in every layer from
** dense_layers on, to a subset of the pages chosen for its query (or an estimate from one).
** Budget: pages = max(min_pages, ceil(budget / page_size)) per head, where budget is
** budget_tokens or budget_ratio x the tokens held; the sink_pages first and local_pages newest
** pages (the page of the new token included) always count in it; when every page fits, the
** step is dense. */
#define SA_MEMORY_FULL SA_MEMORY_DENSE

#define SA_SPARSE_NONE       0 /* dense attention */
#define SA_SPARSE_QUEST      1 /* Quest: top pages by the bound sum_i max(q_i kmax_i, q_i kmin_i) */
#define SA_SPARSE_VATTENTION 2 /* vAttention: sinks + local + top-k exactly, plus a uniform
                                  sample of the rest sized by a CLT bound so that each head's
                                  output is within vatt_epsilon (relative, L2) with probability
                                  1 - vatt_delta; importance-weighted */
#define SA_SPARSE_ORACLE     3 /* the budget's tokens with the highest exact scores (reads every
                                  key, so it saves nothing: a quality baseline) */

/* Who ranks pages under GQA (sa_session_params.select_granularity). */
#define SA_SELECT_PER_HEAD  0 /* Quest: each query head ranks with its own query */
#define SA_SELECT_PER_GROUP 1 /* ReSA: one ranking per KV head with the group's mean query */

/* vAttention's deterministic top-k (sa_session_params.vatt_topk). */
#define SA_TOPK_QUEST  0 /* budget's pages by Quest's bound */
#define SA_TOPK_ORACLE 1 /* budget's tokens by their exact scores (reads every key: a baseline) */

/* Corrections of past decode outputs (sa_session_params.correction), on top of SA_SPARSE_QUEST. */
#define SA_CORRECTION_NONE  0
/* RetroAttention: each decode step also runs the previous retro_window - 1 decode tokens again;
** the pages Quest loads for the new token supplement each past token's attention output with
** the keys (at positions <= its own) of pages it has not seen, merged exactly by log-sum-exp,
** and the corrected outputs flow on through the layer, replacing those tokens' K/V in the
** next layers. A token's output ends as attention over the union of the pages its window's
** queries loaded. Per head or per group selection (with ReSA's rectification too: a
** rectification or a prefill restarts the window); not with vAttention or the oracle
** (SA_ERR_UNSUPPORTED). Runs on every backend (CPU, CUDA, Vulkan). */
#define SA_CORRECTION_RETRO 1

/* Speculative selection (sa_session_params.speculation), on top of SA_SPARSE_QUEST. */
#define SA_SPECULATION_NONE 0
/* PRR (predict, reuse, repair): in each sparse layer the pages are predicted from their past
** Quest scores (a damped-trend Holt predictor per layer, ranker and page, its (alpha, beta,
** phi) fitted per layer on the last rows of each prefill), attended before the selection
** finishes, and the selected pages the prediction missed are attended after it and merged by
** log-sum-exp. On CUDA the prediction's attention runs on a second stream beside the
** selection, and each layer predicts the next step's pages beside its repair; on the other
** backends the same work runs one op after the other (the same result). prr_mode says what
** the output is. Per head or per group selection, with ReSA's rectification, and with RetroAttention in
** the strict mode; not with vAttention or the oracle (SA_ERR_UNSUPPORTED). Runs on every
** backend (CPU, CUDA, Vulkan). */
#define SA_SPECULATION_PRR  1
#define SA_PRR_SUPERSET 0 /* attention over the predicted and the selected pages (the paper) */
#define SA_PRR_STRICT   1 /* attention over the selected pages: Quest's output (to rounding) */

/* How the cascade reduces a GQA group's attention to one score per KV head. */
#define SA_CASCADE_REDUCE_MAX    0
#define SA_CASCADE_REDUCE_MEAN   1
#define SA_CASCADE_REDUCE_MEDIAN 2
/* No token selection: no scores are kept and a sub-cache that does not accept always takes the
** incoming token (the Cascading KV Cache paper's ablation "without token selection"). */
#define SA_CASCADE_REDUCE_NONE   3

typedef struct sa_session_params {
  uint32_t struct_size; /* sizeof(sa_session_params) */
  int32_t backend;      /* SA_BACKEND_*; default SA_BACKEND_AUTO */
  int32_t n_threads;    /* CPU threads; 0 (default) = the number of cores */
  int32_t n_ctx;        /* most tokens the session holds; 0 (default) = model's trained context.
                           Larger than the trained context is accepted (positions past it get
                           RoPE as any other; the quality there is the model's). Dense and full
                           memories only: the bounded memories are sized by cache_tokens and
                           ignore it. */
  int32_t n_batch;      /* prefill chunk in tokens; 0 (default) = 256 */
  int32_t memory;       /* SA_MEMORY_*; default SA_MEMORY_DENSE */
  /* Sampling, used by sa_sample() and sa_decode_step(). */
  float temperature;    /* 0 (default) = greedy (arg max); > 0 (finite) scales the logits */
  int32_t top_k;        /* keep the k most likely tokens; 0 (default) = all */
  float top_p;          /* keep the smallest set with probability >= top_p; 1 (default) = all */
  uint64_t seed;        /* random seed for sampling; default 0 */
  /* Bounded memories (SA_MEMORY_STREAMING, SA_MEMORY_CASCADE). Positions are re-indexed over
  ** the cache contents at every step, so the stream may be longer than the trained context. */
  int32_t n_sinks;      /* first tokens always kept; default 64 */
  int32_t cache_tokens; /* total cache size in tokens, sinks included; 0 (default) = the
                           model's trained context. (cache_tokens - n_sinks) must split into
                           n_cascades equal sub-caches. */
  int32_t n_cascades;   /* cascade sub-caches; default 4 (streaming always uses 1) */
  float cascade_beta;   /* EMA factor of the attention scores, in (0, 1]; default 0.9999 */
  int32_t cascade_reduction;   /* SA_CASCADE_REDUCE_*; default SA_CASCADE_REDUCE_MAX */
  int32_t cascade_homogeneous; /* 1: one keep/drop decision for all KV heads; default 0 */
  /* Query-aware sparsity over SA_MEMORY_FULL (see SA_SPARSE_*). */
  int32_t sparse;        /* SA_SPARSE_*; default SA_SPARSE_NONE */
  int32_t page_size;     /* tokens per page, in [1, 1024]; default 16 */
  int32_t budget_tokens; /* tokens attended per head and step; 0 (default): budget_ratio */
  float budget_ratio;    /* budget as a fraction of the tokens held, in (0, 1]; default 0.125 */
  int32_t sink_pages;    /* first pages always attended; default 1 */
  int32_t local_pages;   /* newest pages always attended, >= 1; default 1 */
  int32_t min_pages;     /* fewest pages a head attends; default 3 */
  int32_t dense_layers;  /* first layers that stay dense; default 2; the model's layer count or
                            more makes every layer dense (the sparse bookkeeping still runs) */
  int32_t select_granularity; /* SA_SELECT_*; default SA_SELECT_PER_HEAD */
  int32_t rectify_every; /* ReSA: after every this many decode steps, the tokens they appended
                            are run again densely and their K/V in every layer replaced (the
                            logits of that pass are discarded); 0 (default) = never */
  float vatt_epsilon;    /* vAttention relative error bound, in (0, 1); default 0.05 */
  float vatt_delta;      /* vAttention failure probability, in (0, 1); default 0.05 */
  float vatt_pilot_ratio;/* pilot sample as a fraction of the residual, at least 64 tokens;
                            default 0.1 */
  int32_t vatt_topk;     /* SA_TOPK_*; default SA_TOPK_QUEST */
  int32_t check_error;   /* 1: every sparse head also runs dense attention and records its
                            relative error (sa_session_head_stats); a diagnostic that costs a
                            dense pass. Default 0 */
  /* Session store (see "Session store" below); the strings are copied. */
  const char *store_path; /* SQLite file the session is saved in; NULL (default): none */
  const char *session_id; /* the session's name in that file (1..1024 bytes); NULL (default) */
  int32_t autosave;       /* SA_AUTOSAVE_*; default SA_AUTOSAVE_OFF. Needs store_path and
                             session_id */
  /* Where the session runs (see "Backends" below). */
  int32_t device;         /* index among the devices of the chosen backend kind (0 = the first);
                             default 0. With SA_BACKEND_AUTO it must be 0 */
  int32_t kv_type;        /* SA_KV_*; default SA_KV_DEFAULT. Resumed sessions keep the type
                             they were saved with */
  int32_t correction;     /* SA_CORRECTION_*; default SA_CORRECTION_NONE. RETRO needs
                             sparse = SA_SPARSE_QUEST */
  int32_t retro_window;   /* RetroAttention's window w in [2, 32] and <= n_batch: the new token
                             and w - 1 past ones per step; default 2 */
  int32_t speculation;    /* SA_SPECULATION_*; default SA_SPECULATION_NONE. PRR needs
                             sparse = SA_SPARSE_QUEST */
  int32_t prr_mode;       /* SA_PRR_*; default SA_PRR_SUPERSET */
  float prr_ratio;        /* pages predicted per page the selection picks by score (the forced
                             sink and local pages come on top), in (0, 16]; default 1 */
  const char *prr_profile; /* PRR's r by context length instead of prr_ratio: a profile file
                             that `sa-bench gpu prr-profile` wrote (the path is copied; the file
                             is read when the session is created or resumed, and not kept
                             open). The steps of each attention bucket (the keys held rounded
                             up to a power of two, at least 256, at most n_ctx) use the largest
                             r whose attention over the predicted pages the profile timed no
                             slower than the selection at the bucket's length (times linear in
                             the length between the profile's lengths and in r between its
                             grid's points; the grid's smallest r when none fits). The file
                             must hold a profile for this model (its metadata and tensor
                             layout), this device, and these selection settings
                             (select_granularity, page_size, budget_tokens, budget_ratio,
                             sink_pages, local_pages, min_pages, kv_type); otherwise creation
                             fails with SA_ERR_INVALID_ARG listing what it holds. Needs
                             speculation = SA_SPECULATION_PRR. Unlike the other PRR fields it
                             is taken from params on sa_session_resume (like backend: a resumed
                             session may run elsewhere). NULL (default): r = prr_ratio */
} sa_session_params;

/* sa_session_params_init — fill *params with the defaults and set struct_size. NULL: no-op. */
SA_API void sa_session_params_init(sa_session_params *params);

/*
** sa_session_create — start a conversation on a model.
**
** [in]  model        not NULL.
** [in]  params       NULL for defaults. n_batch is also the stride of strided prefill for the
**                    bounded memories: each chunk attends to the cache plus itself causally,
**                    then joins the cache (n_batch = 1 equals token-by-token processing).
** [out] out_session  receives the session on SA_OK, NULL otherwise; not NULL.
** Returns SA_OK; SA_ERR_MISUSE (bad model handle); SA_ERR_INVALID_ARG (a param out of range:
** the message names it); SA_ERR_UNSUPPORTED (a backend not in this build, a CUDA device that
** is not present or has no usable driver, or a model shape that backend cannot run: the
** message says which); SA_ERR_NOMEM (also: the GPU's memory cannot hold the model or the KV
** cache — the message gives the bytes asked for and the device's free memory; a session of
** a smaller n_ctx may fit); SA_ERR_BACKEND (the device failed); SA_ERR_IO / SA_ERR_FORMAT
** (prr_profile cannot be read / is malformed: the message names the line). The session holds a reference to the model (see
** "Objects and lifetimes"). Sessions on one device share one copy of the model's weights.
*/
SA_API sa_status sa_session_create(sa_model *model, const sa_session_params *params,
                                   sa_session **out_session);

/* sa_session_destroy — end the session and free its memory. NULL or destroyed: no-op. Called
** from the progress callback of the session's own sa_prefill, the session is freed when that
** call returns (see sa_progress_fn). */
SA_API void sa_session_destroy(sa_session *session);

/* sa_session_errmsg — the message of the last failed call on this session, "" if none.
** Valid until the next call on the session. A NULL or destroyed session gives a static
** message saying so. Never NULL. */
SA_API const char *sa_session_errmsg(const sa_session *session);

/* Progress callback for sa_prefill(): called after each chunk with the tokens done so far and
** the total. Return 0 to go on, anything else to cancel. From inside it, calls that change
** the same session (sa_prefill, sa_decode_step, sa_sample, sa_session_reset,
** sa_session_save) return SA_ERR_MISUSE; reading calls (sa_session_stats, sa_session_tokens,
** sa_session_errmsg, ...) work; sa_session_destroy cancels the prefill, which returns
** SA_ERR_CANCELLED and then frees the session. Other sessions may be used freely. */
typedef int32_t (*sa_progress_fn)(size_t n_done, size_t n_total, void *user_data);

/*
** sa_prefill — append tokens to the session and compute the logits after the last one.
**
** The tokens are processed in chunks of n_batch. [in] tokens: n_tokens ids in [0, n_vocab);
** may be NULL only when n_tokens is 0 (then nothing happens). [in] progress may be NULL.
** Returns SA_OK; SA_ERR_CANCELLED (progress returned non-zero); SA_ERR_CONTEXT_FULL (the
** tokens do not fit in n_ctx); SA_ERR_INVALID_ARG (a token out of range: the message gives
** its index); SA_ERR_MISUSE; SA_ERR_NOMEM; SA_ERR_BACKEND.
** ^On any error, including cancellation, the session is exactly as before the call, its
** logits included. (For the bounded memories this costs one copy of the fixed-size cache per
** call; on a GPU, logits never read since the last call are copied to the host first.)
*/
SA_API sa_status sa_prefill(sa_session *session, const int32_t *tokens, size_t n_tokens,
                            sa_progress_fn progress, void *user_data);

/*
** sa_sample — draw the next token from the current logits with the session's sampler
** (greedy, or temperature/top-k/top-p with the session's seeded generator).
**
** [out] out_token  not NULL.
** Returns SA_OK; SA_DONE when the token is end-of-generation (it is still written);
** SA_ERR_MISUSE when there are no logits yet (nothing was prefilled).
*/
SA_API sa_status sa_sample(sa_session *session, int32_t *out_token);

/*
** sa_decode_step — append one token, compute the logits after it and sample the next token.
**
** [in]  token_in   the token to append (usually the one the previous step produced).
** [out] out_token  receives the sampled token; may be NULL to append without sampling.
** Returns SA_OK; SA_DONE when the sampled token is end-of-generation (it is still written);
** SA_ERR_CONTEXT_FULL; SA_ERR_INVALID_ARG (token out of range); SA_ERR_MISUSE; SA_ERR_NOMEM;
** SA_ERR_BACKEND.
** SA_DONE ends nothing: a later step appends whatever token it is given, the end-of-generation
** token included, and decodes on (a caller that stops there simply stops calling).
** ^On any error from bad input the session is exactly as before the call, and so is a dense or
** full-memory session after any error but a backend failure (SA_ERR_NOMEM included: its
** history, logits, KV memory and sampler state). A bounded memory (streaming, cascade) keeps
** no copy of its cache per step, so a backend failure, or running out of memory, in the
** middle of the step leaves the session unusable: every later call except sa_session_reset()
** and sa_session_destroy() returns SA_ERR_BACKEND.
**
** A generation loop:  sa_prefill(s, prompt, n, NULL, NULL); sa_sample(s, &t);
**                     while (!sa_token_is_eog(m, t)) { print(t); sa_decode_step(s, t, &t); }
*/
SA_API sa_status sa_decode_step(sa_session *session, int32_t token_in, int32_t *out_token);

/* sa_session_logits — the logits after the last processed token, n_vocab floats, or NULL when
** none were computed yet (or, on a GPU, when they could not be read back: the reason is in
** sa_session_errmsg()). Valid until the next call on the session. *out_n_vocab (may be NULL)
** receives their count. On a GPU the logits stay in device memory until this is called: a
** decode step that samples on the device transfers only the token id. */
SA_API const float *sa_session_logits(const sa_session *session, int32_t *out_n_vocab);

/* sa_session_tokens — the token history (every token appended so far, in order). Valid until
** the next call on the session. Returns SA_OK or SA_ERR_MISUSE; out_tokens and out_n not NULL. */
SA_API sa_status sa_session_tokens(const sa_session *session, const int32_t **out_tokens,
                                   size_t *out_n);

/* sa_session_reset — forget every token; keeps the sampler's seed sequence going.
** Returns SA_OK or SA_ERR_MISUSE. */
SA_API sa_status sa_session_reset(sa_session *session);

typedef struct sa_stats {
  uint32_t struct_size;             /* set by the caller: sizeof(sa_stats) */
  uint64_t n_tokens;                /* tokens appended so far */
  uint64_t n_kv_tokens;             /* tokens whose K/V the memory holds now */
  uint64_t kv_bytes_held;           /* bytes of K/V memory in use (all layers) */
  uint64_t kv_bytes_capacity;       /* bytes of K/V memory allocated (all layers) */
  uint64_t kv_bytes_read_last_step; /* K/V bytes attention read in the last prefill/decode call */
  uint64_t weight_bytes;            /* bytes of weights the backend holds */
  double last_call_ms;              /* wall time of the last prefill/decode call */
  uint64_t last_call_tokens;        /* tokens processed by that call */
  /* Query-aware sparsity, for the last decode step (0 after a prefill or when dense): */
  uint64_t sparse_keys_attended;    /* keys read, summed over the (layer, query head) pairs that
                                       ran sparse */
  uint64_t sparse_keys_total;       /* keys dense attention would have read for those pairs */
  uint64_t n_rectified;             /* tokens rewritten by ReSA rectification so far */
  int32_t backend;                  /* SA_BACKEND_CPU, _CUDA or _VULKAN: where it runs */
  int32_t device;                   /* the device index within that kind */
  int32_t kv_type;                  /* SA_KV_F32, SA_KV_F16 or SA_KV_BF16 */
  double retro_effective_budget;    /* RetroAttention: the mean, over decode tokens that have left
                                       the window and the sparse (layer, query head) pairs, of the
                                       keys their output covers (their own and every key added
                                       later) over the keys they attended themselves; 0 without
                                       it or before any token left the window */
  double prr_hit_rate;              /* PRR, over the decode steps so far: the share of the pages
                                       the selection picked by score that were predicted */
  double prr_missed_pages;          /* PRR: pages attended after the selection (missed), per
                                       (sparse layer, ranker) and step */
  double prr_calibration_ms;        /* PRR: the last prefill's calibration, all layers */
  double prr_ratio;                 /* PRR: the r of the last decode step (prr_ratio, or the
                                       profile's choice for its bucket); 0 before one */
} sa_stats;

/* sa_session_stats — counters of the session. out->struct_size must be set; fields up to it
** are filled. Returns SA_OK, SA_ERR_MISUSE, SA_ERR_INVALID_ARG. */
SA_API sa_status sa_session_stats(const sa_session *session, sa_stats *out);

/*
** sa_session_memory_positions — which tokens the session's KV memory holds: the positions whose
** keys and values it keeps in one layer for one KV head, ascending and unique. A position is an
** index into the token history (the array of sa_session_tokens(); 0 = the first token appended).
**
** [in]  layer      a layer in [0, n_layers), or -1 for the union over every layer.
** [in]  kv_head    a KV head in [0, n_kv_heads), or -1 for the union over the KV heads (of every
**                  layer, with layer -1).
** [out] positions  room for capacity positions; may be NULL when capacity is 0 (NULL with a
**                  capacity: SA_ERR_INVALID_ARG).
** [out] out_count  receives the number of positions; not NULL.
**
** What each memory holds:
**   SA_MEMORY_DENSE      every position of the history, 0 .. n_tokens - 1, in every layer and
**                        KV head. Query-aware sparsity chooses what a step attends to but
**                        evicts nothing: a sparse session still holds every position.
**   SA_MEMORY_STREAMING  the n_sinks first positions and the newest cache_tokens - n_sinks
**                        (every position until more than cache_tokens were appended), the
**                        same in every layer and KV head.
**   SA_MEMORY_CASCADE    the sinks and the positions the sub-caches kept, which differ between
**                        layers and, unless cascade_homogeneous, between KV heads.
** ^For one layer and one KV head *out_count equals sa_stats.n_kv_tokens. The answer comes from
** the memory's bookkeeping, never from K/V. A cascade on a GPU keeps that bookkeeping on the
** device (its decode steps make no host round trip), so the first call after a step copies its
** scores and original indices back: 12 bytes per slot, KV head and layer.
** A session resumed with sa_session_resume() reports the positions the saved session held.
** From inside sa_prefill's progress callback it reports the memory after the chunks done so
** far, whose positions run past sa_session_tokens()' count until that call succeeds.
**
** Returns SA_OK; SA_ERR_BUFFER_TOO_SMALL when capacity < *out_count (nothing useful is written,
** call again with a larger buffer); SA_ERR_INVALID_ARG (layer or kv_head out of range: the
** message names the value and the range; out_count NULL; positions NULL with a capacity);
** SA_ERR_MISUSE (NULL or destroyed session); SA_ERR_BACKEND (the session is unusable after a
** failed step). On every error but SA_ERR_BUFFER_TOO_SMALL, *out_count is 0 (when not NULL).
** Threading: the session's thread, as the other reading calls (also from its progress
** callback). Ownership: the caller owns positions; nothing is kept after the call.
*/
SA_API sa_status sa_session_memory_positions(const sa_session *session, int32_t layer,
                                             int32_t kv_head, uint64_t *positions,
                                             size_t capacity, size_t *out_count);

/* What one (layer, query head) did in the last decode step. */
typedef struct sa_head_stat {
  int32_t layer, head;
  int32_t keys_attended; /* keys its attention read (sampled keys included) */
  int32_t keys_total;    /* keys the memory held for it (what dense attention reads) */
  int32_t sample_budget; /* vAttention: sampled keys the CLT bound asked for (before clamping to
                            the residual); -1 for other methods and for dense heads */
  float rel_error;       /* with check_error: |o - o_dense| / |o_dense| (L2), 0 for heads that
                            ran dense; without check_error -1 */
} sa_head_stat;

/*
** sa_session_head_stats — per (layer, query head) figures of the last decode step, layer-major
** (n_layers x n_heads records; layers that ran dense — every layer of a session without
** sparsity — report keys_attended = keys_total, the keys the memory held).
**
** [out] out       capacity records, or NULL to ask for the count only.
** [out] out_n     receives the number of records available (0 before the first decode step
**                 and after a prefill); not NULL.
** Returns SA_OK (min(capacity, *out_n) records written), SA_ERR_MISUSE, SA_ERR_INVALID_ARG.
*/
SA_API sa_status sa_session_head_stats(const sa_session *session, sa_head_stat *out,
                                       size_t capacity, size_t *out_n);

/* ========================================================================================
** Backends
**
** A build of sa may include several compute backends; sa_backend_count() and sa_backend_info()
** list the devices this build can use on this machine: the CPU first (always present), then
** each CUDA GPU, then each Vulkan device. A library built with CUDA or Vulkan loads and runs on
** machines without an NVIDIA driver, a Vulkan loader or a GPU: those devices are then simply
** absent from the list (the CUDA runtime is linked statically and the driver is looked for only
** when first needed; the Vulkan loader is opened at run time, never linked). A GPU may appear
** twice, once through CUDA and once through Vulkan.
*/
typedef struct sa_backend_desc {
  uint32_t struct_size;     /* set by the caller: sizeof(sa_backend_desc) */
  int32_t kind;             /* SA_BACKEND_CPU, SA_BACKEND_CUDA or SA_BACKEND_VULKAN */
  int32_t device;           /* index within its kind (sa_session_params.device) */
  char name[128];           /* "NVIDIA H100 80GB HBM3", "CPU (16 threads, avx2 kernels)";
                               NUL-terminated. The CPU's kernel set is the best this CPU runs
                               ("avx2": x86-64 with AVX2, FMA and F16C; "neon": AArch64; else
                               "reference"), or the one
                               the environment variable SA_CPU_KERNELS names if it runs here;
                               these sets give the same results bit for bit. Four more are
                               opt-in, by that variable only, and change results:
                               "avx2-int8", "avx512-vnni" (x86-64 with AVX-512 VNNI),
                               "avx512-amx" (that, and AMX tiles for a prefill's products) and
                               "neon-dotprod" (AArch64 with the dot-product instructions)
                               multiply Q8_0, Q4_0, Q4_K and Q6_K weights with integer dot
                               products on inputs quantized to 8 bits, faster and within that
                               quantization's error of the others (the four give each other's
                               bits). */
  uint64_t memory_bytes;    /* device memory (for the CPU: physical memory) */
  uint64_t free_bytes;      /* free memory when listed */
  int32_t compute_major;    /* CUDA compute capability (9.0 for Hopper); 0 for the CPU */
  int32_t compute_minor;
  int32_t multiprocessors;  /* streaming multiprocessors (CUDA) or hardware threads (CPU); 0
                               for Vulkan devices */
  int32_t software;         /* 1 for a GPU API run by the CPU (Mesa's lavapipe), else 0 */
} sa_backend_desc;

/* sa_backend_count — the number of devices sa_backend_info() describes (at least 1: the CPU).
** Threading: any thread. Never fails. */
SA_API int32_t sa_backend_count(void);

/*
** sa_backend_info — describe device `index` of the list, 0 <= index < sa_backend_count().
**
** [out] out  struct_size must be set by the caller; fields up to that size are filled.
** Returns SA_OK; SA_ERR_INVALID_ARG (index out of range, out NULL or struct_size too small).
** Threading: any thread.
*/
SA_API sa_status sa_backend_info(int32_t index, sa_backend_desc *out);

/* ========================================================================================
** Session store
**
** Sessions survive restarts in a session store: one SQLite file (the system's libsqlite3)
** that holds many sessions by name. A saved session is its settings, token history, sampler
** state, current logits and the whole state of its KV memory (dense K/V pages; the cascade's
** slots, EMA scores, positions and ring pointers). A resumed session continues exactly where
** the saved one was: on the CPU its next logits, and every later step, are bitwise identical
** to those of the session that never stopped.
**
**   - Every save is one transaction. If the process dies, or the disk fills, in the middle of a
**     save, the store still opens and holds the previous save intact.
**   - Saves are incremental: full pages of dense K/V and of the token history are written once;
**     later saves write what is new plus the mutable tail (the whole cascade cache is mutable).
**   - Every stored chunk carries a checksum that resuming verifies; resuming refuses a session
**     saved with another model (a fingerprint of the GGUF metadata and tensor table), a store
**     written by a newer version of sa, a file that is not an sa store, and corrupt data.
**     Store failures are SA_ERR_STORE with a message saying which of these it was; SQLite
**     running out of memory is SA_ERR_NOMEM.
**   - Threading: a session saves through its own connection, so different sessions may save
**     into the same file from different threads or processes at once (writers wait for each
**     other up to a minute). The file must be on a local file system (SQLite's WAL mode).
**   - Storage cost: about 2 x n_layers x n_kv_heads x head_dim x 4 bytes per token held for the
**     dense memory; a constant size for the cascade and streaming memories.
*/

/* When a session with a store saves by itself (sa_session_params.autosave). */
#define SA_AUTOSAVE_OFF     0 /* only sa_session_save() saves */
#define SA_AUTOSAVE_PREFILL 1 /* after every successful sa_prefill() */
#define SA_AUTOSAVE_ALWAYS  2 /* after every successful sa_prefill() and sa_decode_step() */

/*
** sa_session_save — save the session into its store (params.store_path, under
** params.session_id), creating the file when absent.
**
** The stored session becomes exactly this session; an earlier save under the same id is
** replaced. ^A session only replaces a stored session it saved itself or was resumed from: a
** new session whose id names an existing stored session gets SA_ERR_STORE (resume it, delete
** it with sa_store_delete(), or choose another id).
** ^Two sessions saving under the same id at once, in one process or in two: the saves take
** turns (a writer waits for the other), the first replaces the stored session, and from then
** on every save of the other session fails with SA_ERR_STORE (the store holds a session it
** neither resumed nor saved last). The store holds whole saves only and resumes to the last
** that succeeded.
** ^A store file deleted, renamed or replaced since the session last saved is not written to
** again: the save goes to the file now at store_path (created when absent), and a file there
** that holds another save under this id refuses it as above.
** Returns SA_OK; SA_ERR_MISUSE (bad handle, no store_path/session_id, or the session is
** unusable after a failed step); SA_ERR_STORE (the file cannot be created or written — a
** read-only directory, a full disk —, is not an sa store, or the id is taken; the message says
** which); SA_ERR_NOMEM. ^On failure the store keeps the previous save and the session is
** unchanged.
** Threading: the session's thread; saves of different sessions may run concurrently.
**
** With autosave, sa_prefill() (and with SA_AUTOSAVE_ALWAYS also sa_decode_step()) saves after
** it succeeded. ^If that save fails, the call returns SA_ERR_STORE although its tokens WERE
** appended (the one exception to "a failed call changes nothing"): the session is fine, the
** store holds the previous save, and a later save may succeed.
*/
SA_API sa_status sa_session_save(sa_session *session);

/*
** sa_session_resume — re-create a session saved in a store.
**
** [in]  model        the model the session was saved with; not NULL.
** [in]  params       not NULL; store_path and session_id name the stored session. backend,
**                    n_threads, store_path, session_id, autosave and prr_profile are taken from params;
**                    every other setting (memory kind and sizes, n_ctx, n_batch, sparsity,
**                    sampling) is the stored session's, and params' values for them are
**                    ignored.
** [out] out_session  receives the session on SA_OK, NULL otherwise; not NULL.
** Returns SA_OK; SA_ERR_INVALID_ARG (NULL arguments, no file at store_path, or no session
** named session_id in it, or a prr_profile without a profile for the session); SA_ERR_IO /
** SA_ERR_FORMAT (prr_profile unreadable / malformed); SA_ERR_STORE (not an SQLite file, another application's database,
** a newer store schema or state format, saved with a different model, corrupt data: the
** message says which and names the blob and chunk); SA_ERR_MISUSE (bad model handle);
** SA_ERR_UNSUPPORTED (backend); SA_ERR_NOMEM.
** A store in a read-only directory can be resumed from (later saves then fail).
** Threading: any thread. Ownership: as sa_session_create().
*/
SA_API sa_status sa_session_resume(sa_model *model, const sa_session_params *params,
                                   sa_session **out_session);

/* One stored session, as sa_store_list() reports it. */
typedef struct sa_stored_session {
  uint32_t struct_size;       /* sizeof the library's struct; read only fields within it */
  const char *session_id;     /* valid during the callback only */
  const char *model_name;     /* general.name of the model it was saved with; callback only */
  uint64_t model_fingerprint; /* fingerprint of that model's GGUF metadata and tensor table */
  int32_t memory;             /* SA_MEMORY_* */
  uint64_t n_tokens;          /* tokens in its history */
  uint64_t bytes;             /* bytes of state stored (before SQLite's own overhead) */
  int64_t created;            /* Unix time of the first save, seconds */
  int64_t updated;            /* Unix time of the last save, seconds */
} sa_stored_session;

/* Called once per stored session; return 0 to go on, anything else to stop listing. */
typedef int32_t (*sa_store_list_fn)(const sa_stored_session *session, void *user_data);

/*
** sa_store_list — list the sessions of a store, most recently saved first.
**
** [in] path      the store file; not NULL. A path where no file exists holds no sessions.
** [in] callback  not NULL; called on the calling thread before sa_store_list returns.
** Returns SA_OK (also when the callback stopped early); SA_ERR_INVALID_ARG (NULL arguments);
** SA_ERR_STORE (not an sa store, newer schema, corrupt); SA_ERR_NOMEM. Threading: any thread.
*/
SA_API sa_status sa_store_list(const char *path, sa_store_list_fn callback, void *user_data);

/*
** sa_store_delete — remove a stored session and return its space to the file system.
**
** Returns SA_OK; SA_ERR_INVALID_ARG (NULL arguments, no such file or session); SA_ERR_STORE
** (read-only, not an sa store, newer schema, corrupt); SA_ERR_NOMEM. A live session saved
** under that id keeps working; its next save stores it anew. Threading: any thread.
*/
SA_API sa_status sa_store_delete(const char *path, const char *session_id);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SA_H */
