// llama-dump: a small reference-dump tool for magicpig cross-checks.
//
// magicpig's own code (not part of llama.cpp). It links against the libllama
// built by scripts/build_peer.sh and uses only the public llama.h API.
//
// Modes
//   generate (default):
//     llama-dump -m MODEL.gguf --tokens 1,2,3 -n 32 [--threads 2]
//                [--logits-out FILE] [--all-logits] [--ctx N]
//                [--kv-type f32|f16] [--flash-attn off|on|auto] [--verbose]
//     Evaluates the prompt token ids as given (no BOS is added, no tokenizer
//     is used), then decodes greedily for n steps (argmax, ties -> lowest id,
//     never stops early at EOS). Prints the n generated ids, space-separated,
//     on one line on stdout.
//
//     --logits-out FILE: raw float32 little-endian rows, n_vocab floats each,
//     no header. Row k holds the logits computed at absolute position p_k,
//     i.e. the prediction for the token at position p_k + 1.
//       default:      rows for p = P-1, P, ..., P+n-1   -> n+1 rows
//       --all-logits: rows for p = 0, 1, ..., P+n-1     -> P+n rows
//     (P = number of prompt tokens). The generated token g_j (j = 1..n) is the
//     argmax of the row for position P-2+j; the last row is the logits after
//     feeding g_n (one extra decode step, so that there are n+1 rows).
//
//   tokenize:
//     llama-dump -m MODEL.gguf [--vocab-only] --tokenize TEXT
//                [--add-special] [--parse-special] [--pieces]
//     llama-dump -m MODEL.gguf [--vocab-only] --tokenize-file FILE ...
//     Prints the token ids of TEXT (or of the whole file's bytes) space-
//     separated on one line. --pieces also prints "id<TAB>piece" lines on
//     stderr.
//
// Exit status: 0 on success, 1 on any error (message on stderr), 2 on usage error.

#include "llama.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
    std::string model;
    std::vector<llama_token> tokens;
    bool have_tokens = false;
    int n_predict = 32;
    int threads = 2;
    int n_ctx = 0;  // 0 = P + n
    std::string logits_out;
    bool all_logits = false;
    std::string kv_type = "f32";
    std::string flash_attn = "off";
    bool verbose = false;

    bool tokenize = false;
    std::string text;
    bool add_special = false;
    bool parse_special = false;
    bool pieces = false;
    bool vocab_only = false;
};

bool g_verbose = false;
ggml_log_level g_last_level = GGML_LOG_LEVEL_NONE;

