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
#include "common/error.h"
#include "engine/sequence.h"
#include "engine/sequence_step_access.h"
#include "model/forward.h"
#include "model/model.h"

namespace mp {

namespace cuda {

namespace {

using A = SequenceStepAccess;

void check_supported(const HParams& hp) {
  const bool plain = hp.arch != "gemma3" && !hp.qk_norm && !hp.post_norms && hp.sliding_window == 0 &&
                     hp.logit_softcap <= 0 && hp.q_scale == 1.0f && hp.embed_scale == 1.0f &&
                     hp.ffn_act == FfnActivation::Silu;
  check(plain, "--device cuda supports the llama and qwen2 architectures; '" + hp.arch +
                   "' (QK-norm, post-norms, GeGLU, sliding layers or soft-capping) is not supported on the GPU");
  check(hp.head_dim % 32 == 0 && hp.head_dim <= 256,
        "--device cuda needs head_dim to be a multiple of 32 and at most 256, got " + std::to_string(hp.head_dim));
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
  DeviceBuffer x, xn, proj, q, att, k, v, gate, up, logits, partial, ids, pos, bases;
  PinnedBuffer h_ids, h_pos, h_bases, h_q, h_k, h_v, h_att, h_logits;

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
    if (plan.gpu_kv_layers > 0)
      partial = DeviceBuffer(size_t(attention_partial_floats(opt.max_batch, hp.n_head, hp.head_dim, plan.n_ctx,
                                                             kAttentionChunk)) * f);
    ids = DeviceBuffer(n * sizeof(int32_t)), pos = DeviceBuffer(n * sizeof(int64_t));
    bases = DeviceBuffer(n * sizeof(uint16_t*));
    h_ids = PinnedBuffer(n * sizeof(int32_t)), h_pos = PinnedBuffer(n * sizeof(int64_t));
    h_bases = PinnedBuffer(n * sizeof(uint16_t*));
    h_q = PinnedBuffer(n * qd * f), h_att = PinnedBuffer(n * qd * f);
    h_k = PinnedBuffer(n * kd * f), h_v = PinnedBuffer(n * kd * f);
    h_logits = PinnedBuffer(n * size_t(hp.n_vocab) * f);
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
      KvCache& cache = A::cache(*seqs[i]);
      cache.write(l, positions[i], hk + size_t(i) * kd, hv + size_t(i) * kd);
      KvView view = cache.view(l);
      view.n_tokens = positions[i] + 1;
      A::policy(*seqs[i]).attend(l, view, hq + size_t(i) * qd, hatt + size_t(i) * qd, threads);
    };
    const int threads = std::max(1, opt.n_threads);
    if (n < threads) {
      for (int i = 0; i < n; ++i) one(i, threads);
    } else {
      std::exception_ptr error;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
      for (int i = 0; i < n; ++i) {
        try {
          one(i, 1);
        } catch (...) {
#pragma omp critical(mp_cuda_attend_error)
          if (!error) error = std::current_exception();
        }
      }
      if (error) std::rethrow_exception(error);
    }
    copy_to_device_async(att.data(), h_att.data(), size_t(n) * qd * sizeof(float), s);
  }

