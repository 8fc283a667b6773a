"""longattn through its benchmark C ABI (bench/gpu/longattn_capi.cpp, liblongattn_capi.so),
loaded with ctypes: raw device pointers of contiguous torch tensors, torch's current stream.

Internal variants (L2 sections, split-KV, dynamic tiles, ...) are chosen with
longattn_bench_set_overrides; `with la.overrides("sections=0"): ...` sets a spec and always
restores the shipped rules ("") afterwards.
"""
import contextlib
import ctypes

P, I64, I32, F32, S = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float, ctypes.c_char_p
ERR_LEN = 1024


def _ptr(t):
    return None if t is None else t.data_ptr()


def _stream():
    import torch
    return torch.cuda.current_stream().cuda_stream


class LongAttn:
    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.err = ctypes.create_string_buffer(ERR_LEN)
        sig = {
            "longattn_bench_set_overrides": [S, S, I32],
            "longattn_bench_forward_ex": [P] * 5 + [I32] + [I64] * 6 + [I32, F32, F32, P] + [I64] * 3 + [P, S, I32],
            "longattn_bench_forward_ragged": [P] * 5 + [I64] * 6 + [I32, P, S, I32],
            "longattn_bench_forward_paged": [P] * 6 + [I64] * 8 + [I32, P, S, I32],
            "longattn_bench_forward_split": [P] * 4 + [I64] * 6 + [I32, P, S, I32],
            "longattn_bench_forward_fp8": [P] * 8 + [I64] * 6 + [I32, I32, P, S, I32],
            "longattn_bench_forward_fp8_ex": [P] * 8 + [I64] * 6 + [I32, I32, I64, I64, P, S, I32],
            "longattn_bench_forward_fp8_mask": [P] * 8 + [I64] * 6 + [I32, I32, I64, I64, I64, P, S, I32],
            "longattn_bench_forward_kvcache": [P] * 10 + [I64] * 11 + [I32, I32, P, S, I32],
        }
        self.missing = []
        for name, args in sig.items():
            try:
                f = getattr(self.lib, name)
            except AttributeError:
                self.missing.append(name)
                continue
            f.restype = ctypes.c_int
            f.argtypes = args
        if "longattn_bench_forward_ex" in self.missing:
            raise RuntimeError(f"{path}: no longattn_bench_forward_ex")

    def has(self, name):
        return name not in self.missing

    def _check(self, rc):
        if rc != 0:
            raise RuntimeError(self.err.value.decode(errors="replace"))

    # -- overrides ------------------------------------------------------------------------
    def set_overrides(self, spec):
        if not self.has("longattn_bench_set_overrides"):
            if spec:
                raise RuntimeError("this liblongattn_capi.so has no longattn_bench_set_overrides")
            return
        self._check(self.lib.longattn_bench_set_overrides((spec or "").encode(), self.err, ERR_LEN))

    @contextlib.contextmanager
    def overrides(self, spec):
        self.set_overrides(spec)
        try:
            yield
        finally:
            self.set_overrides("")

    # -- calls ----------------------------------------------------------------------------
    def dense(self, q, k, v, out, causal, lse=None, softcap=0.0, sinks=None, wl=-1, wr=-1, chunk=0):
        """q (b, sq, hq, d), k / v (b, sk, hk, d), out like q: bf16 or f16."""
        import torch
        b, sq, hq, d = q.shape
        sk, hk = k.shape[1], k.shape[2]
        dt = 0 if q.dtype == torch.bfloat16 else 1
        self._check(self.lib.longattn_bench_forward_ex(
            _ptr(q), _ptr(k), _ptr(v), _ptr(out), _ptr(lse), dt, b, sq, sk, hq, hk, d, int(causal), 0.0,
            float(softcap), _ptr(sinks), int(wl), int(wr), int(chunk), _stream(), self.err, ERR_LEN))

    def ragged(self, q, k, v, out, cu, max_len, causal):
        """Packed (total, heads, d) bf16 q / k / v / out, int32 cu_seqlens shared by q and k."""
        total, hq, d = q.shape
        self._check(self.lib.longattn_bench_forward_ragged(
            _ptr(q), _ptr(k), _ptr(v), _ptr(out), _ptr(cu), cu.numel() - 1, total, max_len, hq, k.shape[1], d,
            int(causal), _stream(), self.err, ERR_LEN))

    def paged(self, q, kp, vp, out, page_table, causal, seqused=None):
        """Dense bf16 q / out (b, sq, hq, d); kp / vp pages (num_pages, page, hk, d); int32 table."""
        b, sq, hq, d = q.shape
        self._check(self.lib.longattn_bench_forward_paged(
            _ptr(q), _ptr(kp), _ptr(vp), _ptr(out), _ptr(page_table), _ptr(seqused), b, sq, kp.shape[0],
            kp.shape[1], page_table.shape[1], hq, kp.shape[2], d, int(causal), _stream(), self.err, ERR_LEN))

    def split(self, q, k, v, out, causal):
        """bf16 q / k of head dim d_qk, v / out of d_v (192 / 128), seq_q == seq_k."""
        b, s, hq, dqk = q.shape
        self._check(self.lib.longattn_bench_forward_split(
            _ptr(q), _ptr(k), _ptr(v), _ptr(out), b, s, hq, k.shape[2], dqk, v.shape[3], int(causal), _stream(),
            self.err, ERR_LEN))

    def kvcache(self, q, kc, vc, out, cache_seqlens, causal, page_table=None, k_new=None, v_new=None, cos=None,
                sin=None, interleaved=False):
        """flash_attn_with_kvcache's serving call (bf16): q / out (b, sq, hq, d); kc / vc the cache,
        dense (b, slots, hk, d) or pages (pool, page, hk, d) with an int32 table (b, max_pages);
        int32 cache_seqlens (b); k_new / v_new (b, n, hk, d) appended in place (None: attention
        only); cos / sin (seqlen_ro, rotary_dim / 2) bf16 rotary (None: none)."""
        if not self.has("longattn_bench_forward_kvcache"):
            raise RuntimeError("this liblongattn_capi.so has no longattn_bench_forward_kvcache")
        b, sq, hq, d = q.shape
        n = 0 if k_new is None else k_new.shape[1]
        ro, rd = (0, 0) if cos is None else (cos.shape[0], 2 * cos.shape[1])
        mp = 0 if page_table is None else page_table.shape[1]
        self._check(self.lib.longattn_bench_forward_kvcache(
            _ptr(q), _ptr(kc), _ptr(vc), _ptr(out), _ptr(page_table), _ptr(cache_seqlens), _ptr(k_new), _ptr(v_new),
            _ptr(cos), _ptr(sin), b, sq, kc.shape[0], kc.shape[1], mp, n, hq, kc.shape[2], d, ro, rd, int(causal),
            int(interleaved), _stream(), self.err, ERR_LEN))

    def fp8(self, q, k, v, out, qd, kd, vd, causal, lse=None, wl=-1, wr=-1, chunk=0):
        """e4m3 q / k / v (b, s, h, d), float32 descales (b, hk), out bf16 / f16 / f32; wl / wr:
        a sliding window (-1: unbounded); chunk: keys per attention chunk (0: none)."""
        import torch
        if not self.has("longattn_bench_forward_fp8"):
            raise RuntimeError("this liblongattn_capi.so has no longattn_bench_forward_fp8")
        b, sq, hq, d = q.shape
        sk, hk = k.shape[1], k.shape[2]
        ot = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}[out.dtype]
        args = (_ptr(q), _ptr(k), _ptr(v), _ptr(out), _ptr(lse), _ptr(qd), _ptr(kd), _ptr(vd), b, sq, sk, hq, hk, d,
                int(causal), ot)
        if wl < 0 and wr < 0 and chunk <= 0:
            self._check(self.lib.longattn_bench_forward_fp8(*args, _stream(), self.err, ERR_LEN))
            return
        if chunk > 0:
            if not self.has("longattn_bench_forward_fp8_mask"):
                raise RuntimeError("this liblongattn_capi.so has no longattn_bench_forward_fp8_mask (fp8 chunks)")
            self._check(self.lib.longattn_bench_forward_fp8_mask(*args, int(wl), int(wr), int(chunk), _stream(),
                                                                 self.err, ERR_LEN))
            return
        if not self.has("longattn_bench_forward_fp8_ex"):
            raise RuntimeError("this liblongattn_capi.so has no longattn_bench_forward_fp8_ex (fp8 windows)")
        self._check(self.lib.longattn_bench_forward_fp8_ex(*args, int(wl), int(wr), _stream(), self.err, ERR_LEN))
