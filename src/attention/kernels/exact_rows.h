// Internal: online-softmax attention of several query rows that share one KV head, over a
// contiguous range of cache positions, in blocks of kBlock keys. The building block of dense
// prefill/decode and of the exact parts of the baselines.
#pragma once
#include <cstdint>
#include <vector>

#include "attention/kernels/partial_softmax.h"
#include "common/cpu.h"
#include "kv/kv_cache.h"

namespace mp::attn {

inline constexpr int kKeyBlock = 64;

// Scratch owned by one thread; sized on first use.
struct RowsScratch {
  std::vector<float> s;  // [rows][kKeyBlock]
};

// Attends q ([rows][d], d = kv.head_dim) to KV head h over positions [begin, end), updating the
// per-row state st[rows] and unnormalised accumulators acc[rows][d] in place (start from
// PartialSoftmax{} and zeros). last_pos (nullable): row r sees only positions <= last_pos[r];
// first_pos (nullable, sliding windows): nor any before first_pos[r].
void attend_rows(const KvView& kv, int h, const float* q, int rows, float scale, int64_t begin,
                 int64_t end, const int64_t* last_pos, PartialSoftmax* st, float* acc,
                 RowsScratch& scratch, Isa isa, const int64_t* first_pos = nullptr);

// Folds one block of logits (s[rows][lds], n valid columns) into the state and turns s into the
// unnormalised weights exp(s - m_new) that the caller then multiplies into values.
void fold_block(float* s, int rows, int64_t lds, int n, PartialSoftmax* st, float* acc, int d, Isa isa);

}  // namespace mp::attn