  void run_step(std::span<Sequence* const> seqs, std::span<const int32_t> tokens) {
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
    copy_to_host_async(h_logits.data(), logits.data(), size_t(n) * hp.n_vocab * sizeof(float), s);
    stream.synchronize();
    for (int i = 0; i < n; ++i) {
      A::cache(*seqs[i]).set_n_tokens(positions[size_t(i)] + 1);
      A::record(*seqs[i], tokens[i], h_logits.as<float>() + size_t(i) * hp.n_vocab);
    }
  }
};

CudaDecoder::CudaDecoder(const Model& model, const CudaDecoderOptions& opt) {
  const HParams& hp = model.hp;
  check_supported(hp);
  CudaDecoderOptions o = opt;
  if (o.n_ctx == 0) o.n_ctx = hp.n_ctx_train;
  check(o.kv_type == DType::BF16 || o.kv_type == DType::F16, "--device cuda: the KV cache type must be bf16 or f16");
  check(o.max_batch >= 1 && o.max_batch <= kMaxBatch,
        "--device cuda: batches of 1.." + std::to_string(kMaxBatch) + " sequences, got " + std::to_string(o.max_batch));
  o.attention.validate(head_shape(hp));
  std::vector<char> layers = gpu_attention_layers(o.attention, hp.n_layer);
  // The plan is checked against --gpu-mem-limit before any device is touched, then against
  // the device's free memory.
  GpuMemoryPlan plan = plan_gpu_memory(footprint(model), {o.n_ctx, o.max_batch, layers});
  check_gpu_plan(plan, SIZE_MAX, o.mem_limit);
  std::string why;
  const std::vector<DeviceInfo> devs = devices(&why);
  check(!devs.empty(), "--device cuda: no CUDA device is usable (" + why + ")");
  check(o.device >= 0 && o.device < int(devs.size()),
        "--device cuda: device " + std::to_string(o.device) + " does not exist (" + std::to_string(devs.size()) +
            " devices)");
  set_device(o.device);
  size_t free_b = 0, total_b = 0;
  device_memory_info(&free_b, &total_b);
  check_gpu_plan(plan, free_b, o.mem_limit);

  impl_ = std::make_unique<Impl>(model, o, plan, std::move(layers));
  Impl& d = *impl_;
  int next = 0;
  for (char c : d.gpu_layers) d.slot_of_layer.push_back(c ? next++ : -1);
  d.w = upload_weights(model);
  for (int i = 0; i < o.max_batch; ++i) d.kv.emplace_back(plan.kv_bytes_per_seq);
  d.owner.assign(size_t(o.max_batch), nullptr);
  d.allocate_scratch();
}

CudaDecoder::~CudaDecoder() = default;

const GpuMemoryPlan& CudaDecoder::plan() const { return impl_->plan; }

bool CudaDecoder::attached(const Sequence& s) const { return impl_->slot_of(s) >= 0; }

void CudaDecoder::attach(Sequence& s) {
  Impl& d = *impl_;
  check(&A::model(s) == &d.model, "--device cuda: the sequence belongs to another model than the decoder");
  check(d.slot_of(s) < 0, "--device cuda: the sequence is attached already");
  check(s.options().kv_type == d.opt.kv_type, "--device cuda: the sequence's KV cache type differs from the decoder's");
  check(s.n_ctx() <= d.plan.n_ctx, "--device cuda: the sequence's context of " + std::to_string(s.n_ctx()) +
                                       " tokens exceeds the decoder's " + std::to_string(d.plan.n_ctx));
  check(gpu_attention_layers(s.options().attention, d.model.hp.n_layer) == d.gpu_layers,
        "--device cuda: the sequence's attention policy attends other layers densely than the decoder was planned for");
  const auto free_slot = std::find(d.owner.begin(), d.owner.end(), nullptr);
  check(free_slot != d.owner.end(), "--device cuda: all " + std::to_string(d.opt.max_batch) +
                                        " batch slots are in use (raise the planned batch)");
  const int slot = int(free_slot - d.owner.begin());
  set_device(d.opt.device);
  s.finish_prompt();
  KvCache& cache = A::cache(s);
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
  check(slot >= 0, "--device cuda: the sequence to detach is not attached");
  if (!restore_kv) {
    d.owner[size_t(slot)] = nullptr;
    return;
  }
  set_device(d.opt.device);
  KvCache& cache = A::cache(s);
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

void CudaDecoder::step(std::span<Sequence* const> seqs, std::span<const int32_t> tokens) {
  Impl& d = *impl_;
  check(!seqs.empty(), "--device cuda: the batch is empty");
  check(seqs.size() == tokens.size(), "--device cuda: " + std::to_string(seqs.size()) + " sequences but " +
                                          std::to_string(tokens.size()) + " tokens");
  std::set<const Sequence*> seen;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string who = "--device cuda: sequence " + std::to_string(i);
    check(seqs[i] != nullptr && d.slot_of(*seqs[i]) >= 0, who + " is not attached to the decoder");
    check(seen.insert(seqs[i]).second, who + " appears twice in the batch");
    check(seqs[i]->n_tokens() < seqs[i]->n_ctx(), who + ": context is full (" + std::to_string(seqs[i]->n_ctx()) +
                                                       " tokens); raise -c to generate more");
    check(tokens[i] >= 0 && tokens[i] < d.model.hp.n_vocab,
          who + ": token id " + std::to_string(tokens[i]) + " is out of range");
  }
  set_device(d.opt.device);
  d.run_step(seqs, tokens);
}

}  // namespace cuda
}  // namespace mp
