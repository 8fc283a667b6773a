// CPU backend driver: resolves addresses and masks for each work item, hands items to
// threads through one atomic counter, and runs the ISA kernel on each. Every item is
// computed by exactly one thread with no cross-item reduction, so the result is bitwise
// identical for any thread count and any schedule.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "common/problem.h"
#include "cpu/kernel_api.h"
#include "cpu/work_items.h"

namespace longattn::detail {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

// 64-byte aligned float buffer (aligned vector loads in the kernels).
struct AlignedFloats {
  float* p = nullptr;
  explicit AlignedFloats(int64_t n)
      : p(static_cast<float*>(::operator new(size_t(n > 0 ? n : 1) * sizeof(float),
                                             std::align_val_t(64)))) {}
  ~AlignedFloats() { ::operator delete(p, std::align_val_t(64)); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
};

// Per-thread views; sized once before any thread starts, so workers never allocate.
struct ThreadState {
  std::vector<cpu::RowDesc> rows;
  std::vector<const void*> krow, vrow;
};

struct Driver {
  const Args& a;
  const Problem& p;
  const cpu::CpuKernel& kernel;
  cpu::KernelConst kc;
  std::vector<SeqInfo> seqs;
  std::vector<cpu::WorkItem> items;
  int64_t in_size = 2, out_size = 2;

  void run_item(const cpu::WorkItem& w, ThreadState& ts, float* scratch) const {
    const SeqInfo& s = seqs[size_t(w.b)];
    const int64_t g = p.group;
    const char* qb = static_cast<const char*>(a.q.data);
    char* ob = static_cast<char*>(a.out.data);
    float* lb = static_cast<float*>(a.lse.data);
    const float* sinks = static_cast<const float*>(a.sinks.data);
    int64_t r = 0;
    for (int64_t i = w.i0; i < w.i1; ++i) {
      int64_t lo, hi;
      visible_range(p.mask, query_position(p, s, i), s.k_len, &lo, &hi);
      for (int64_t gi = 0; gi < g; ++gi, ++r) {
        const int64_t h = w.hk * g + gi;
        cpu::RowDesc& d = ts.rows[size_t(r)];
        d.q = qb + q_offset(a, p, w.b, s, i, h) * in_size;
        d.out = ob + out_offset(a, p, w.b, s, i, h) * out_size;
        d.lse = p.has_lse ? lb + lse_offset(a, p, w.b, s, i, h) : nullptr;
        d.lo = lo;
        d.hi = hi;
        d.sink2 = p.has_sinks ? sinks[h * a.sinks.stride[0]] * kLog2e : 0.0f;
      }
    }
    const char* kb = static_cast<const char*>(a.k.data);
    const char* vb = static_cast<const char*>(a.v.data);
    for (int64_t j = w.key_lo; j < w.key_hi; ++j) {
      ts.krow[size_t(j - w.key_lo)] = kb + k_offset(a, p, w.b, s, j, w.hk) * in_size;
      ts.vrow[size_t(j - w.key_lo)] = vb + v_offset(a, p, w.b, s, j, w.hk) * in_size;
    }
    cpu::ItemView view;
    view.rows = r;
    view.row = ts.rows.data();
    view.key_lo = w.key_lo;
    view.key_hi = w.key_hi;
    view.krow = ts.krow.data();
    view.vrow = ts.vrow.data();
    view.q_descale = descale(a.q_descale, w.b, w.hk);
    view.k_descale = descale(a.k_descale, w.b, w.hk);
    view.v_descale = descale(a.v_descale, w.b, w.hk);
    kernel.process(kc, view, scratch);
  }
};

}  // namespace

Status cpu_forward(const Args& a, const Problem& p) {
  if (!p.meta_on_host)
    return Status::NotSupported("backend cpu: cu_seqlens/seqused_k/page_table must be host tensors");
  if (p.batch == 0 || p.heads_q == 0) return Status::Ok();

  Driver dr{a, p, cpu::select_kernel(p.in_dtype, a.cpu_isa), {}, {}, {}};
  dr.kc.dqk = p.dim_qk;
  dr.kc.dv = p.dim_v;
  dr.kc.in = p.in_dtype;
  dr.kc.out = p.out_dtype;
  dr.kc.qscale2 = p.scale * kLog2e;
  dr.kc.softcap2 = p.softcap > 0.0f ? p.softcap * kLog2e : 0.0f;
  dr.kc.has_sinks = p.has_sinks;
  dr.in_size = dtype_size(p.in_dtype);
  dr.out_size = dtype_size(p.out_dtype);

  int threads = cpu_threads(a.num_threads);
  try {
    dr.seqs.resize(size_t(p.batch));
    int64_t total_q = 0;
    for (int64_t b = 0; b < p.batch; ++b) {
      dr.seqs[size_t(b)] = seq_info(a, p, b);
      total_q += dr.seqs[size_t(b)].q_len;
    }
    const int64_t block = cpu::block_tokens(p, dr.kernel.mr, dr.kernel.rows_target, threads, total_q);
    dr.items = cpu::build_work_items(p, dr.seqs, block);
    if (dr.items.empty()) return Status::Ok();
    if (int64_t(threads) > int64_t(dr.items.size())) threads = int(dr.items.size());

    int64_t rows_max = 0, keys_max = 1;
    for (const cpu::WorkItem& w : dr.items) {
      rows_max = std::max(rows_max, (w.i1 - w.i0) * p.group);
      keys_max = std::max(keys_max, w.key_hi - w.key_lo);
    }
    const int64_t scratch_n = dr.kernel.scratch_floats(dr.kc, rows_max);
    std::vector<ThreadState> states(static_cast<size_t>(threads));
    std::vector<std::unique_ptr<AlignedFloats>> scratch;
    for (ThreadState& ts : states) {
      ts.rows.resize(size_t(rows_max));
      ts.krow.resize(size_t(keys_max));
      ts.vrow.resize(size_t(keys_max));
      scratch.push_back(std::make_unique<AlignedFloats>(scratch_n));
    }

    std::atomic<size_t> next{0};
    auto worker = [&](int t) {
      for (;;) {
        const size_t i = next.fetch_add(1, std::memory_order_relaxed);
        if (i >= dr.items.size()) return;
        dr.run_item(dr.items[i], states[size_t(t)], scratch[size_t(t)]->p);
      }
    };
    std::vector<std::thread> pool;
    pool.reserve(size_t(threads));  // no allocation (and no throw) once threads run
    for (int t = 1; t < threads; ++t) {
      try {
        pool.emplace_back(worker, t);
      } catch (const std::system_error&) {
        break;  // fewer threads than asked: the queue still covers every item
      }
    }
    worker(0);
    for (std::thread& th : pool) th.join();
  } catch (const std::bad_alloc&) {
    return Status::Error("backend cpu: out of memory for work items or scratch buffers");
  }
  return Status::Ok();
}

}  // namespace longattn::detail

namespace longattn {
// The one place the CPU backend reads the environment (documented in README.md).
int cpu_threads(int requested) {
  return detail::cpu::resolve_threads(requested, std::getenv("LONGATTN_NUM_THREADS"));
}
}  // namespace longattn