void log_cb(ggml_log_level level, const char* text, void* /*user*/) {
    if (level != GGML_LOG_LEVEL_CONT) g_last_level = level;
    if (g_verbose || g_last_level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

[[noreturn]] void usage(const char* argv0, int code) {
    FILE* f = code == 0 ? stdout : stderr;
    fprintf(f,
            "usage:\n"
            "  %s -m MODEL.gguf --tokens ID,ID,... [-n N] [--threads T] [--logits-out FILE]\n"
            "        [--all-logits] [--ctx N] [--kv-type f32|f16] [--flash-attn off|on|auto] [--verbose]\n"
            "  %s -m MODEL.gguf [--vocab-only] (--tokenize TEXT | --tokenize-file FILE)\n"
            "        [--add-special] [--parse-special] [--pieces] [--verbose]\n"
            "\n"
            "generate: evaluates the given ids (no BOS added), greedy-decodes N tokens (default 32),\n"
            "  prints them space-separated on stdout. --logits-out writes float32 LE rows of n_vocab:\n"
            "  positions P-1..P+N-1 (N+1 rows), or 0..P+N-1 with --all-logits (P+N rows).\n"
            "  Defaults: --threads 2, --kv-type f32, --flash-attn off, --ctx P+N.\n"
            "tokenize: prints token ids of TEXT using the model's vocabulary.\n",
            argv0, argv0);
    exit(code);
}

bool parse_int(const char* s, long lo, long hi, long* out) {
    errno = 0;
    char* end = nullptr;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

// Accepts "1,2,3", "1 2 3", "1, 2, 3".
bool parse_tokens(const std::string& s, std::vector<llama_token>* out) {
    std::string cur;
    auto flush = [&]() -> bool {
        if (cur.empty()) return true;
        long v;
        if (!parse_int(cur.c_str(), 0, INT32_MAX, &v)) return false;
        out->push_back((llama_token)v);
        cur.clear();
        return true;
    };
    for (char c : s) {
        if (c == ',' || c == ' ' || c == '\t' || c == '\n') {
            if (!flush()) return false;
        } else {
            cur += c;
        }
    }
    return flush();
}

Options parse_args(int argc, char** argv) {
    Options o;
    auto need = [&](int& i) -> const char* {
        if (i + 1 >= argc) {
            fprintf(stderr, "llama-dump: missing value for %s\n", argv[i]);
            usage(argv[0], 2);
        }
        return argv[++i];
    };
    auto bad = [&](const char* flag, const char* v) {
        fprintf(stderr, "llama-dump: invalid value for %s: '%s'\n", flag, v);
        usage(argv[0], 2);
    };
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        long v;
        if (a == "-h" || a == "--help") {
            usage(argv[0], 0);
        } else if (a == "-m" || a == "--model") {
            o.model = need(i);
        } else if (a == "--tokens" || a == "-t") {
            const char* s = need(i);
            if (!parse_tokens(s, &o.tokens)) bad(a.c_str(), s);
            o.have_tokens = true;
        } else if (a == "-n" || a == "--n-predict") {
            const char* s = need(i);
            if (!parse_int(s, 0, 1 << 24, &v)) bad(a.c_str(), s);
            o.n_predict = (int)v;
        } else if (a == "--threads") {
            const char* s = need(i);
            if (!parse_int(s, 1, 1024, &v)) bad(a.c_str(), s);
            o.threads = (int)v;
        } else if (a == "--ctx") {
            const char* s = need(i);
            if (!parse_int(s, 1, 1 << 24, &v)) bad(a.c_str(), s);
            o.n_ctx = (int)v;
        } else if (a == "--logits-out") {
            o.logits_out = need(i);
        } else if (a == "--all-logits") {
            o.all_logits = true;
        } else if (a == "--kv-type") {
            o.kv_type = need(i);
            if (o.kv_type != "f32" && o.kv_type != "f16") bad(a.c_str(), o.kv_type.c_str());
        } else if (a == "--flash-attn") {
            o.flash_attn = need(i);
            if (o.flash_attn != "off" && o.flash_attn != "on" && o.flash_attn != "auto")
                bad(a.c_str(), o.flash_attn.c_str());
        } else if (a == "--verbose" || a == "-v") {
            o.verbose = true;
        } else if (a == "--tokenize") {
            o.tokenize = true;
            o.text = need(i);
        } else if (a == "--tokenize-file") {
            o.tokenize = true;
            const char* path = need(i);
            std::ifstream f(path, std::ios::binary);
            if (!f) {
                fprintf(stderr, "llama-dump: cannot read %s\n", path);
                exit(1);
            }
            std::ostringstream ss;
            ss << f.rdbuf();
            o.text = ss.str();
        } else if (a == "--add-special") {
            o.add_special = true;
        } else if (a == "--parse-special") {
            o.parse_special = true;
        } else if (a == "--pieces") {
            o.pieces = true;
        } else if (a == "--vocab-only") {
            o.vocab_only = true;
        } else {
            fprintf(stderr, "llama-dump: unknown argument '%s'\n", argv[i]);
            usage(argv[0], 2);
        }
    }
    if (o.model.empty()) {
        fprintf(stderr, "llama-dump: -m MODEL is required\n");
        usage(argv[0], 2);
    }
    if (!o.tokenize) {
        if (o.vocab_only) {
            fprintf(stderr, "llama-dump: --vocab-only is only valid with --tokenize\n");
            usage(argv[0], 2);
        }
        if (!o.have_tokens || o.tokens.empty()) {
            fprintf(stderr, "llama-dump: --tokens with at least one id is required (or use --tokenize)\n");
            usage(argv[0], 2);
        }
    } else if (o.have_tokens) {
        fprintf(stderr, "llama-dump: --tokens and --tokenize are mutually exclusive\n");
        usage(argv[0], 2);
    }
    return o;
}

bool host_is_little_endian() {
    const uint32_t x = 1;
    unsigned char b;
    memcpy(&b, &x, 1);
    return b == 1;
}

int run_tokenize(const Options& o, const llama_model* model) {
    const llama_vocab* vocab = llama_model_get_vocab(model);
    if (llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_NONE) {
        fprintf(stderr, "llama-dump: the model has no tokenizer (tokenizer.ggml.model = none)\n");
        return 1;
    }
    if (o.text.size() > (size_t)INT32_MAX) {
        fprintf(stderr, "llama-dump: text too long\n");
        return 1;
    }
    const int32_t len = (int32_t)o.text.size();
    std::vector<llama_token> ids((size_t)len + 16);
    int32_t n = llama_tokenize(vocab, o.text.data(), len, ids.data(), (int32_t)ids.size(), o.add_special,
                               o.parse_special);
    if (n < 0 && n != INT32_MIN) {
        ids.resize((size_t)(-(int64_t)n));
        n = llama_tokenize(vocab, o.text.data(), len, ids.data(), (int32_t)ids.size(), o.add_special,
                           o.parse_special);
    }
    if (n < 0) {
        fprintf(stderr, "llama-dump: llama_tokenize failed (%d)\n", n);
        return 1;
    }
    ids.resize((size_t)n);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
    }
    printf("%s\n", line.c_str());
    if (o.pieces) {
        std::vector<char> buf(256);
        for (llama_token id : ids) {
            int32_t m = llama_token_to_piece(vocab, id, buf.data(), (int32_t)buf.size(), 0, true);
            if (m < 0) {
                buf.resize((size_t)-m);
                m = llama_token_to_piece(vocab, id, buf.data(), (int32_t)buf.size(), 0, true);
            }
            fprintf(stderr, "%d\t%s\n", id, m >= 0 ? std::string(buf.data(), (size_t)m).c_str() : "?");
        }
    }
    return 0;
}

struct Batch {
    llama_batch b;
    explicit Batch(int32_t n) : b(llama_batch_init(n, 0, 1)) {}
    ~Batch() { llama_batch_free(b); }
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;
};

llama_token argmax(const float* x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;  // strict: ties keep the lowest id
    return best;
}

int run_generate(const Options& o, llama_model* model) {
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    if (n_vocab <= 0) {
        fprintf(stderr,
                "llama-dump: the model reports n_vocab = %d (a tokenizer.ggml.model = none file needs a "
                "vocab_size key)\n",
                n_vocab);
        return 1;
    }
    for (llama_token t : o.tokens) {
        if (t < 0 || t >= n_vocab) {
            fprintf(stderr, "llama-dump: token id %d out of range [0, %d)\n", t, n_vocab);
            return 1;
        }
    }
    const int32_t P = (int32_t)o.tokens.size();
    const int32_t N = o.n_predict;
    const int64_t need_ctx = (int64_t)P + N;  // positions 0..P+N-1
    if (need_ctx > INT32_MAX) {
        fprintf(stderr, "llama-dump: prompt + n too large\n");
        return 1;
    }
    const int32_t n_ctx_train = llama_model_n_ctx_train(model);
    if (n_ctx_train > 0 && P + N > n_ctx_train)
        fprintf(stderr, "llama-dump: note: prompt + n = %d exceeds the model's training context %d\n", P + N,
                n_ctx_train);
    if (o.n_ctx > 0 && o.n_ctx < P + N) {
        fprintf(stderr, "llama-dump: --ctx %d is smaller than prompt + n = %d\n", o.n_ctx, P + N);
        return 1;
    }

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(o.n_ctx > 0 ? o.n_ctx : need_ctx);
    cp.n_batch = (uint32_t)std::max<int32_t>(P, 1);  // whole prompt in one llama_decode call
    cp.n_ubatch = std::min<uint32_t>(cp.n_batch, 512);
    cp.n_seq_max = 1;
    cp.n_threads = o.threads;
    cp.n_threads_batch = o.threads;
    cp.no_perf = true;
    cp.type_k = o.kv_type == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.type_v = cp.type_k;
    cp.flash_attn_type = o.flash_attn == "on"    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                         : o.flash_attn == "auto" ? LLAMA_FLASH_ATTN_TYPE_AUTO
                                                  : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.offload_kqv = false;

    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama-dump: llama_init_from_model failed (run with --verbose for details)\n");
        return 1;
    }
    // An evaluated position with effective n_ctx smaller than requested would fail in decode.
    if (llama_n_ctx(ctx) < (uint32_t)(P + N)) {
        fprintf(stderr, "llama-dump: context has only %u positions, need %d\n", llama_n_ctx(ctx), P + N);
        llama_free(ctx);
        return 1;
    }

    FILE* lf = nullptr;
    if (!o.logits_out.empty()) {
        if (!host_is_little_endian()) {
            fprintf(stderr, "llama-dump: --logits-out requires a little-endian host\n");
            llama_free(ctx);
            return 1;
        }
        lf = fopen(o.logits_out.c_str(), "wb");
        if (!lf) {
            fprintf(stderr, "llama-dump: cannot open %s: %s\n", o.logits_out.c_str(), strerror(errno));
            llama_free(ctx);
            return 1;
        }
    }
    int rc = 0;
    int64_t rows = 0;
    auto write_row = [&](const float* row) -> bool {
        if (!lf) return true;
        if (fwrite(row, sizeof(float), (size_t)n_vocab, lf) != (size_t)n_vocab) {
            fprintf(stderr, "llama-dump: write to %s failed\n", o.logits_out.c_str());
            return false;
        }
        ++rows;
        return true;
    };

    std::vector<llama_token> generated;
    generated.reserve((size_t)N);
    llama_token next = 0;
    {
        // Prompt: one batch, explicit positions 0..P-1, sequence 0.
        Batch batch(P);
        for (int32_t i = 0; i < P; ++i) {
            batch.b.token[i] = o.tokens[(size_t)i];
            batch.b.pos[i] = i;
            batch.b.n_seq_id[i] = 1;
            batch.b.seq_id[i][0] = 0;
            batch.b.logits[i] = (o.all_logits || i == P - 1) ? 1 : 0;
        }
        batch.b.n_tokens = P;
        const int32_t r = llama_decode(ctx, batch.b);
        if (r != 0) {
            fprintf(stderr, "llama-dump: llama_decode failed on the prompt (%d)\n", r);
            rc = 1;
        }
        for (int32_t i = 0; rc == 0 && i < P; ++i) {
            if (!batch.b.logits[i]) continue;
            const float* row = llama_get_logits_ith(ctx, i);
            if (!row) {
                fprintf(stderr, "llama-dump: no logits for prompt position %d\n", i);
                rc = 1;
                break;
            }
            if (!write_row(row)) rc = 1;
            if (i == P - 1) next = argmax(row, n_vocab);
        }
    }
    // Greedy steps: generated token j is fed at position P-1+j; one extra decode
    // after the last token gives the (N+1)-th logits row.
    Batch one(1);
    for (int32_t j = 0; rc == 0 && j < N; ++j) {
        generated.push_back(next);
        one.b.token[0] = next;
        one.b.pos[0] = P + j;
        one.b.n_seq_id[0] = 1;
        one.b.seq_id[0][0] = 0;
        one.b.logits[0] = 1;
        one.b.n_tokens = 1;
        const int32_t r = llama_decode(ctx, one.b);
        if (r != 0) {
            fprintf(stderr, "llama-dump: llama_decode failed at position %d (%d)\n", P + j, r);
            rc = 1;
            break;
        }
        const float* row = llama_get_logits_ith(ctx, 0);
        if (!row) {
            fprintf(stderr, "llama-dump: no logits at position %d\n", P + j);
            rc = 1;
            break;
        }
        if (!write_row(row)) {
            rc = 1;
            break;
        }
        next = argmax(row, n_vocab);
    }
    if (lf) {
        if (fclose(lf) != 0 && rc == 0) {
            fprintf(stderr, "llama-dump: closing %s failed\n", o.logits_out.c_str());
            rc = 1;
        }
        if (rc == 0)
            fprintf(stderr, "llama-dump: wrote %lld rows x %d float32 to %s\n", (long long)rows, n_vocab,
                    o.logits_out.c_str());
    }
    if (rc == 0) {
        std::string line;
        for (size_t i = 0; i < generated.size(); ++i) {
            if (i) line += ' ';
            line += std::to_string(generated[i]);
        }
        printf("%s\n", line.c_str());
    }
    llama_free(ctx);
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_args(argc, argv);
    g_verbose = o.verbose;
    llama_log_set(log_cb, nullptr);

    ggml_backend_load_all();
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;  // CPU only
    mp.vocab_only = o.vocab_only;
    llama_model* model = llama_model_load_from_file(o.model.c_str(), mp);
    if (!model) {
        fprintf(stderr, "llama-dump: failed to load %s%s (run with --verbose for details)\n", o.model.c_str(),
                o.tokenize && !o.vocab_only ? "; for vocabulary-only files add --vocab-only" : "");
        llama_backend_free();
        return 1;
    }
    if (o.verbose) {
        char desc[256];
        llama_model_desc(model, desc, sizeof(desc));
        fprintf(stderr, "llama-dump: model %s, n_vocab %d\n", desc,
                llama_vocab_n_tokens(llama_model_get_vocab(model)));
    }

    const int rc = o.tokenize ? run_tokenize(o, model) : run_generate(o, model);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
