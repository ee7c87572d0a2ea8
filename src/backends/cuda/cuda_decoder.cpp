#include "backends/cuda/cuda_decoder.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <set>

#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include <vector>

#include "backends/cuda/cuda_probe.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/device_ops.h"
#include "backends/cuda/device_weights.h"
#include "backends/cuda/exact_window.h"
#include "common/error.h"
#include "engine/sequence.h"
#include "model/forward.h"
#include "model/layer_step.h"
#include "model/model.h"

namespace mp {

namespace cuda {

namespace {

void check_supported(const HParams& hp) {
  const bool plain = hp.arch != "gemma3" && !hp.qk_norm && !hp.post_norms && hp.sliding_window == 0 &&
                     hp.logit_softcap <= 0 && hp.q_scale == 1.0f && hp.embed_scale == 1.0f &&
                     hp.ffn_act == FfnActivation::Silu;
  check(plain, "device cuda supports the llama and qwen2 architectures; '" + hp.arch +
                   "' (QK-norm, post-norms, GeGLU, sliding layers or soft-capping) is not supported on the GPU");
  check(hp.head_dim % 32 == 0 && hp.head_dim <= 256,
        "device cuda needs head_dim to be a multiple of 32 and at most 256, got " + std::to_string(hp.head_dim));
}

// Returns the whole pages inside [p, p + bytes) to the OS: once a GPU layer's K/V are on the
// device the sequence's CPU copy is dead weight, and anonymous pages read back as zeros until
// detach() restores them. The allocation (and the sequence's memory reservation) stays.
void release_pages(void* p, size_t bytes) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(p) + page - 1) / page * page, end = (uintptr_t(p) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

struct CudaDecoder::Impl {
  const Model& model;
  CudaDecoderOptions opt;
  std::vector<char> gpu_layers;
  std::vector<int> slot_of_layer;  // index among the GPU layers, -1 for CPU layers
  GpuMemoryPlan plan;
  Stream stream;
  DeviceWeights w;
  std::vector<DeviceBuffer> kv;             // one per batch slot: [GPU layer][K, V][kv_head][n_ctx][head_dim]
  std::vector<const Sequence*> owner;       // per slot; nullptr: free
  DeviceBuffer x, xn, proj, q, att, k, v, gate, up, logits, partial, ids, pos, bases, next_ids;
  PinnedBuffer h_ids, h_pos, h_bases, h_q, h_k, h_v, h_att, h_logits, h_next_ids;

  // The split of sparse layers (exact_window.h); false: the CPU attends them whole.
  bool split = false;
  attn::QueryHashing hashing;          // projection in proj_w (hashing.w not kept); l = 0: no query codes
  std::vector<int> sparse_of_layer;    // index among the sparse layers, -1 for GPU layers
  int n_sparse = 0;
  int64_t exact_rows = 0;              // ExactWindow::capacity
  std::vector<DeviceBuffer> exact;     // per batch slot: [sparse layer][K, V][kv_head][exact_rows][head_dim]
  std::vector<ExactWindow> windows;    // per batch slot
  DeviceBuffer proj_w, codes, lse_exact, lse_cpu, cpu_att, exact_bases, exact_row, exact_last;
  PinnedBuffer h_codes, h_lse, h_exact_bases, h_exact_row, h_exact_last;

  Impl(const Model& m, const CudaDecoderOptions& o, GpuMemoryPlan p, std::vector<char> layers)
      : model(m), opt(o), gpu_layers(std::move(layers)), plan(std::move(p)) {}

  int slot_of(const Sequence& s) const {
    for (size_t i = 0; i < owner.size(); ++i)
      if (owner[i] == &s) return int(i);
    return -1;
  }
  int kv_heads() const { return model.hp.n_kv_head; }
  size_t head_elems() const { return size_t(plan.n_ctx) * size_t(model.hp.head_dim); }
  // Byte offset of (GPU layer slot, K or V, kv head) in a slot's KV buffer.
  size_t kv_offset(int layer_slot, int which, int h) const {
    return ((size_t(layer_slot) * 2 + size_t(which)) * size_t(kv_heads()) + size_t(h)) * head_elems() * 2;
  }

  void linear(const DeviceMatrix& m, const float* X, int n, float* Y) {
    gemv(m.type, m.data.data(), m.rows, m.cols, X, n, Y, stream.handle());
  }

  void allocate_scratch() {
    const HParams& hp = model.hp;
    const size_t n = size_t(opt.max_batch), e = size_t(hp.n_embd), qd = size_t(hp.n_head) * hp.head_dim,
                 kd = size_t(hp.n_kv_head) * hp.head_dim, ff = size_t(hp.n_ff), f = sizeof(float);
    x = DeviceBuffer(n * e * f), xn = DeviceBuffer(n * e * f), proj = DeviceBuffer(n * e * f);
    q = DeviceBuffer(n * qd * f), att = DeviceBuffer(n * qd * f);
    k = DeviceBuffer(n * kd * f), v = DeviceBuffer(n * kd * f);
    gate = DeviceBuffer(n * ff * f), up = DeviceBuffer(n * ff * f);
    logits = DeviceBuffer(n * size_t(hp.n_vocab) * f);
    const int64_t keys = std::max<int64_t>(plan.gpu_kv_layers > 0 ? plan.n_ctx : 0, split ? exact_rows : 0);
    if (keys > 0)
      partial = DeviceBuffer(size_t(attention_partial_floats(opt.max_batch, hp.n_head, hp.head_dim, keys,
                                                             kAttentionChunk)) * f);
    ids = DeviceBuffer(n * sizeof(int32_t)), next_ids = DeviceBuffer(n * sizeof(int32_t));
    h_next_ids = PinnedBuffer(n * sizeof(int32_t));
    pos = DeviceBuffer(n * sizeof(int64_t));
    bases = DeviceBuffer(n * sizeof(uint16_t*));
    h_ids = PinnedBuffer(n * sizeof(int32_t)), h_pos = PinnedBuffer(n * sizeof(int64_t));
    h_bases = PinnedBuffer(n * sizeof(uint16_t*));
    h_q = PinnedBuffer(n * qd * f), h_att = PinnedBuffer(n * qd * f);
    h_k = PinnedBuffer(n * kd * f), h_v = PinnedBuffer(n * kd * f);
    h_logits = PinnedBuffer(n * size_t(hp.n_vocab) * f);
    if (!split) return;
    const size_t heads = n * size_t(hp.n_head), code_bytes = heads * size_t(hashing.l) * sizeof(uint16_t);
    codes = DeviceBuffer(code_bytes), h_codes = PinnedBuffer(code_bytes);
    lse_exact = DeviceBuffer(heads * f), lse_cpu = DeviceBuffer(heads * f), h_lse = PinnedBuffer(heads * f);
    cpu_att = DeviceBuffer(n * qd * f);
    exact_bases = DeviceBuffer(n * sizeof(uint16_t*)), h_exact_bases = PinnedBuffer(n * sizeof(uint16_t*));
    exact_row = DeviceBuffer(n * sizeof(int64_t)), h_exact_row = PinnedBuffer(n * sizeof(int64_t));
    exact_last = DeviceBuffer(size_t(n_sparse) * n * sizeof(int64_t));
    h_exact_last = PinnedBuffer(size_t(n_sparse) * n * sizeof(int64_t));
  }

  // A DeviceKv over the batch's exact parts: rows `pos` (per batch row, on the device).
  DeviceKv exact_kv(const int64_t* pos_rows) const {
    DeviceKv e;
    e.base = exact_bases.as<uint16_t* const>();
    e.pos = pos_rows;
    e.capacity = exact_rows;
    e.n_kv_head = model.hp.n_kv_head;
    e.head_dim = model.hp.head_dim;
    e.bf16 = opt.kv_type == DType::BF16;
    return e;
  }

  // Copies s's exact part of every sparse layer (the prompt's exact positions and the generated
  // positions the ring keeps) from its CPU cache to slot `slot`, staged in one host buffer.
  void upload_exact(int slot, KvCache& cache, const ExactWindow& w) {
    const int64_t d = model.hp.head_dim, nkv = kv_heads();
    std::vector<uint16_t> host(plan.exact_bytes_per_seq / sizeof(uint16_t), 0);
    std::vector<std::pair<int64_t, int64_t>> rows;  // (position, row)
    const std::vector<int64_t> fixed = w.fixed_positions();
    for (size_t r = 0; r < fixed.size(); ++r) rows.emplace_back(fixed[r], int64_t(r));
    for (int64_t p = std::max(w.n_prompt(), cache.n_tokens() - w.ring()); p < cache.n_tokens(); ++p)
      if (w.row_of(p) >= 0) rows.emplace_back(p, w.row_of(p));
    for (int l = 0; l < model.hp.n_layer; ++l) {
      const int si = sparse_of_layer[size_t(l)];
      if (si < 0) continue;
      for (int which = 0; which < 2; ++which)
        for (int64_t h = 0; h < nkv; ++h) {
          const uint16_t* src = which == 0 ? cache.k_data(l, int(h)) : cache.v_data(l, int(h));
          uint16_t* dst = host.data() + ((int64_t(si) * 2 + which) * nkv + h) * exact_rows * d;
          for (const auto& [p, r] : rows) std::copy(src + p * d, src + (p + 1) * d, dst + r * d);
        }
    }
    exact[size_t(slot)].upload(host.data(), host.size() * sizeof(uint16_t));
  }

  // The sparse layer l on the CPU: q, k, v cross to the host, k/v join each sequence's CPU
  // cache, its policy attends, and the output goes back to the device.
  void attend_on_cpu(int l, std::span<Sequence* const> seqs, const std::vector<int64_t>& positions) {
    const HParams& hp = model.hp;
    const int n = int(seqs.size()), qd = hp.n_head * hp.head_dim, kd = hp.n_kv_head * hp.head_dim;
    void* s = stream.handle();
    copy_to_host_async(h_q.data(), q.data(), size_t(n) * qd * sizeof(float), s);
    copy_to_host_async(h_k.data(), k.data(), size_t(n) * kd * sizeof(float), s);
    copy_to_host_async(h_v.data(), v.data(), size_t(n) * kd * sizeof(float), s);
    stream.synchronize();
    const float *hq = h_q.as<float>(), *hk = h_k.as<float>(), *hv = h_v.as<float>();
    float* hatt = h_att.as<float>();
    auto one = [&](int i, int threads) {
      KvCache& cache = seqs[i]->external_step().cache();
      cache.write(l, positions[i], hk + size_t(i) * kd, hv + size_t(i) * kd);
      KvView view = cache.view(l);
      view.n_tokens = positions[i] + 1;
      seqs[i]->external_step().policy().attend(l, view, hq + size_t(i) * qd, hatt + size_t(i) * qd, threads);
    };
    detail::for_each_sequence(n, opt.n_threads, one);
    copy_to_device_async(att.data(), h_att.data(), size_t(n) * qd * sizeof(float), s);
  }

  // The sparse layer l split: the GPU attends each sequence's exact part (queued before the CPU
  // work, so it runs while the CPU samples), the CPU policy the sampled part from the GPU's
  // query codes, and the two merge by LSE on the GPU. A sequence whose exact part the device
  // does not hold attends nothing on the GPU and the whole layer on the CPU, with LSE 0 against
  // the GPU's -inf, so the merge returns the CPU's output.
  void attend_split(int l, std::span<Sequence* const> seqs, const std::vector<int64_t>& positions) {
    const HParams& hp = model.hp;
    const int n = int(seqs.size()), H = hp.n_head, qd = H * hp.head_dim, kd = hp.n_kv_head * hp.head_dim;
    const int si = sparse_of_layer[size_t(l)];
    void* s = stream.handle();
    copy_to_host_async(h_q.data(), q.data(), size_t(n) * qd * sizeof(float), s);
    copy_to_host_async(h_k.data(), k.data(), size_t(n) * kd * sizeof(float), s);
    copy_to_host_async(h_v.data(), v.data(), size_t(n) * kd * sizeof(float), s);
    copy_to_host_async(h_codes.data(), codes.data(), size_t(n) * hashing.l * H * sizeof(uint16_t), s);
    stream.synchronize();
    int64_t* last = h_exact_last.as<int64_t>() + size_t(si) * size_t(opt.max_batch);
    std::vector<char> sampled_only(size_t(n), 0);
    int64_t max_rows = 0;
    for (int i = 0; i < n; ++i) {
      const int64_t n_tokens = positions[size_t(i)] + 1;
      attn::ExactPart part;
      int64_t rows = -1;
      if (seqs[i]->external_step().policy().exact_part(l, n_tokens, &part))
        rows = windows[size_t(slot_of(*seqs[i]))].rows_for(part, n_tokens);
      sampled_only[size_t(i)] = rows >= 0;
      last[i] = std::max<int64_t>(rows, 0) - 1;
      max_rows = std::max(max_rows, rows);
    }
    int64_t* d_last = exact_last.as<int64_t>() + size_t(si) * size_t(opt.max_batch);
    if (max_rows > 0) {
      copy_to_device_async(d_last, last, size_t(n) * sizeof(int64_t), s);
      attention_decode(exact_kv(d_last), si, q.as<float>(), n, H, max_rows, kAttentionChunk, partial.as<float>(),
                       att.as<float>(), s, lse_exact.as<float>());
    }
    const float *hq = h_q.as<float>(), *hk = h_k.as<float>(), *hv = h_v.as<float>();
    const uint16_t* hc = h_codes.as<uint16_t>();
    float *hatt = h_att.as<float>(), *hlse = h_lse.as<float>();
    auto one = [&](int i, int threads) {
      KvCache& cache = seqs[i]->external_step().cache();
      cache.write(l, positions[size_t(i)], hk + size_t(i) * kd, hv + size_t(i) * kd);
      KvView view = cache.view(l);
      view.n_tokens = positions[size_t(i)] + 1;
      attn::SequenceAttention& policy = seqs[i]->external_step().policy();
      if (sampled_only[size_t(i)]) {
        policy.attend_sampled(l, view, hq + size_t(i) * qd, hashing.l > 0 ? hc + size_t(i) * hashing.l * H : nullptr,
                              hatt + size_t(i) * qd, hlse + size_t(i) * H, threads);
      } else {
        policy.attend(l, view, hq + size_t(i) * qd, hatt + size_t(i) * qd, threads);
        std::fill(hlse + size_t(i) * H, hlse + size_t(i + 1) * H, 0.0f);
      }
    };
    detail::for_each_sequence(n, opt.n_threads, one);
    if (max_rows == 0) {  // nothing exact on the GPU: the CPU's outputs are the layer's
      copy_to_device_async(att.data(), h_att.data(), size_t(n) * qd * sizeof(float), s);
      return;
    }
    copy_to_device_async(cpu_att.data(), h_att.data(), size_t(n) * qd * sizeof(float), s);
    copy_to_device_async(lse_cpu.data(), h_lse.data(), size_t(n) * H * sizeof(float), s);
    lse_merge_pair(att.as<float>(), lse_exact.as<float>(), cpu_att.as<float>(), lse_cpu.as<float>(), n * H,
                   hp.head_dim, s);
  }

  // next == nullptr: the logits cross to the host and each sequence records them; otherwise
  // only each row's greedy token crosses, into next[i].
  void run_step(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, int32_t* next) {
    const HParams& hp = model.hp;
    const int n = int(seqs.size()), e = hp.n_embd, qd = hp.n_head * hp.head_dim, kd = hp.n_kv_head * hp.head_dim;
    void* s = stream.handle();
    std::vector<int64_t> positions(static_cast<size_t>(n));
    int64_t max_tokens = 0;
    for (int i = 0; i < n; ++i) {
      positions[size_t(i)] = seqs[i]->n_tokens();
      max_tokens = std::max(max_tokens, positions[size_t(i)] + 1);
      h_ids.as<int32_t>()[i] = tokens[i];
      h_pos.as<int64_t>()[i] = positions[size_t(i)];
      h_bases.as<uint16_t*>()[i] = kv[size_t(slot_of(*seqs[i]))].as<uint16_t>();
    }
    copy_to_device_async(ids.data(), h_ids.data(), size_t(n) * sizeof(int32_t), s);
    copy_to_device_async(pos.data(), h_pos.data(), size_t(n) * sizeof(int64_t), s);
    copy_to_device_async(bases.data(), h_bases.data(), size_t(n) * sizeof(uint16_t*), s);
    DeviceKv dkv;
    dkv.base = bases.as<uint16_t* const>();
    dkv.pos = pos.as<const int64_t>();
    dkv.capacity = plan.n_ctx;
    dkv.n_kv_head = hp.n_kv_head;
    dkv.head_dim = hp.head_dim;
    dkv.bf16 = opt.kv_type == DType::BF16;
    bool ring_writes = false;  // some sequence keeps this step's token in its exact part's ring
    if (split) {
      for (int i = 0; i < n; ++i) {
        const int slot = slot_of(*seqs[i]);
        h_exact_bases.as<uint16_t*>()[i] = exact[size_t(slot)].as<uint16_t>();
        h_exact_row.as<int64_t>()[i] = windows[size_t(slot)].row_of(positions[size_t(i)]);
        ring_writes = ring_writes || h_exact_row.as<int64_t>()[i] >= 0;
      }
      copy_to_device_async(exact_bases.data(), h_exact_bases.data(), size_t(n) * sizeof(uint16_t*), s);
      copy_to_device_async(exact_row.data(), h_exact_row.data(), size_t(n) * sizeof(int64_t), s);
    }

    float *X = x.as<float>(), *XN = xn.as<float>(), *P = proj.as<float>(), *Q = q.as<float>(), *K = k.as<float>(),
          *V = v.as<float>(), *ATT = att.as<float>(), *G = gate.as<float>(), *U = up.as<float>();
    embed_rows(w.tok_embd.type, w.tok_embd.data.data(), e, ids.as<const int32_t>(), n, X, s);
    const RopeParams& rope = hp.rope;
    const bool neox = rope.type == RopeType::Neox;
    for (int l = 0; l < hp.n_layer; ++l) {
      const DeviceLayer& L = w.layers[size_t(l)];
      rms_norm_rows(X, L.attn_norm.get(), XN, n, e, hp.rms_eps, s);
      linear(L.wq, XN, n, Q);
      linear(L.wk, XN, n, K);
      linear(L.wv, XN, n, V);
      if (L.bq.get()) add_bias_rows(Q, L.bq.get(), n, qd, s);
      if (L.bk.get()) add_bias_rows(K, L.bk.get(), n, kd, s);
      if (L.bv.get()) add_bias_rows(V, L.bv.get(), n, kd, s);
      rope_rows(Q, n, hp.n_head, hp.head_dim, dkv.pos, rope.theta, rope.linear_factor, w.rope_freq_factors.get(), neox, s);
      rope_rows(K, n, hp.n_kv_head, hp.head_dim, dkv.pos, rope.theta, rope.linear_factor, w.rope_freq_factors.get(),
                neox, s);
      const int slot = slot_of_layer[size_t(l)];
      if (slot >= 0) {
        kv_append(dkv, slot, K, V, n, s);
        attention_decode(dkv, slot, Q, n, hp.n_head, max_tokens, kAttentionChunk, partial.as<float>(), ATT, s);
      } else if (split) {
        if (hashing.l > 0)
          hash_queries(Q, n, hp.n_head, hp.head_dim, proj_w.as<float>(), hashing.ld, hashing.k, hashing.l,
                       hashing.fused, codes.as<uint16_t>(), s);
        if (ring_writes) kv_append(exact_kv(exact_row.as<const int64_t>()), sparse_of_layer[size_t(l)], K, V, n, s);
        attend_split(l, seqs, positions);
      } else {
        attend_on_cpu(l, seqs, positions);
      }
      linear(L.wo, ATT, n, P);
      add_inplace(X, P, int64_t(n) * e, s);
      rms_norm_rows(X, L.ffn_norm.get(), XN, n, e, hp.rms_eps, s);
      linear(L.w_gate, XN, n, G);
      linear(L.w_up, XN, n, U);
      swiglu(G, U, int64_t(n) * hp.n_ff, s);
      linear(L.w_down, G, n, P);
      add_inplace(X, P, int64_t(n) * e, s);
    }
    rms_norm_rows(X, w.output_norm.get(), XN, n, e, hp.rms_eps, s);
    linear(w.output_matrix(), XN, n, logits.as<float>());
    if (next) {
      greedy_tokens(logits.as<float>(), n, hp.n_vocab, next_ids.as<int32_t>(), s);
      copy_to_host_async(h_next_ids.data(), next_ids.data(), size_t(n) * sizeof(int32_t), s);
    } else {
      copy_to_host_async(h_logits.data(), logits.data(), size_t(n) * hp.n_vocab * sizeof(float), s);
    }
    stream.synchronize();
    for (int i = 0; i < n; ++i) {
      const Sequence::ExternalStep step = seqs[i]->external_step();
      step.cache().set_n_tokens(positions[size_t(i)] + 1);
      if (next) {  // recorded before next[i] is written: next may alias tokens
        step.record_token_only(tokens[i]);
        next[i] = h_next_ids.as<int32_t>()[i];
      } else {
        step.record(tokens[i], h_logits.as<float>() + size_t(i) * hp.n_vocab);
      }
    }
  }
};

CudaDecoder::CudaDecoder(const Model& model, const CudaDecoderOptions& opt) {
  const HParams& hp = model.hp;
  check_supported(hp);
  CudaDecoderOptions o = opt;
  if (o.n_ctx == 0) o.n_ctx = hp.n_ctx_train;
  check(o.kv_type == DType::BF16 || o.kv_type == DType::F16, "device cuda: the KV cache type must be bf16 or f16");
  check(o.max_batch >= 1 && o.max_batch <= kMaxBatch,
        "device cuda: batches of 1.." + std::to_string(kMaxBatch) + " sequences, got " + std::to_string(o.max_batch));
  o.attention.validate(head_shape(hp));
  std::vector<char> layers = gpu_attention_layers(o.attention, hp.n_layer);
  // Sparse layers split where the policy samples alone (magicpig, either sampler): its
  // exact_part then says per layer and sequence which positions the GPU attends. A policy
  // instance made here says so and, where it hashes queries (the collision sampler), provides
  // the projection (the same for every sequence of this configuration); the ranked sampler
  // scans key codes on the CPU and needs no query codes (hashing.l stays 0).
  const bool any_sparse = std::count(layers.begin(), layers.end(), 0) > 0;
  std::unique_ptr<attn::SequenceAttention> probe;
  attn::QueryHashing hashing;
  bool split = false;
  if (o.split_sparse && any_sparse && ExactWindow::capacity(o.attention) > 0) {
    probe = attn::make_sequence_attention(o.attention, head_shape(hp));
    split = probe->samples_alone();
    if (split && !probe->query_hashing(&hashing)) hashing = attn::QueryHashing{};
  }
  ExactSplitRequest split_req;
  if (split) {
    split_req.rows = ExactWindow::capacity(o.attention);
    split_req.lsh_l = hashing.l;
    split_req.projection_floats = int64_t(hashing.head_dim) * hashing.ld;
  }
  // The plan is checked against --gpu-mem-limit before any device is touched, then against
  // the device's free memory.
  GpuMemoryPlan plan = plan_gpu_memory(footprint(model), {o.n_ctx, o.max_batch, layers, split_req});
  check_gpu_plan(plan, SIZE_MAX, o.mem_limit);
  std::string why;
  const std::vector<DeviceInfo> devs = devices(&why);
  check(!devs.empty(), "device cuda: no CUDA device is usable (" + why + ")");
  check(o.device >= 0 && o.device < int(devs.size()),
        "device cuda: device " + std::to_string(o.device) + " does not exist (" + std::to_string(devs.size()) +
            " devices)");
  set_device(o.device);
  size_t free_b = 0, total_b = 0;
  device_memory_info(&free_b, &total_b);
  check_gpu_plan(plan, free_b, o.mem_limit);

  impl_ = std::make_unique<Impl>(model, o, plan, std::move(layers));
  Impl& d = *impl_;
  int next = 0, next_sparse = 0;
  for (char c : d.gpu_layers) {
    d.slot_of_layer.push_back(c ? next++ : -1);
    d.sparse_of_layer.push_back(c ? -1 : next_sparse++);
  }
  d.n_sparse = next_sparse;
  d.w = upload_weights(model);
  for (int i = 0; i < o.max_batch; ++i) d.kv.emplace_back(plan.kv_bytes_per_seq);
  d.owner.assign(size_t(o.max_batch), nullptr);
  if (split) {
    d.split = true;
    d.hashing = hashing;
    d.exact_rows = split_req.rows;
    const size_t proj_bytes = size_t(split_req.projection_floats) * sizeof(float);
    d.proj_w = DeviceBuffer(proj_bytes);
    d.proj_w.upload(hashing.w, proj_bytes);
    d.hashing.w = nullptr;  // the probe policy owns it and goes now
    for (int i = 0; i < o.max_batch; ++i) d.exact.emplace_back(plan.exact_bytes_per_seq);
    d.windows.assign(size_t(o.max_batch), ExactWindow{});
  }
  d.allocate_scratch();
}

CudaDecoder::~CudaDecoder() = default;

const GpuMemoryPlan& CudaDecoder::plan() const { return impl_->plan; }

bool CudaDecoder::splits_sparse_layers() const { return impl_->split; }

bool CudaDecoder::attached(const Sequence& s) const { return impl_->slot_of(s) >= 0; }

void CudaDecoder::attach(Sequence& s) {
  Impl& d = *impl_;
  check(&s.model() == &d.model, "device cuda: the sequence belongs to another model than the decoder");
  check(d.slot_of(s) < 0, "device cuda: the sequence is attached already");
  check(s.options().kv_type == d.opt.kv_type, "device cuda: the sequence's KV cache type differs from the decoder's");
  check(s.n_ctx() <= d.plan.n_ctx, "device cuda: the sequence's context of " + std::to_string(s.n_ctx()) +
                                       " tokens exceeds the decoder's " + std::to_string(d.plan.n_ctx));
  check(gpu_attention_layers(s.options().attention, d.model.hp.n_layer) == d.gpu_layers,
        "device cuda: the sequence's attention policy attends other layers densely than the decoder was planned for");
  check(s.options().device_kv_layers.empty() || s.options().device_kv_layers == d.gpu_layers,
        "device cuda: the sequence's memory budget leaves other layers' K/V to the device than the decoder holds");
  const attn::SequenceAttention& policy = s.external_step().policy();
  attn::QueryHashing hashing;
  const bool hashes = policy.query_hashing(&hashing);
  check(!d.split || policy.samples_alone(),
        "device cuda: the sequence's attention policy does not split its sparse layers as the decoder's does");
  check(!d.split || (hashes == (d.hashing.l > 0) &&
                     (!hashes || (hashing.k == d.hashing.k && hashing.l == d.hashing.l && hashing.ld == d.hashing.ld &&
                                  hashing.fused == d.hashing.fused &&
                                  s.options().attention.lsh_seed == d.opt.attention.lsh_seed))),
        "device cuda: the sequence's LSH projection (K, L, seed) differs from the decoder's");
  const auto free_slot = std::find(d.owner.begin(), d.owner.end(), nullptr);
  check(free_slot != d.owner.end(), "device cuda: all " + std::to_string(d.opt.max_batch) +
                                        " batch slots are in use (raise the planned batch)");
  const int slot = int(free_slot - d.owner.begin());
  set_device(d.opt.device);
  s.finish_prompt();
  KvCache& cache = s.external_step().cache();
  const size_t rows = size_t(cache.n_tokens()) * size_t(d.model.hp.head_dim) * 2;
  const size_t layer_bytes = size_t(d.kv_heads()) * size_t(cache.shape().capacity) * size_t(d.model.hp.head_dim) * 2;
  for (int l = 0; l < d.model.hp.n_layer; ++l) {
    const int ls = d.slot_of_layer[size_t(l)];
    if (ls < 0) continue;
    for (int h = 0; h < d.kv_heads(); ++h) {
      d.kv[size_t(slot)].upload(cache.k_data(l, h), rows, d.kv_offset(ls, 0, h));
      d.kv[size_t(slot)].upload(cache.v_data(l, h), rows, d.kv_offset(ls, 1, h));
    }
  }
  if (d.split) {
    // The exact part as the policy defines it for the next step; a layer that does not split
    // leaves the window invalid and the CPU attends that sequence's sparse layers whole.
    const int first_sparse = int(std::find(d.sparse_of_layer.begin(), d.sparse_of_layer.end(), 0) -
                                 d.sparse_of_layer.begin());
    attn::ExactPart part;
    ExactWindow window;
    if (s.external_step().policy().exact_part(first_sparse, cache.n_tokens() + 1, &part))
      window = ExactWindow(part, cache.n_prompt(), d.opt.attention.local, d.exact_rows);
    d.upload_exact(slot, cache, window);
    d.windows[size_t(slot)] = window;
  }
  d.owner[size_t(slot)] = &s;
  // Only after every upload succeeded: a failed attach leaves the sequence as it was.
  for (int l = 0; l < d.model.hp.n_layer; ++l)
    if (d.slot_of_layer[size_t(l)] >= 0) {
      release_pages(cache.k_data(l, 0), layer_bytes);
      release_pages(cache.v_data(l, 0), layer_bytes);
    }
}

void CudaDecoder::detach(Sequence& s, bool restore_kv) {
  Impl& d = *impl_;
  const int slot = d.slot_of(s);
  check(slot >= 0, "device cuda: the sequence to detach is not attached");
  if (!restore_kv) {
    d.owner[size_t(slot)] = nullptr;
    return;
  }
  set_device(d.opt.device);
  KvCache& cache = s.external_step().cache();
  const size_t bytes = size_t(cache.n_tokens()) * size_t(d.model.hp.head_dim) * 2;
  for (int l = 0; l < d.model.hp.n_layer; ++l) {
    const int ls = d.slot_of_layer[size_t(l)];
    if (ls < 0) continue;
    for (int h = 0; h < d.kv_heads(); ++h) {
      d.kv[size_t(slot)].download(cache.k_data(l, h), bytes, d.kv_offset(ls, 0, h));
      d.kv[size_t(slot)].download(cache.v_data(l, h), bytes, d.kv_offset(ls, 1, h));
    }
  }
  d.owner[size_t(slot)] = nullptr;
}

void CudaDecoder::validate_step(std::span<Sequence* const> seqs, std::span<const int32_t> tokens) const {
  const Impl& d = *impl_;
  check(!seqs.empty(), "device cuda: the batch is empty");
  check(seqs.size() == tokens.size(), "device cuda: " + std::to_string(seqs.size()) + " sequences but " +
                                          std::to_string(tokens.size()) + " tokens");
  std::set<const Sequence*> seen;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string who = "device cuda: sequence " + std::to_string(i);
    check(seqs[i] != nullptr && d.slot_of(*seqs[i]) >= 0, who + " is not attached to the decoder");
    check(seen.insert(seqs[i]).second, who + " appears twice in the batch");
    check(seqs[i]->n_tokens() < seqs[i]->n_ctx(), who + ": context is full (" + std::to_string(seqs[i]->n_ctx()) +
                                                       " tokens); raise n_ctx to generate more");
    check(tokens[i] >= 0 && tokens[i] < d.model.hp.n_vocab,
          who + ": token id " + std::to_string(tokens[i]) + " is out of range");
  }
}

void CudaDecoder::step(std::span<Sequence* const> seqs, std::span<const int32_t> tokens) {
  validate_step(seqs, tokens);
  set_device(impl_->opt.device);
  impl_->run_step(seqs, tokens, nullptr);
}

void CudaDecoder::step_greedy(std::span<Sequence* const> seqs, std::span<const int32_t> tokens,
                              std::span<int32_t> next) {
  validate_step(seqs, tokens);
  check(next.size() == seqs.size(), "device cuda: " + std::to_string(seqs.size()) + " sequences but room for " +
                                        std::to_string(next.size()) + " greedy tokens");
  set_device(impl_->opt.device);
  impl_->run_step(seqs, tokens, next.data());
}

}  // namespace cuda
}  // namespace mp
